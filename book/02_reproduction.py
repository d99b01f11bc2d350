# ---
# jupyter:
#   jupytext:
#     formats: ipynb,py:percent
#     text_representation:
#       extension: .py
#       format_name: percent
#       format_version: '1.3'
#       jupytext_version: 1.19.7
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# (chapter-reproduction)=
# # Reproducing the paper's models
#
# {prf:ref}`thm-express` ({numref}`Chapter %s <chapter-theory>`) says that attention *can* compute a convolution. {cite:t}`cordonnier2020relationship` then ask
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
#   encoding of {prf:ref}`thm-express`), with a learned centre $\Delta^{(h)}$ and width $\alpha^{(h)}$;
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
#   where the models of Cordonnier et al. keep the official code's $\mathcal N(0, 0.02^2)$.
#
# With 9 heads a layer can be a $3 \times 3$ convolution ({prf:ref}`thm-express`); the 16-head variants could be a
# $4 \times 4$ one. {ref}`appendix-hyperparameters` lists every hyper-parameter, generated from the registry.
#
# **Which numbers are which.** Our numbers are measured by this code at the preset named in each table.
# The `budget` preset trains scaled-down models for a few epochs on two CPU cores; it is *not* the papers'
# 300-epoch GPU protocol, so our accuracies are far lower and only comparisons between our own runs are
# meaningful. The table below sets the two sizes side by side. **Every figure of this book shows the
# budget models** (8 × 8 tokens, 4 layers; or their 60-epoch runs, or their 20-epoch runs on the papers'
# 16 × 16 tokens, each caption naming its preset), never the paper-size ones. The
# published and [Re] figures are shown as found, each with its source and kind; figures that were not
# found say so.
#
# The chapter first sets our accuracies beside theirs (Paper Table 1), then looks at where the heads of the
# trained models attend: the quadratic ones around their learned centres, the learned ones over the whole
# grid, and ends with what agrees with the papers at this budget and what does not.

# %% tags=["remove-input"]
import attnbook as book
from attnbook import viz
from attnbook.ledger import seed_numbers
from attnlib import experiments, theory
from attnlib.analysis import claims, rules
from attnlib.analysis import stats as compare
from attnlib.analysis.literature import (
    NOT_FOUND,
    PAPER,
    RE,
    RE_QUADRATIC_9H_HA,
    best_reference,
    reference_value,
)
from attnlib.measures import NEAR_UNIFORM, attention_peaks, uniform_reference
from attnlib.results import tables
from attnlib.results.load import read_seeds

# %% tags=["parameters"]
preset = "budget"  # paper | budget | smoke
data = None  # None: the preset's (CIFAR-10) | "synthetic" | a folder
device = "auto"  # auto | cpu | cuda | cuda:N (to train what results/ lacks)
seed = 0  # the runs' seed (results/<experiment>/<preset>-seed<N> if N > 0)
train_missing = None  # None: train what results/ lacks, not in a build | bool
results_dir = None  # None: results/ at the repository root
long_preset = "long"  # preset of the longer runs shown beside (= preset: none)

# %% tags=["remove-input"]
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
book.show_table(
    book.architecture_table(tables.table1_names()),
    caption="The models at the paper's settings and at the budget preset (paper / budget), from the registry: "
    "token grid, layers (ResNet18: its depth), hidden size (ResNet18: its first stage's width), heads, "
    "epochs and trainable parameters.",
    wrap_names=True,
)

