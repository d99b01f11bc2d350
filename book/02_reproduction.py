# ---
# jupyter:
#   jupytext:
#     formats: ipynb,py:percent
#     text_representation:
#       extension: .py
#       format_name: percent
#       format_version: '1.3'
#       jupytext_version: 1.19.6
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # Reproducing the paper's models
#
# Theorem 1 says that attention *can* compute a convolution. {cite:t}`cordonnier2020relationship` then ask
# what attention layers *learn* when they are trained on images: they train fully attentional classifiers
# on CIFAR-10 {cite}`krizhevsky2009learning`, compare them with a ResNet18 {cite}`he2016deep`, and look at
# where their heads attend. The [Re] report {cite}`varma2021re` re-implemented these experiments. This
# chapter trains (or loads) the same models with `attnlib` and sets our numbers beside theirs.
#
# **The models.** The fully attentional classifier maps a $32 \times 32 \times 3$ image by an invertible
# $2 \times 2$ down-sampling (space-to-depth) to a $16 \times 16 \times 12$ grid, embeds it linearly to the
# hidden size (400), applies 6 blocks of multi-head self-attention and an MLP (512) with layer norms and
# dropout 0.1, averages over positions and classifies. Its attention uses one of three relative
# positional encodings:
#
# - **quadratic, isotropic**: each head $h$ scores a key by $-\alpha^{(h)} \|\delta - \Delta^{(h)}\|^2$ (the
#   encoding of Theorem 1), with a learned centre $\Delta^{(h)}$ and width $\alpha^{(h)}$;
# - **quadratic, non-isotropic**: $-\tfrac12 (\delta - \Delta^{(h)})^\top \Sigma^{(h)\,-1} (\delta - \Delta^{(h)})$
#   with a learned $2 \times 2$ matrix $\Sigma^{(h)\,-1/2}$ per head;
# - **learned 2D**: a learned embedding per row shift and per column shift, projected to one score per
#   head; optionally **with content**, i.e. with the content term $q \cdot k / \sqrt{d_h}$ added. The
#   models with content and the 16-head models are the [Re] code's networks, whose figures they are
#   compared with: with content the first half of each head's query scores the row shift and its second
#   half the column shift, $(q_{:d_h/2} \cdot r^{row}_{\delta_1} + q_{d_h/2:} \cdot r^{col}_{\delta_2}) / \sqrt{d_h}$,
#   in place of the per-head positional score (the official code keeps that score beside $q \cdot k$); with
#   16 heads the values get their own projection. On a square grid the [Re] code pairs these scores with
#   the values of the transposed pixel (an index mix-up, checked against their code); our runs of these
#   [Re] rows compute it as their code does (`score_layout="re"`, the intended form an option) and start
#   from PyTorch's default initialisation as theirs (`init="re"`: positional tables $\mathcal N(0, 1)$),
#   where the Paper A models keep the official code's $\mathcal N(0, 0.02^2)$.
#
# With 9 heads a layer can be a $3 \times 3$ convolution (Theorem 1); the 16-head variants could be a
# $4 \times 4$ one. Chapter 5 lists every hyper-parameter, generated from the registry.
#
# **Which numbers are which.** Our numbers are measured by this code at the preset named in each table.
# The `budget` preset trains scaled-down models for a few epochs on two CPU cores (chapter 5, appendix A,
# gives its settings and reasons); it is *not* the papers' 300-epoch GPU protocol, so our accuracies are
# far lower and only comparisons between our own runs are meaningful. The published and [Re] figures are
# shown as found, each with its source and kind; figures that were not found say so.
#
# The chapter first sets our accuracies beside theirs (Table 1), then looks at where the heads of the
# trained models attend: the quadratic ones around their learned centres, the learned ones over the whole
# grid, and ends with what agrees with the papers at this budget and what does not.

# %% tags=["hide-input"]
import attnbook as book
from attnbook import viz
from attnlib import experiments, theory
from attnlib.analysis import rules
from attnlib.results import tables

