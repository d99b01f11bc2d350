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
# # Can self-attention do what convolution does?
#
# Convolutional networks build their features from small, local filters; transformers let every token
# attend to every other one. {cite:t}`cordonnier2020relationship` ask whether attention layers can replace
# convolutions in vision, and answer in two parts: a *theorem*, that a multi-head self-attention layer
# with enough heads and a relative positional encoding can express **any convolutional layer**, and
# *experiments*, showing that attention layers trained on CIFAR-10 do learn convolution-like patterns,
# with heads that attend to pixels at fixed shifts around the query.
#
# The [Re] report of {cite:t}`varma2021re` re-implemented the paper, extended the comparison to two
# other attention families (SAN {cite}`zhao2020exploring` and ViT {cite}`dosovitskiy2021image`), and
# proposed Hierarchical Attention (HA), which shares one attention block across layers and keeps its
# keys fixed, for fewer parameters.
#
# This book checks both papers with one library, `attnlib`: it proves and tests the theorem live,
# retrains the models of both papers at a budget that fits two CPU cores, and sets every number beside
# the published ones. It is executable: every number in its prose and every figure is computed from
# saved results, or live when it needs no training. This introduction ends with the results at a glance
# ({numref}`fig-glance`); each chapter opens with what it shows and closes with what it found.
#
# | chapter | what it shows |
# |---|---|
# | 1. Theory | Theorem 1 and its constructive proof, checked live; a layer learning to be a convolution |
# | 2. Reproduction | the paper's models: Table 1, attention centres, learned attention maps |
# | 3. SAN and ViT | how they attend; SAN's operations and Triton kernels |
# | 4. Hierarchical Attention | Table 3 (each model beside its HA variant) and Fig. 8 of the report |
# | 5. Appendix | hyper-parameter tables, the report's attention figures B.1–B.10, training curves |
#
# ## Which numbers are whose
#
# - **Ours** are measured by this code, on the CIFAR-10 copy named in each table's provenance line, at
#   the *preset* the chapter states. The book is built at the `budget` preset: scaled-down models trained
#   for a few epochs on two CPU cores. These are budget-scale CPU results; they are far below the papers'
#   accuracies and only comparisons among our own runs are meaningful. The `paper` preset holds the
#   published protocols (GPU-scale training) and the `smoke` preset a few seconds of training on
#   synthetic images, for tests.
# - **Published** figures are those of {cite:t}`cordonnier2020relationship`; **[Re]** figures those of the
#   reproduction report. Each is shown with its source and its kind: *printed*, *claimed* (a benchmark page
#   quoting the paper), *run-log* (the [Re] authors' run logs, not their printed table) or *derived*
#   (counted from the authors' code). Much of the printed material could not be retrieved; the tables mark
#   with "—" what was not found, and chapters 2 and 4 list what is missing.
#
# ## Rerunning
#
# After the README's set-up, `make book` (or `jupyter-book build book` from the repository root) builds
# this book into `_build/html`. The build executes every chapter but only *reads* `results/`: a result
# that has not been trained is shown as "not yet trained". To train, run one experiment with
# `python -m attnlib train EXPERIMENT --preset budget`, or a whole chapter with papermill, which trains
# whatever the chapter needs and `results/` lacks, for example
# `papermill book/04_hierarchical.ipynb out.ipynb -p heads 16 -p preset budget`.
# Every chapter has a `parameters` cell (`preset`, `data`, `device`, `seed`, ...); a bad value stops the
# run at the next cell with one line naming the parameter and its allowed values. The parameter
# `train_missing` is `None` by default, meaning "train what is missing, except during the book build";
# pass `-p train_missing False` to only load.

# %% tags=["hide-input"]
import attnbook as book
from attnbook import viz
from attnlib import experiments
from attnlib.results import tables