# %% [markdown]
# (def-measures)=
# ```{admonition} Definitions: how this book measures attention
# :class: note
# A layer's attention gives each head $h$ and query token $q$ a distribution $p_{hqk}$ over the $N$ key
# tokens. The measures below average over heads, fixed test images and query pixels, and each is compared
# with its value for uniform attention $p = 1/N$.
#
# - **Distance** $\bar d = \sum_k p_{hqk}\, \lVert \mathrm{pos}(k) - \mathrm{pos}(q) \rVert$: how far from
#   the query the attention goes, **in input pixels** of the 32 × 32 image (one token of the budget's
#   8 × 8 grid spans 4 × 4 input pixels, of the paper's 16 × 16 grid 2 × 2). Uniform attention on the
#   8 × 8 grid, over all queries: {glue:text}`def_uniform_distance` px. Every distance and centre of the
#   prose, figures, tables and ledger of this book is in input pixels (px).
# - **Mean peak** $\pi = N \max_k p_{hqk}$, averaged over heads, queries and images: how concentrated
#   a typical map is, as a multiple of uniform (1: uniform; $N$: all attention on one key).
# - **Max peak**: the single strongest probability in a layer's saved maps (over heads, query pixels and
#   images) times $N$, also a multiple of uniform and never below the mean peak. A layer whose max peak
#   stays below {glue:text}`def_near_uniform`× is *near-uniform*: it averages its features over the image.
# - **Total variation** between two distributions, $\mathrm{TV}(p, p') = \tfrac12 \sum_k |p_k - p'_k|$:
#   0 when equal, 1 when disjoint.
# - **Image dependence** $\iota$: the TV between each image's map and the mean map over the images:
#   0 when a map is the same for every image (a model without content).
# - **Similarity** $\sigma = 1 - \mathrm{TV}$ between the head-averaged maps of consecutive layers: 1 when
#   two layers attend alike.
# ```

# %% tags=["remove-input"]
viz.set_style()
book.glue_str("def_uniform_distance", f"{uniform_reference(8, 8, 4)['distance']:.1f}")
book.glue_str("def_near_uniform", f"{NEAR_UNIFORM:g}")
TABLE1 = tables.table1_names()
if params.train_missing:  # papermill -p train_missing True, or ATTNLIB_TRAIN_MISSING=1: train what results/ lacks
    book.train_missing([*TABLE1, "learned_9h_pos_init"], params)
runs = book.load_all(TABLE1, params)
frame = book.seeds_frame(runs, params)  # accuracy: the mean over every saved seed
book.glue_str("repro_preset", params.preset)
done = tables.complete(frame)
book.glue_str("repro_data", book.dataset_words(done["dataset"].dropna()))
images = sorted({f"{int(n):,}" for n in done["test_images"].dropna()})
book.glue_str("repro_test_images", ", ".join(images) or "—")

# %% [markdown]
# ## Paper Table 1: accuracy and size
#
# Paper Table 1 sets each of the paper's models beside ResNet18, here at preset *{glue:text}`repro_preset`*.
# Accuracy is top-1 on the whole test split ({glue:text}`repro_test_images` images of
# {glue:text}`repro_data`), as the mean ± standard deviation over the n saved seeds of a model (n in
# brackets); "params" counts trainable parameters; wall time is the median of
# single-image forward passes in float32, measured for every model together, as for [Re] Table 3 in
# {ref}`chapter-hierarchical` (the fold-out under the table names the machine). The figures of the papers
# follow in a companion table, each marked with its kind; a model whose run is not saved shows "—".

# %% tags=["hide-input"]
book.show_table(
    book.results_table(frame, params.preset),
    caption=f"Paper Table 1, our models at preset {params.preset}: test accuracy (mean ± sd over the n saved "
    "seeds), trainable parameters and inference wall time per image (the median, as in [Re] Table 3).",
    wrap_names=True,
)
book.show_folded(book.timing_markdown(params), "How the wall times were measured")
if book.unused_markdown(frame):
    book.show_folded(book.unused_markdown(frame), "Saved results that are not used, and why")
book.show_table(
    book.literature_table(TABLE1),
    caption=book.literature_caption(
        TABLE1, "Paper Table 1, companion: the published and [Re] figures of the same models"
    ),
    compact=True,
)
book.note_below_target(frame, params.preset)
missing = [n for n, r in runs.items() if r is None]
if missing:
    book.note_missing("Paper Table 1", params.preset, missing, runs.status)

# %% [markdown]
# **Size and cost at the paper's settings.** Paper Table 1 gives each model's #params and #FLOPs.
# We count both for the models as the paper's settings build them (6 layers, hidden 400, 16 × 16 tokens;
# not our budget models): parameters that train, and the floating-point operations of one forward pass on
# one 32 × 32 image, counted by PyTorch's `FlopCounterMode` (2 per multiply-add of the matrix products and
# convolutions; softmax, norms and other elementwise work not counted; the official code counts
# multiply-adds with `thop`, half as many). No printed #params or #FLOPs of Paper Table 1 was found in the
# stored sources, so those columns say "not found"; the parameter counts derived from the official code
# (‡, not printed anywhere) check that our networks are theirs. Our models with content are the [Re] code's
# networks, not the official code's `--use_attention_data` network that the ‡ figure counts, so those two
# differ on purpose. The table is folded below.