# %% tags=["parameters"]
preset = "budget"  # paper | budget | smoke
data = None  # None: the preset's data (CIFAR-10 from $ATTNLIB_DATA); "synthetic"; a folder
device = "auto"  # auto | cpu | cuda | cuda:N (only used to train what results/ lacks)
seed = 0  # seed of the runs (results/<experiment>/<preset>-seed<N> for N > 0)
train_missing = None  # None: train what results/ lacks, except during the book build; True; False
results_dir = None  # None: results/ at the repository root
long_preset = "long"  # preset of the 60-epoch runs also shown (ledger evidence, per-epoch measures), or the preset for none

# %% tags=["hide-input"]
params = book.check_params(
    preset=preset,
    data=data,
    device=device,
    seed=seed,
    train_missing=train_missing,
    results_dir=results_dir,
    long_preset=long_preset,
)

# %% tags=["hide-input"]
viz.set_style()
TABLE1 = tables.table1_names()
if params.train_missing:  # papermill -p train_missing True, or ATTNLIB_TRAIN_MISSING=1: train what results/ lacks
    book.train_missing([*TABLE1, "learned_9h_pos_init"], params)
runs = book.load_all(TABLE1, params)
frame = book.seeds_frame(runs, params)  # accuracy: the mean over every saved seed
book.glue_str("repro_preset", params.preset)
book.glue_text("repro_done", len(tables.complete(frame)), "{:d}")
book.glue_text("repro_total", len(frame), "{:d}")

# %% [markdown]
# ## Table 1: accuracy and size
#
# {glue:text}`repro_done` of the {glue:text}`repro_total` models of this table are saved at preset
# *{glue:text}`repro_preset`*. Accuracy is top-1 on the whole test split, as the mean ± standard deviation
# over the n saved seeds of a model (n in brackets); "params" counts trainable parameters; wall time is the
# median of single-image forward passes (float32, on the machine named below the table), measured for
# every model together, as for Table 3 in chapter 4. The figures of the papers follow in a companion table, each
# marked with its kind.

# %% tags=["hide-input"]
book.show_table(
    book.results_table(frame, params.preset),
    caption=f"Table 1. Our models at preset {params.preset}: test accuracy (mean ± sd over the n saved seeds), "
    "trainable parameters and inference wall time per image (the median, as in Table 3).",
    wrap_names=True,
)
book.note(book.timing_markdown(params))
book.note(book.provenance_markdown(frame))
book.show_table(
    book.literature_table(TABLE1),
    caption=book.literature_caption(
        TABLE1, "Table 1, companion: the published and [Re] figures of the same models"
    ),
    compact=True,
)
book.show_sources(TABLE1)
book.note_below_target(frame, params.preset)
missing = [n for n, r in runs.items() if r is None]
if missing:
    book.note_missing("Table 1", params.preset, missing, runs.status)

# %% [markdown]
# **Size and cost at the paper's settings.** Table 1 of the paper gives each model's #params and #FLOPs.
# We count both for the models as the paper's settings build them (6 layers, hidden 400, 16 × 16 tokens;
# not our budget models): parameters that train, and the floating-point operations of one forward pass on
# one 32 × 32 image, counted by PyTorch's `FlopCounterMode` (2 per multiply-add of the matrix products and
# convolutions; softmax, norms and other elementwise work not counted; the official code counts
# multiply-adds with `thop`, half as many). No printed #params or #FLOPs of Table 1 was found in the
# stored sources, so those columns say "not found"; the parameter counts derived from the official code
# (‡, not printed anywhere) check that our networks are theirs. Our models with content are the [Re] code's
# networks (its count of the 9-head one, 28,478,682, research notes B.2), not the official code's
# `--use_attention_data` network that the ‡ figure counts, so those two differ on purpose.

# %% tags=["hide-input"]
book.show_table(
    book.cost_table(TABLE1),
    caption="Table 1, size: trainable parameters and GFLOPs of one forward pass on one 32×32 image at the "
    "paper's settings, counted (attnlib.models.cost), beside the paper's printed figures and the counts derived "
    "from the official code (‡).",
    wrap_names=True,
    right=("params (counted)", "GFLOPs (counted)", "params, official code ‡"),
)