# %% tags=["parameters"]
preset = "budget"  # paper | budget | smoke: the preset summarised below
results_dir = None  # None: results/ at the repository root
long_preset = "long"  # preset of the 60-epoch runs also shown (ledger evidence, per-epoch measures), or the preset for none

# %% tags=["hide-input"]
params = book.check_params(
    preset=preset, results_dir=results_dir, train_missing=False, long_preset=long_preset
)

# %% tags=["hide-input"]
viz.set_style()
runs = book.load_all(experiments.names(), params)
frame = book.seeds_frame(runs, params)  # every model named by its mean over the saved seeds
done = tables.complete(frame)
book.glue_str("intro_preset", params.preset)
book.glue_text("intro_done", len(done), "{:d}")
book.glue_text("intro_total", len(frame), "{:d}")
book.glue_text("intro_hours", done["train_seconds"].dropna().sum() / 3600, "{:.2f} h")
best = book.best_attention(frame)
book.glue_text("intro_best", best["model"], "{}")
book.glue_text("intro_best_acc", best["accuracy"])
book.glue_text("intro_best_seeds", best["seeds"], "{:d}")
book.glue_text("intro_resnet_acc", best["resnet"])
book.glue_text("intro_resnet_seeds", best["resnet_seeds"], "{:d}")
gap = best["gap"]
book.glue_text("intro_best_gap", None if gap is None else abs(gap), "{:.1f}")
book.glue_str("intro_best_where", "—" if gap is None else "below" if gap > 0 else "above")
book.glue_str("intro_ha", book.ha_sentence(book.ha_pairs(frame)))
HA_BASES = ["learned_content_9h", "learned_content_16h", "san_pairwise", "san_patchwise", "vit"]
family = book.ha_family(HA_BASES, params)
book.glue_text("intro_ha_survivors", sum(v[2] in ("higher", "lower") for v in family.values()), "{:d}")
book.glue_str("intro_epochs_paper", book.epoch_range("paper"))
book.glue_str("intro_epochs_budget", book.epoch_range("budget"))
points = book.glance_points(frame)
ours, theirs = points[points["source"] == "ours"], points[points["source"] != "ours"]
if len(ours) and len(theirs):
    scale = f"{theirs['params'].median() / ours['params'].median():.0f}"
    gap = f"{(theirs['accuracy'].median() - ours['accuracy'].median()) * 100:.0f}"
else:
    scale = gap = book.MISSING
book.glue_str("intro_scale", scale)
book.glue_str("intro_gap", gap)

# %% [markdown]
# ## Results at a glance
#
# {numref}`fig-glance` sets every model we trained beside the published and logged figures.

# %% tags=["hide-input"]
book.show(
    viz.accuracy_vs_params(
        points,
        source_labels={
            "ours": f"ours ({params.preset} preset)",
            book.RE: f"{book.short(book.RE)}, run logs",
            book.PAPER: f"{book.short(book.PAPER)}, claimed",
        },
        verdicts=book.welch_labels(HA_BASES, params),
    ),
    "fig-glance",
    f"Test accuracy against trainable parameters of every model saved at the *{params.preset}* preset "
    "(filled circles: the mean over the saved seeds, with a bar of ± one standard deviation where there are "
    "two seeds or more) and of the published and [Re] figures that come with a parameter count (hollow; "
    "[Re]: best accuracies in the authors' run logs, 300 epochs; parameter counts derived from the "
    "authors' code). Colours are model families, labels the variant (heads, isotropic or not); "
    "each arrow runs from a model to its Hierarchical-Attention variant (chapter 4). Under each of our HA "
    "points, framed in its model's colour: HA − model in accuracy points over every saved seed, with its "
    "95% Welch interval in brackets and its p adjusted by Holm's method over the five pairs, or the seeds per "
    "side (n = model/HA) where a side has one seed and there is no interval (chapter 4, HA over seeds).",
)