# %% tags=["hide-input", "hide-output"]
book.show_table(
    book.cost_table(TABLE1),
    caption="Paper Table 1, size: trainable parameters and GFLOPs of one forward pass on one 32×32 image at the "
    "paper's settings, counted (attnlib.models.cost), beside the paper's printed figures and the counts derived "
    "from the official code (‡).",
    wrap_names=True,
    right=("params (counted)", "GFLOPs (counted)", "params, official code ‡"),
)

# %% tags=["remove-input"]
best = book.best_attention(frame)  # means over the saved seeds
book.glue_text("repro_best", best["model"], "{}")
book.glue_text("repro_best_acc", best["accuracy"])
book.glue_text("repro_best_seeds", best["seeds"], "{:d}")
book.glue_text("repro_resnet_acc", best["resnet"])
book.glue_text("repro_resnet_seeds", best["resnet_seeds"], "{:d}")
for key, value in book.rank_counts(frame).items():  # the means over seeds
    book.glue_text(f"repro_rank_{key}", value, "{:d}")
flips = book.rank_flips(frame)
re_best = best_reference([n for n in TABLE1 if n != "resnet18"], RE, "test_accuracy")
re_resnet = reference_value("resnet18", RE, "test_accuracy")
book.glue_text("repro_re_gap", None if re_best is None else (re_resnet - re_best.value) * 100, "{:.1f}")
book.glue_text("repro_our_gap", best["gap"], "{:.1f}")
book.glue_text("lit_paper_quadratic", reference_value("quadratic_iso_9h", PAPER, "test_accuracy"))
book.glue_text(
    "lit_re_quadratic", reference_value("quadratic_aniso_9h", RE, "test_accuracy"), "{:.2%}"
)
book.glue_text("lit_re_quadratic_ha", RE_QUADRATIC_9H_HA.value, "{:.2%}")
book.glue_text("lit_re_resnet", reference_value("resnet18", RE, "test_accuracy"), "{:.2%}")
book.glue_str("repro_epochs", book.epoch_range(params.preset))
for key, name in (("quad", "quadratic_iso_9h"), ("pos", "learned_9h"), ("content", "learned_content_9h")):
    book.glue_text(f"repro_{key}_epochs", experiments.preset_for(name, params.preset).train.epochs, "{:d}")
content = experiments.preset_for("learned_content_9h", params.preset).train
book.glue_text("repro_content_lr", content.lr, "{:g}")
book.glue_text("repro_content_clip", content.grad_clip, "{:g}", missing="none")
LEARNED = ("learned_9h", "learned_16h", "learned_content_9h", "learned_content_16h")
low = [n for n, _ in book.below_target(frame, params.preset) if n in LEARNED]
book.glue_str("repro_learned_low", f"{len(low)} of the saved learned-2D models remain" if low else "no saved learned-2D model remains")
book.glue_text("repro_target", experiments.BUDGET_TARGET, "{:.0%}")

# %% [markdown]
# At this preset the best attention model, by its mean over the saved seeds and among the models of the
# table with the most seeds (n = {glue:text}`repro_best_seeds`), is {glue:text}`repro_best` at
# {glue:text}`repro_best_acc` test accuracy, against {glue:text}`repro_resnet_acc` for ResNet18
# (n = {glue:text}`repro_resnet_seeds`). Cordonnier et al. (2020) find that fully attentional models come
# close to the ResNet at equal size when trained for 300 epochs; the only figure of Paper Table 1 we could
# read is {glue:text}`lit_paper_quadratic` for the quadratic model (quoted by a benchmark page), and the [Re] logs
# give {glue:text}`lit_re_quadratic` for their quadratic 9-head run (non-isotropic, by their configuration
# of that day; we attach it to that row only) against {glue:text}`lit_re_resnet` for their ResNet18. HA
# puts their quadratic model *below* itself: their hierarchical version of it logged
# {glue:text}`lit_re_quadratic_ha` in their run logs. Their Gaussian code has a typo in the centre,
# `c + mu_2` where the official code has `c * mu_2`, so their quadratic heads attend
# around a shifted point and their learned centres are not where their heads look; our quadratic models
# use the official form.
#
# **Where the budget runs agree with the papers, and where not.** Mostly on the *order* of the models,
# not on the *size* of the gaps. Of the {glue:text}`repro_rank_pairs` pairs of models that [Re] also reports,
# our runs (means over seeds) order {glue:text}`repro_rank_same` the same way, {glue:text}`repro_rank_flipped`
# the other way round (the table below) and {glue:text}`repro_rank_tied` are tied in one of the two.