# %% tags=["hide-input"]
best = book.best_attention(frame)  # means over the saved seeds
book.glue_text("repro_best", best["model"], "{}")
book.glue_text("repro_best_acc", best["accuracy"])
book.glue_text("repro_best_seeds", best["seeds"], "{:d}")
book.glue_text("repro_resnet_acc", best["resnet"])
book.glue_text("repro_resnet_seeds", best["resnet_seeds"], "{:d}")
book.glue_str("repro_rank", book.rank_agreement(frame))  # the means over seeds
flips = book.rank_flips(frame)
re_best = book.best_reference([n for n in TABLE1 if n != "resnet18"], book.RE, "test_accuracy")
re_resnet = book.reference_value("resnet18", book.RE, "test_accuracy")
book.glue_text("repro_re_gap", None if re_best is None else (re_resnet - re_best.value) * 100, "{:.1f}")
book.glue_text("repro_our_gap", best["gap"], "{:.1f}")
book.glue_text("lit_paper_quadratic", book.reference_value("quadratic_iso_9h", book.PAPER, "test_accuracy"))
book.glue_text(
    "lit_re_quadratic", book.reference_value("quadratic_aniso_9h", book.RE, "test_accuracy"), "{:.2%}"
)
book.glue_text("lit_re_quadratic_ha", book.RE_QUADRATIC_9H_HA.value, "{:.2%}")
book.glue_text("lit_re_resnet", book.reference_value("resnet18", book.RE, "test_accuracy"), "{:.2%}")
book.glue_str("repro_epochs", book.epoch_range(params.preset))
book.glue_str("repro_learned", book.learned_protocol_phrase(frame, params.preset))

# %% [markdown]
# At this preset the best attention model, by its mean over the saved seeds, is {glue:text}`repro_best`
# at {glue:text}`repro_best_acc` test accuracy (n = {glue:text}`repro_best_seeds`), against
# {glue:text}`repro_resnet_acc` for ResNet18 (n = {glue:text}`repro_resnet_seeds`). The paper's message is
# that fully attentional models come close to the ResNet at equal size when trained for 300 epochs; the only figure of its Table 1 we could read is
# {glue:text}`lit_paper_quadratic` for the quadratic model (quoted by a benchmark page), and the [Re] logs
# give {glue:text}`lit_re_quadratic` for their quadratic 9-head run (non-isotropic, by their configuration
# of that day; we attach it to that row only) against {glue:text}`lit_re_resnet` for their ResNet18. HA
# puts their quadratic model *below* itself: their hierarchical version of it logged
# {glue:text}`lit_re_quadratic_ha` in their run logs. Their Gaussian code has a typo in the centre,
# `c + mu_2` where the official code has `c * mu_2` (research notes, B.4), so their quadratic heads attend
# around a shifted point and their learned centres are not where their heads look; our quadratic models
# use the official form.
#
# **Where the budget runs agree with the papers, and where not.** Mostly on the *order* of the models,
# not on the *size* of the gaps. {glue:text}`repro_rank`

# %% tags=["hide-input"]
if len(flips):
    book.show_table(
        flips,
        caption="Pairs of models that [Re] and our runs order differently: the accuracy of the first minus "
        "that of the second, in points, in the [Re] run logs and in our runs.",
        compact=True,
    )

# %% [markdown]
# In the [Re] logs ResNet18 ends {glue:text}`repro_re_gap` points above the best attention model after 300
# epochs; here it is {glue:text}`repro_our_gap` points ahead. A convolution has locality built in, while an
# attention model must first learn where to look, and a budget of {glue:text}`repro_epochs` epochs
# measures mostly how fast that happens. The same reading explains the order among the attention models:
# the quadratic encodings start out local (each head a Gaussian around a centre) and reach the highest
# accuracy in the fewest epochs, while the learned encodings start from near-uniform attention and
# {glue:text}`repro_learned` (appendix A tells the story of each change). Where our 16-head models rank
# differently from the 9-head ones than in [Re], remember that our 16-head learned models are also
# narrower (hidden size 40 against 64, the [Re] 16-head ratios), and that these are single runs: the
# extra seeds of chapter 4 show how far two runs of one configuration can differ. What the research
# notes could not find:

# %% tags=["hide-input"]
book.note("\n".join(f"- {line}" for line in book.NOT_FOUND[:3]), "important")

# %% [markdown]
# ## How our protocol differs from the papers'
#
# Beyond the budget's scale (smaller models, fewer epochs: appendix A), our runs differ from the papers'
# protocols in the ways listed below, each marked with the models and presets it applies to. Every row was
# read in our code and in theirs (the fold-out under the table names the files). None is a change of
# method, but with them a number of ours is never the papers' experiment repeated exactly.

# %% tags=["hide-input"]
differences, checked = book.protocol_differences_table()
book.show_table(
    differences,
    caption="How our training protocol differs from the papers' (Cordonnier et al.'s official code and the "
    "[Re] code), and where each difference applies.",
)
book.show_folded_table(checked, "Where each difference was read, in our code and in theirs")

# %% [markdown]
# ## Where quadratic heads attend
#
# A quadratic head is fully described by its centre $\Delta^{(h)}$ and its covariance. The paper reports
# that the centres leave their random initialisation and spread into a grid around the query pixel, the
# first layers attending locally and the later layers further away. {numref}`fig-centres-quadratic_iso_9h`
# to {numref}`fig-centres-quadratic_aniso_16h` show where ours ended, one panel per layer.

# %% tags=["hide-input"]
for name in ("quadratic_iso_9h", "quadratic_aniso_9h", "quadratic_aniso_16h"):
    book.show_centres(name, runs[name], f"fig-centres-{name}", params.preset, runs.status)

# %% [markdown]
# How the centres moved during training ({numref}`fig-paths-quadratic_iso_9h` and
# {numref}`fig-paths-quadratic_aniso_9h`): each line goes from a head's initial centre (hollow) to its
# final one (filled), one panel per layer.

# %% tags=["hide-input"]
for name in ("quadratic_iso_9h", "quadratic_aniso_9h"):
    book.show_centre_paths(name, runs[name], f"fig-paths-{name}", params.preset, runs.status)

# %% [markdown]
# **After longer training.** The `long` runs of the quadratic models (60-epoch CPU runs, the budget's
# models and protocol trained for a fixed 60 epochs): {glue:text}`quad_long`

# %% tags=["hide-input"]
QUADRATIC = ("quadratic_iso_9h", "quadratic_aniso_9h", "quadratic_aniso_16h")
book.glue_str("quad_long", book.show_measured_centres(QUADRATIC, runs, params))

# %% [markdown]
# ## What learned encodings attend to
#
# A learned 2D encoding is free to take any shape. Without content its attention does not depend on the
# image, so one map per head describes it; the paper finds that several heads attend to a single pixel at
# a fixed shift, as Lemma 1 requires. With content, attention varies with the image: we show it for one
# test image and averaged over the saved test images ({numref}`fig-repro-learned_9h-one` to
# {numref}`fig-repro-learned_content_9h-mean`). Each row is a layer, each column a head.

# %% tags=["hide-input"]
for name in ("learned_9h", "learned_content_9h"):
    book.show_attention(runs[name], name, params, name=f"fig-repro-{name}", status=runs.status)