# %% [markdown]
# At the *{glue:text}`intro_preset`* preset {glue:text}`intro_done` of the {glue:text}`intro_total` experiments
# are saved, from {glue:text}`intro_hours` of training in all. The figure shows two clusters, and only
# comparisons *within* the lower one carry meaning: the papers' models are about
# {glue:text}`intro_scale` times larger than ours (median over the points shown) and reach about
# {glue:text}`intro_gap` points more, after 300 epochs on GPUs against our few epochs on two CPU cores.
#
# Within our runs, and always as the mean over the saved seeds of a model, the best attention model is
# {glue:text}`intro_best`, at {glue:text}`intro_best_acc` test accuracy (n = {glue:text}`intro_best_seeds`
# seeds), {glue:text}`intro_best_gap` points {glue:text}`intro_best_where` ResNet18 at
# {glue:text}`intro_resnet_acc` (n = {glue:text}`intro_resnet_seeds`). Where ResNet18 leads, its built-in
# locality is the likely reason: the attention models must first learn where to look (chapter 2).
# {glue:text}`intro_ha` Chapter 4 asks whether such differences exceed what a second seed of the same model
# changes, with Holm's correction for testing the five pairs at once: {glue:text}`intro_ha_survivors` of
# the five differences survive it (the labels of {numref}`fig-glance` give each adjusted p). Chapter 1's result needs
# no training: an attention layer built from a convolution matches it to float64 rounding once its width
# α is large, and gradient descent finds that construction when the filters carry weight decay.
#
# ```{admonition} Scale
# :class: important
# Our numbers at the `budget` preset are budget-scale CPU results ({glue:text}`intro_epochs_budget` epochs
# of scaled-down models); the published and [Re] numbers come from {glue:text}`intro_epochs_paper`-epoch
# GPU training. Read differences between the two as differences in compute, not in method.
# ```

# %% [markdown]
# ## Claims on trial
#
# Each claim of the two papers that this book can test, with the number that tests it, our value and a
# verdict — *reproduced*, *not reproduced*, *inconclusive*, *untestable here* where our scale cannot reach
# the conditions the claim is about (a comparable size, 300 epochs of full-size models), or *not measured*
# where its runs are not saved; each verdict names the preset, epochs and seeds it rests on —
# computed from the saved results of the *{glue:text}`intro_preset`* preset (or, for a model saved at the
# `long` preset, 60-epoch CPU runs of the same models, from that run: its value then says "(long)") by a
# rule stated with each claim in the fold-out under the table (`attnlib.claims`; chapters 2 and 4 repeat the claims their models test). {glue:text}`intro_verdicts` At the
# budget preset these are verdicts on CPU-budget runs of a few epochs, not on the papers' protocols: a
# claim "not reproduced" here may hold for the papers' models after 300 epochs, and the `long` preset
# (60-epoch CPU runs, a fixed number of epochs) exists to narrow that gap.

# %% tags=["hide-input"]
ledger = book.claims_ledger(params)
book.glue_str("intro_verdicts", book.verdict_phrase(ledger) + ".")
book.show_ledger(
    ledger,
    caption=f"The claims ledger at preset {params.preset}: each claim and the verdict its rule gives; "
    "the fold-out below gives its words (quoted, or as the research notes paraphrase it), measure, value and "
    f"rule; a value taken from a 60-epoch CPU run (preset {params.long_preset}) says so.",
)

# %% [markdown]
# The verdicts on where heads attend need runs trained for longer than the budget's few epochs, so the
# ledger takes them from the `long` preset (60-epoch CPU runs) where a run is saved there.
# {glue:text}`long_plan` The table lists those runs,
# the claims each informs and what each has cost; they resume from their checkpoints, so they are trained
# over several sessions.

# %% tags=["hide-input"]
plan, plan_sentence = book.long_plan(params)
book.glue_str("long_plan", plan_sentence)
book.show_table(
    plan,
    caption="The 60-epoch CPU runs behind the ledger: saved state, CPU-hours (wall time times threads) and "
    "the machine each trained on.",
)