# %% tags=["hide-input"]
if len(flips):
    book.show_table(
        flips,
        caption="Pairs of models that [Re] and our runs order differently: the accuracy of the first minus "
        "that of the second, in points, in the [Re] run logs and in our runs.",
        compact=True,
    )

# %% [markdown]
# In the [Re] logs ResNet18 ends {glue:text}`repro_re_gap` points above the best attention model of this
# table after 300 epochs; here it is {glue:text}`repro_our_gap` points ahead of {glue:text}`repro_best` (the
# introduction's gap also weighs SAN and ViT, of {ref}`chapter-san-vit`). A convolution has locality built in, while an
# attention model must first learn where to look, and a budget of {glue:text}`repro_epochs` epochs
# measures mostly how fast that happens. The same reading explains the order among the attention models:
# the quadratic encodings start out local (each head a Gaussian around a centre) and reach the highest
# accuracy in the fewest epochs ({glue:text}`repro_quad_epochs` at this preset), while the learned encodings
# start from near-uniform attention and needed more: {glue:text}`repro_pos_epochs` epochs without content,
# and with content {glue:text}`repro_content_epochs` epochs at lr {glue:text}`repro_content_lr` with the
# gradient norm clipped to {glue:text}`repro_content_clip` ({ref}`appendix-hyperparameters` gives the
# reasons for each change). Those changes aimed at one floor: every attention model was to pass
# {glue:text}`repro_target` test accuracy at this preset, so that its attention maps come from a model that
# has learned something. That floor was read on the test split, the one choice of this book that looked at
# test accuracy; no stopping or selection of a run does. Now {glue:text}`repro_learned_low` below it. Where our 16-head models rank differently from the 9-head ones than in [Re], remember
# that our 16-head learned models are also narrower (hidden size 40 against 64, the [Re] 16-head ratios),
# and that a model with one seed is a single run: the seeds of {ref}`chapter-hierarchical` show how far
# two runs of one configuration can differ.
#
# ### Locality or resolution?
#
# The reading above has a confound: ResNet18 sees the 32×32 image, while our attention models see the
# coarser grid that space-to-depth makes of it (each token a 4×4 patch at this preset). The control trains
# the narrow ResNet18 on the same grid as the attention models, with the same protocol: the difference
# between the two ResNets is what resolution costs, the difference between the ResNet on the grid and the
# best attention model of its size is what remains for locality.

# %% tags=["remove-input"]
resolution, resolution_numbers = book.resolution_control(params)
book.show_table(
    resolution,
    caption=f"The narrow ResNet18 on the image and on the attention models' grid, beside the best attention model "
    f"of its size, at preset {params.preset}: test accuracy as mean ± sd over the saved seeds.",
    wrap_names=True,
)
for key in ("resolution", "locality"):
    book.glue_str(f"repro_{key}", resolution_numbers.get(key, "—"))
    book.glue_str(f"repro_{key}_verdict", resolution_numbers.get(f"{key}_verdict", "not measured"))
    book.glue_str(f"repro_{key}_seeds", resolution_numbers.get(f"{key}_seeds", "—"))
book.glue_str("repro_resolution_model", resolution_numbers["attention"] or "—")
book.glue_text("repro_resolution_share", resolution_numbers.get("resolution_share"), "{:.0%}")