# %% tags=["hide-input"]
LEARNED = ("learned_9h", "learned_16h", "learned_content_9h", "learned_content_16h")
book.glue_str(
    "learned_peaks", book.uniform_attention_phrase({n: runs[n] for n in (*LEARNED, "quadratic_iso_9h")})
)
epochs = {n: experiments.preset_for(n, params.preset).train.epochs for n in LEARNED}
book.glue_str("learned_epochs", " and ".join(sorted({str(e) for e in epochs.values()}, key=int)))
flat = book.flat_models({n: runs[n] for n in LEARNED})
book.glue_str(
    "repro_flat",
    f"{' and '.join(flat)} kept near-uniform attention in every layer, so for "
    f"{'it' if len(flat) == 1 else 'them'} the paper's heads at fixed shifts are not reproduced at this budget"
    if flat
    else "every saved learned-2D model moved beyond near-uniform attention in at least one layer",
)
same, pairs = book.rank_counts(frame)
book.glue_text("repro_same", same, "{:d}")
book.glue_text("repro_pairs", pairs, "{:d}")
peaks = book.attention_peaks(runs["quadratic_iso_9h"])
book.glue_str("repro_quad_peak", book.MISSING if peaks is None else f"{peaks.min():.0f}–{peaks.max():.0f}")

# %% [markdown]
# **How far from uniform are these maps?** All panels of a figure share one colour scale, whose bar marks
# the uniform level 1/N, so a map that is flat to within a few per cent looks flat. The numbers say more.
# {glue:text}`learned_peaks` (The quadratic model is listed for comparison: its heads start out local.)
# A layer whose attention is near-uniform averages its features over the whole image; a model that does
# this in every layer classifies an unordered bag of patch features, and its accuracy owes nothing to where
# it looks. Where that happens, the paper's finding (heads attending to a single pixel at a fixed shift)
# is not reproduced at this budget: the paper's maps come from 300 epochs, ours from
# {glue:text}`learned_epochs` epochs.
#
# Is the encoding unable to learn a shift, or just slow to? A small experiment, run live
# (`attnlib.theory.learn_shift`, {numref}`fig-shift`): one positional-only learned head is trained with
# the budget's optimiser (SGD, lr 0.1, momentum 0.9) to copy, at every pixel of random $8 \times 8$
# images, the pixel to its right. From PyTorch's default initialisation it puts half its attention on that
# pixel after {glue:text}`shift_default` steps; from the paper's initialisation, where embeddings and head
# keys are drawn from $\mathcal N(0, 0.02^2)$, only after {glue:text}`shift_paper`. The score
# $w_h^\top r_\delta$ is a product of two small factors, so the gradient of each is as small as the other:
# attention starts uniform and stays there for a while before it suddenly locks on. A copy task sends the
# head a clean signal at every step; the classification loss sends a far weaker one, the likeliest reason
# why a model listed above as near-uniform never got past that plateau within our budget.
#
# Whether the whole model escapes the plateau with a larger start is tested by a variant that is not the
# paper's model: `learned_9h_pos_init` is `learned_9h` with its positional tables and head keys drawn
# from $\mathcal N(0, 0.2^2)$ instead of $\mathcal N(0, 0.02^2)$, everything else equal. Its heads start at
# {glue:text}`pos_init_start` times uniform attention (the paper's initialisation:
# {glue:text}`pos_init_paper_start`), at random shifts; the ledger calls a layer localized from
# {glue:text}`local_peak` times uniform, so what counts is how far the peak rises from where it started
# (the spread 0.2 was chosen so that the budget's models start below that bar). It is trained at the `long` preset beside
# `learned_9h`, stays out of the tables, and the ledger's row on fixed shifts reports it next to the
# verdict, which remains about the paper's models. {glue:text}`pos_init_result` The `long` runs of the
# two (60-epoch CPU runs; their measures against the epoch are drawn below) show whether more training
# changes this: {glue:text}`pos_init_long` Their attention maps are drawn in appendix B after B.10, to be
# compared with those of `learned_9h` (B.2): at this chapter's preset, then, with every saved `long` run,
# after the longer training.

# %% tags=["hide-input"]
for key, name in (("pos_init_start", "learned_9h_pos_init"), ("pos_init_paper_start", "learned_9h")):
    book.glue_str(key, f"{rules.initial_peaks(name, params.preset)[0]:.1f}")