# %% [markdown]
# Moving the ResNet from the image to the grid changes its accuracy by {glue:text}`repro_resolution` points
# (95% Welch interval; seeds {glue:text}`repro_resolution_seeds`; {glue:text}`repro_resolution_verdict` after
# Holm's correction over the two comparisons), and {glue:text}`repro_resolution_model` differs from the ResNet
# on the same grid by {glue:text}`repro_locality` points (seeds {glue:text}`repro_locality_seeds`;
# {glue:text}`repro_locality_verdict`). Of the narrow ResNet18's lead over that attention model at this preset,
# the grid alone takes away {glue:text}`repro_resolution_share`: the part of the gap that locality can explain
# is what remains.
#
# The papers' material that we could not find, for this chapter and for {ref}`chapter-hierarchical`:

# %% tags=["hide-input"]
book.note("\n".join(f"- {line}" for line in NOT_FOUND), "important")

# %% [markdown]
# ## How our protocol differs from the papers'
#
# Beyond the budget's scale (smaller models, fewer epochs: {ref}`appendix-hyperparameters`), our runs differ from the papers'
# protocols in the ways listed below, each marked with the models and presets it applies to. Every row was
# read in our code and in theirs (the fold-out under the table names the files). None is a change of
# method, but with them a number of ours is never the papers' experiment repeated exactly.

# %% tags=["hide-input"]
differences, checked = book.protocol_differences_table()
book.show_table(
    differences,
    caption="How our training protocol differs from the papers' (Cordonnier et al.'s official code and the "
    "[Re] code), and where each difference applies.",
    wrap_names=True,
)
book.show_folded_table(checked, "Where each difference was read, in our code and in theirs")

# %% [markdown]
# ## Where quadratic heads attend
#
# A quadratic head is fully described by its centre $\Delta^{(h)}$ and its covariance. Cordonnier et al.
# report that the centres leave their random initialisation and spread into a grid around the query pixel, the
# first layers attending locally and the later layers further away. {numref}`fig-centres-quadratic_iso_9h`
# to {numref}`fig-centres-quadratic_aniso_16h` show where ours ended, one panel per layer.

# %% tags=["hide-input"]
for name in ("quadratic_iso_9h", "quadratic_aniso_9h", "quadratic_aniso_16h"):
    book.show_centres(name, runs[name], f"fig-centres-{name}", params.preset, runs.status)

# %% [markdown]
# How the centres moved during training ({numref}`fig-paths-quadratic_iso_9h` and
# {numref}`fig-paths-quadratic_aniso_9h`, folded below): each line goes from a head's initial centre
# (hollow) to its final one (filled), one panel per layer.

# %% tags=["hide-input", "hide-output"]
for name in ("quadratic_iso_9h", "quadratic_aniso_9h"):
    book.show_centre_paths(name, runs[name], f"fig-paths-{name}", params.preset, runs.status)

# %% [markdown]
# **After longer training.** The non-isotropic 9-head model was also trained for a fixed 60 epochs on
# CPUs (the budget's model and protocol, preset `long`). It reached {glue:text}`quad_long_accuracy` test
# accuracy after {glue:text}`quad_long_epochs` epochs, and its centres moved by
# {glue:text}`quad_long_moved` input pixels on average in its four layers (after the budget run's
# {glue:text}`quad_long_short_epochs` epochs: {glue:text}`quad_long_short_moved`); their spread per layer
# (distance from the layer's mean centre, root mean square) went from {glue:text}`quad_long_spread_start`
# to {glue:text}`quad_long_spread_end` input pixels. Its centres and paths are folded below, each caption
# naming the preset.

# %% tags=["hide-input", "hide-output"]
QUADRATIC = ("quadratic_iso_9h", "quadratic_aniso_9h", "quadratic_aniso_16h")
longer = book.show_measured_centres(QUADRATIC, params)
quad = book.centre_numbers(longer.get("quadratic_aniso_9h"), runs["quadratic_aniso_9h"])
book.glue_numbers("quad_long", quad)

# %% [markdown]
# **At the papers' geometry.** The same model was trained on 16×16 tokens (preset `tokens16`: 2×2
# space-to-depth as in both papers, a key position 2 input pixels wide, 20 epochs, the `long` recipe
# otherwise). Its test accuracy was {glue:text}`quad_t16_accuracy`; in input pixels, a layer's centres moved
# by {glue:text}`quad_t16_moved` on average, their spread going from {glue:text}`quad_t16_spread_start` to
# {glue:text}`quad_t16_spread_end` ({numref}`fig-paths-quadratic_aniso_9h-tokens16`: seed 0). With two
# seeds or more saved, the ledger below judges the centres' claims on these runs, seed by seed, the 8×8
# verdicts beside.

# %% tags=["hide-input"]
name = "quadratic_aniso_9h"
found = read_seeds(name, "tokens16", results_dir=params.results_dir, data=params.data, seeds=range(5))
t16 = {s: saved.run for s, saved in found.items() if saved.complete}
numbers = {s: book.centre_numbers(run) for s, run in t16.items()}
for key in ("accuracy", "moved", "spread_start", "spread_end"):  # each seed's numbers
    said = "; ".join(f"{n[key]} (seed {s})" for s, n in numbers.items())
    book.glue_str(f"quad_t16_{key}", said or "not saved")
book.show_centre_paths(name, t16.get(0), f"fig-paths-{name}-tokens16", "tokens16", named=True)

# %% [markdown]
# ## What learned encodings attend to
#
# A learned 2D encoding is free to take any shape. Without content its attention does not depend on the
# image, so one map per head describes it; Cordonnier et al. find that several heads attend to a single pixel at
# a fixed shift, as {prf:ref}`lem-one-head` requires. With content, attention varies with the image: we show it for one
# test image and averaged over the saved test images ({numref}`fig-repro-learned_9h-one` to
# {numref}`fig-repro-learned_content_9h-mean`). Each row is a layer, each column a head.

# %% tags=["hide-input"]
for name in ("learned_9h", "learned_content_9h"):
    book.show_attention(runs[name], name, params, name=f"fig-repro-{name}", status=runs.status, others="appendix")

# %% tags=["remove-input"]
for name in (*LEARNED, "quadratic_iso_9h"):
    book.glue_str(f"peak_{name}", book.peak_range(attention_peaks(runs[name])))
epochs = {n: experiments.preset_for(n, params.preset).train.epochs for n in LEARNED}
book.glue_str("learned_epochs", " and ".join(sorted({str(e) for e in epochs.values()}, key=int)))

# %% [markdown]
# **How far from uniform are these maps?** A map that is flat to within a few per cent looks flat on any
# colour scale; the numbers say more. The max peak ({ref}`definitions <def-measures>`) of each model's
# layers, from its smallest to its largest, at this preset ("—": not saved):
#
# - SA learned 2D, 9 heads: {glue:text}`peak_learned_9h`; 16 heads: {glue:text}`peak_learned_16h`;
# - SA learned 2D + content, 9 heads: {glue:text}`peak_learned_content_9h`; 16 heads:
#   {glue:text}`peak_learned_content_16h`;
# - for comparison, SA quadratic (isotropic), 9 heads, whose heads start out local:
#   {glue:text}`peak_quadratic_iso_9h`.
#
# A layer whose max peak stays below {glue:text}`def_near_uniform`× averages its features over the whole
# image; a model that does this in every layer classifies an unordered bag of patch features, and its
# accuracy owes nothing to where it looks. The maps of Cordonnier et al. come from 300 epochs, ours from
# {glue:text}`learned_epochs` epochs.
#
# Is the encoding unable to learn a shift, or just slow to? A small experiment, run live
# (`attnlib.theory.learn_shift`, {numref}`fig-shift`): one positional-only learned head is trained with
# the budget's optimiser (SGD, lr 0.1, momentum 0.9) to copy, at every pixel of random $8 \times 8$
# images, the pixel to its right. From PyTorch's default initialisation it puts half its attention on that
# pixel after {glue:text}`shift_default` steps; from the initialisation of Cordonnier et al., where embeddings and head
# keys are drawn from $\mathcal N(0, 0.02^2)$, only after {glue:text}`shift_paper`. The score
# $w_h^\top r_\delta$ is a product of two small factors, so the gradient of each is as small as the other:
# attention starts uniform and stays there for a while before it suddenly locks on. A copy task sends the
# head a clean signal at every step; the classification loss sends a far weaker one, the likeliest reason
# why a model listed above as near-uniform never got past that plateau within our budget.
#
# Whether the whole model escapes the plateau with a larger start is tested by a variant that is not the
# paper's model: SA learned 2D, 9 heads, with its positional tables and head keys drawn from
# $\mathcal N(0, 0.2^2)$ instead of $\mathcal N(0, 0.02^2)$, everything else equal ("positional init std
# 0.2" in tables). Its heads start at a mean peak of {glue:text}`pos_init_start` times uniform (the
# paper's initialisation: {glue:text}`pos_init_paper_start`), at random shifts; the ledger calls a layer
# localized from a mean peak of {glue:text}`local_peak` times uniform, so what counts is how far the peak
# rises from where it started (the spread 0.2 was chosen so that the budget's models start below that
# level). The variant stays out of the tables; the ledger's row on fixed shifts reports it beside the
# verdict, which remains about the paper's model.
#
# At this preset the variant reached {glue:text}`pos_init_acc` test accuracy (n = {glue:text}`pos_init_n`)
# against {glue:text}`pos_init_base_acc` for the paper's initialisation (n = {glue:text}`pos_init_base_n`);
# variant − model: {glue:text}`pos_init_diff` points. Its first layer attends with a mean peak of
# {glue:text}`pos_init_peak` times uniform, the model's with {glue:text}`pos_init_base_peak`. After
# {glue:text}`pos_long_base_epochs` epochs (preset `long`), the model reached
# {glue:text}`pos_long_base_accuracy`, its layers ending at mean peaks of {glue:text}`pos_long_base_peaks`
# times uniform ({glue:text}`pos_long_base_flat` of its {glue:text}`pos_long_base_layers` layers below
# {glue:text}`def_near_uniform`× in every epoch); the variant reached {glue:text}`pos_long_var_accuracy`,
# ending at {glue:text}`pos_long_var_peaks` ({glue:text}`pos_long_var_flat` layers below
# {glue:text}`def_near_uniform`× throughout). Their measures against the epoch are drawn below, their maps
# in {ref}`appendix-maps`.