book.glue_str("local_peak", f"{rules.LOCAL_PEAK:g}")
variant = book.load_all(["learned_9h_pos_init"], params)
book.glue_str("pos_init_result", book.variant_phrase("learned_9h_pos_init", {**runs, **variant}, params))
longer = book.measured_runs(["learned_9h", "learned_9h_pos_init"], params)
book.glue_str(
    "pos_init_long",
    " ".join(
        book.measured_peaks_phrase(n, r, params.long_preset, first=i == 0) for i, (n, r) in enumerate(longer.items())
    ),
)
INIT_LABELS = {"paper": "paper's init, N(0, 0.02²)", "default": "PyTorch's default init"}
shifts = {init: theory.learn_shift(init=init, seed=params.seed) for init in theory.INITS}
for init, fit in shifts.items():
    half = (fit.target > 0.5).nonzero()
    book.glue_str(
        f"shift_{init}", f"{int(fit.steps[int(half[0])])}" if len(half) else f"more than {int(fit.steps[-1])}"
    )
book.show(
    viz.step_curves(
        {INIT_LABELS[init]: (fit.steps, fit.target) for init, fit in shifts.items()},
        y_label="attention on the target pixel",
        reference=1 / 64,
        reference_label="uniform (1/64)",
    ),
    "fig-shift",
    "A positional-only learned-2D head learning to attend one pixel to the right on random 8 × 8 images "
    "(SGD, lr 0.1, momentum 0.9): its attention on the target pixel against the gradient step, from two "
    "initialisations; dotted, uniform attention 1/64.",
)

# %% [markdown]
# ## How the attention measures evolve during training
#
# Neither paper shows *when* the heads find their patterns. The runs of the `long` preset (the budget's
# models trained for a fixed 60 epochs on CPUs) log after every epoch, per layer, the measures the
# claims below are judged by: how far from the query the attention goes (attention-weighted distance),
# how concentrated it is (its peak as a multiple of uniform), for the quadratic models how far the centres
# have moved from their initialisation, and how much the maps depend on the image and resemble the previous
# layer's.

# %% tags=["hide-input"]
drawn = book.show_measure_curves(
    {
        "fig-measures-quadratic": (
            ("quadratic_iso_9h", "quadratic_aniso_9h", "quadratic_aniso_16h"),
            "The quadratic models.",
        ),
        "fig-measures-learned": (
            ("learned_9h", "learned_9h_pos_init", "learned_16h", "learned_content_9h", "learned_content_16h"),
            "The learned-2D models, positional only (and the variant with a larger positional init) and with "
            "content.",
        ),
    },
    params,
)

# %% [markdown]
# ## The paper's claims on trial
#
# The rows of the claims ledger (introduction) that this chapter's models test, computed from the saved
# results of this preset by the rule in the last column, or from the model's `long` run (60-epoch CPU run)
# where one is saved (its value then says "(long)"). Distances are attention-weighted means over the saved
# query pixels of the first test images (over the probe images of the last epoch for a `long` run); centres
# are measured in key positions (tokens).

# %% tags=["hide-input"]
book.show_ledger(
    book.claims_ledger(
        params,
        [
            "centres_move",
            "centres_grid",
            "centres_depth",
            "learned_shifts",
            "content_maps",
            "content_shift_heads",
            "quadratic_vs_learned",
            "near_resnet",
        ],
    ),
    caption=f"Claims of Cordonnier et al. tested by this chapter's models at preset {params.preset}.",
)

# %% [markdown]
# ## What this chapter found
#
# At this budget our runs order {glue:text}`repro_same` of the {glue:text}`repro_pairs` pairs of models the
# same way as the [Re] logs, with the gaps stretched: ResNet18 leads the best attention model by
# {glue:text}`repro_our_gap` points here against {glue:text}`repro_re_gap` in [Re]. The quadratic heads,
# local from the start, attend around their learned centres (the isotropic model's strongest attention per
# layer is {glue:text}`repro_quad_peak` times uniform); {glue:text}`repro_flat`. A single learned head
# shows why such a model can stall: from the paper's small initialisation it needs
# {glue:text}`shift_paper` steps to leave uniform attention even on a clean copy task
# ({numref}`fig-shift`). Chapter 3 turns to the two other attention families of the [Re] report.