# %% tags=["hide-input"]
for key, name in (("pos_init_start", "learned_9h_pos_init"), ("pos_init_paper_start", "learned_9h")):
    book.glue_str(key, f"{rules.initial_peaks(name, params.preset)[0]:.1f}")
local_peak = claims.by_key("learned_shifts").params["local_peak"]  # the fixed-shift rule's multiple of uniform
book.glue_str("local_peak", f"{local_peak:g}")
variant = book.load_all(["learned_9h_pos_init"], params)
acc = {n: book.seed_accuracies(n, params) for n in ("learned_9h_pos_init", "learned_9h")}
for key, name in (("pos_init", "learned_9h_pos_init"), ("pos_init_base", "learned_9h")):
    book.glue_text(f"{key}_acc", sum(acc[name]) / len(acc[name]) if acc[name] else None)
    book.glue_text(f"{key}_n", len(acc[name]), "{:d}")
    profile = rules.layer_profile({**runs, **variant}[name])
    book.glue_text(f"{key}_peak", profile[0]["peak"] if profile else None, "{:.2f}")
if all(acc.values()):
    book.glue_str("pos_init_diff", compare.welch(acc["learned_9h"], acc["learned_9h_pos_init"]).difference)
else:
    book.glue_str("pos_init_diff", "—")
longer = book.measured_runs(["learned_9h", "learned_9h_pos_init"], params)
book.glue_numbers("pos_long_base", book.long_run_numbers(longer["learned_9h"]))
book.glue_numbers("pos_long_var", book.long_run_numbers(longer["learned_9h_pos_init"]))
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
# **At the papers' geometry.** On 16×16 tokens (preset `tokens16`, 20 epochs) the model was trained from the
# paper's initialisation and from the [Re] code's (PyTorch's defaults: positional tables $\mathcal N(0, 1)$),
# the two initialisations that split the 8×8 verdict (there the [Re] one comes with the 16-head [Re]
# network). Test accuracy: {glue:text}`learned_t16_accuracy_learned_9h`
# (paper's init), {glue:text}`learned_t16_accuracy_learned_9h_init_re` ([Re] init); the first layer's mean
# peak as a multiple of uniform, from initialisation to the end: {glue:text}`learned_t16_peak_learned_9h`
# and {glue:text}`learned_t16_peak_learned_9h_init_re`. The ledger's rule, fixed before these runs, credits
# a rise to {glue:text}`local_peak`× only from below it: heads that start above it count against the claim
# however far they rise. A multiple of uniform is a smaller share of attention on more keys:
# {glue:text}`local_peak`× uniform puts {glue:text}`local_share_64` of a query's attention on its top key
# among 8×8 tokens, {glue:text}`local_share_256` among 16×16. We kept the rule as fixed rather than change it
# after seeing these runs. With two seeds of each model saved, the ledger judges the claim on these runs.

# %% tags=["remove-input"]
for name in ("learned_9h", "learned_9h_init_re"):  # each seed's accuracy, and first-layer peak start -> end
    for key, said in seed_numbers(name, "tokens16", params).items():
        book.glue_str(f"learned_t16_{key}_{name}", said)
for keys in (64, 256):  # the rule's multiple of uniform as a share of attention: local_peak / keys
    book.glue_str(f"local_share_{keys}", f"{local_peak / keys:.1%}")

# %% [markdown]
# ## How the attention measures evolve during training
#
# Neither paper shows *when* the heads find their patterns. The runs of the `long` preset (the budget's
# models trained for a fixed 60 epochs on CPUs) log after every epoch, per layer, the measures the
# claims below are judged by ({ref}`definitions <def-measures>`): distance, mean peak, image dependence
# and similarity, and for the quadratic models how far the centres have moved from their initialisation.
# The figures are folded below.

# %% tags=["hide-input", "hide-output"]
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
# The rows of the claims ledger ({ref}`chapter-intro`) that this chapter's models test, computed from the
# saved results of this preset by the rule in the fold-out, or from the model's 60-epoch run where one is
# saved (its value then says "(long)"). The measures are those of {ref}`the definitions <def-measures>`,
# centres and distances in input pixels (px).

# %% tags=["hide-input"]
ledger = book.claims_ledger(
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
)
book.glue_verdicts(ledger, "repro")
book.show_ledger(
    ledger,
    caption=f"Claims of Cordonnier et al. tested by this chapter's models at preset {params.preset}.",
    printed_under="intro-claims",
)

# %% [markdown]
# ## Findings
#
# Verdicts rest on the budget's models on 8×8 tokens ({glue:text}`repro_epochs` epochs) and their 60-epoch
# runs, or on 16×16 tokens (20 epochs) for a map claim with two seeds of each model there (ledger above).
#
# - **Accuracy.** ResNet18 leads the best of the paper's attention models by {glue:text}`repro_our_gap`
#   points, against {glue:text}`repro_re_gap` in the [Re] logs, and at a comparable size most of that lead
#   is the resolution the ResNet sees, not its locality (the control above). That attention comes close to
#   ResNet18 at a comparable size is {glue:text}`repro_w_near_resnet`; that the quadratic encoding does as
#   well as the learned one is {glue:text}`repro_w_quadratic_vs_learned`.
# - **Quadratic heads** start local and stay local (the isotropic model's maps peak at
#   {glue:text}`peak_quadratic_iso_9h` uniform), and their centres barely move: that they leave their
#   initialisation is {glue:text}`repro_w_centres_move`, that they settle on a grid around the query
#   {glue:text}`repro_w_centres_grid`, that early layers attend locally and later ones further
#   {glue:text}`repro_w_centres_depth`.
# - **Learned heads** without content stay at uniform attention from the paper's small initialisation, on
#   16×16 tokens too ({glue:text}`learned_t16_peak_learned_9h` in the first layer): a single head needs
#   {glue:text}`shift_paper` steps to leave it even on a clean copy task ({numref}`fig-shift`), and heads
#   at fixed shifts are {glue:text}`repro_w_learned_shifts`; from a ten times larger initialisation the
#   variant ends its 60 epochs at mean peaks of {glue:text}`pos_long_var_peaks`, and from the [Re] code's
#   the first layer on 16×16 tokens goes {glue:text}`learned_t16_peak_learned_9h_init_re`, above
#   {glue:text}`local_peak`× from the start, which the ledger's rule counts against the claim. With content,
#   that the maps depend on the image is {glue:text}`repro_w_content_maps`, and that some heads keep a fixed
#   shift {glue:text}`repro_w_content_shift_heads`.
#
# {ref}`chapter-san-vit` turns to the two other attention families of the [Re] report.
