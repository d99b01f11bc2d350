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
# (chapter-intro)=
# # Can self-attention do what convolution does?
#
# ```{admonition} Abstract
# :class: tip
# {cite:t}`cordonnier2020relationship` prove that a multi-head self-attention layer with $K^2$ heads and a
# relative positional encoding can express any $K \times K$ convolution, and report that attention layers
# trained on CIFAR-10 learn convolution-like patterns; the [Re] report of {cite:t}`varma2021re` adds
# Hierarchical Attention (HA), one shared block with fixed keys, claiming at least 5 points more accuracy
# with a fifth of the parameters. We rebuild both papers in one library and test each claim we can on two
# CPU cores. The theorem holds as stated: the constructed layer matches a convolution to float64 rounding,
# and gradient descent finds the construction when the filters carry weight decay. The experiments hold less
# firmly at our scale (scaled-down models, {glue:text}`intro_epochs_budget` to 60 epochs): of
# {glue:text}`intro_claims` claims, {glue:text}`intro_n_reproduced` are reproduced,
# {glue:text}`intro_n_not_reproduced` not reproduced and {glue:text}`intro_n_inconclusive` inconclusive. Our
# best attention model ends {glue:text}`intro_best_gap` points {glue:text}`intro_best_where` ResNet18, but
# most of that gap is resolution, not locality: a ResNet18 narrowed to their size and trained on their coarse
# grid of tokens loses {glue:text}`intro_resolution_share` of its lead over them. From the paper's small initialisation, learned positional
# heads stay at uniform attention (first layer {glue:text}`intro_learned_peak`× uniform after 60 epochs;
# {glue:text}`intro_learned_var_peak`× from a larger one). HA keeps {glue:text}`intro_ha_size` of its
# model's parameters, its accuracy against its model runs from {glue:text}`intro_ha_low` to
# {glue:text}`intro_ha_high` points over the pairs, and the report's gain is {glue:text}`intro_w_ha_gain`;
# since activations dominate what training holds, an HA model holds {glue:text}`intro_ha_memory` of its
# model's memory.
# ```
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
# saved results, or live when it needs no training. This introduction gives the results at a glance
# ({numref}`fig-glance`) and ends on the book's conclusion; each chapter opens with what it shows and ends
# on its findings.
#
# | chapter | what it shows |
# |---|---|
# | {ref}`chapter-theory` | the theorem ({prf:ref}`thm-express`) and its constructive proof, checked live; a layer learning to be a convolution |
# | {ref}`chapter-reproduction` | the paper's models: Paper Table 1, attention centres, learned attention maps |
# | {ref}`chapter-san-vit` | how SAN and ViT attend; SAN's operations and Triton kernels |
# | {ref}`chapter-hierarchical` | [Re] Table 3 (each model beside its HA variant) and [Re] Fig. 8 |
# | {ref}`chapter-appendix` | hyper-parameters, the attention maps of [Re] Figs. B.1–B.10, training curves, speed, compute |
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
#   with "—" what was not found, and {ref}`chapter-reproduction` lists what is missing.
#
# ## Rerunning
#
# After the README's set-up, `make book` (or `jupyter-book build book` from the repository root) builds
# this book into `_build/html`. The build executes every chapter but only *reads* `results/`: a result
# that has not been trained shows as "—" in its table, with a note naming it. To train, run one experiment with
# `python -m attnlib train EXPERIMENT --preset budget`, or a whole chapter with papermill, which trains
# whatever the chapter needs and `results/` lacks, for example
# `papermill book/04_hierarchical.ipynb out.ipynb -p heads 16 -p preset budget`.
# Every chapter has a `parameters` cell (`preset`, `data`, `device`, `seed`, ...); a bad value stops the
# run at the next cell with one line naming the parameter and its allowed values. The parameter
# `train_missing` is `None` by default, meaning "train what is missing, except during the book build";
# pass `-p train_missing False` to only load.

# %% tags=["remove-input"]
import attnbook as book
from attnbook import viz
from attnbook.ledger import seed_numbers
from attnlib import experiments
from attnlib.analysis import claims, rules
from attnlib.analysis.literature import PAPER, RE, logged_gain, short
from attnlib.analysis.rules import HA_FAMILY, HA_PAIRS
from attnlib.results import tables

# %% tags=["parameters"]
preset = "budget"  # paper | budget | smoke: the preset summarised below
results_dir = None  # None: results/ at the repository root
long_preset = "long"  # preset of the longer runs shown beside (= preset: none)

# %% tags=["remove-input"]
params = book.check_params(
    preset=preset, results_dir=results_dir, train_missing=False, long_preset=long_preset
)

# %% tags=["remove-input"]
viz.set_style()
runs = book.load_all(list(dict.fromkeys(experiments.names() + list(HA_FAMILY))), params)
frame = book.seeds_frame(runs, params)  # every model named by its mean over the saved seeds
times, total_seconds = book.training_time(params)  # the one count, as the appendix's compute section gives it
book.glue_str("intro_preset", params.preset)
book.glue_text("intro_done", int((times["status"] == "complete").sum()), "{:d}")
book.glue_text("intro_total", len(times), "{:d}")
book.glue_text("intro_hours", total_seconds / 3600, "{:.2f} CPU-hours")
best = book.best_attention(frame[frame["experiment"].isin(tables.table1_names())])  # as chapter 2 picks it
book.glue_text("intro_best", best["model"], "{}")
book.glue_text("intro_best_acc", best["accuracy"])
book.glue_text("intro_best_seeds", best["seeds"], "{:d}")
book.glue_text("intro_resnet_acc", best["resnet"])
book.glue_text("intro_resnet_seeds", best["resnet_seeds"], "{:d}")
book.glue_text("intro_resolution_share", book.resolution_control(params)[1].get("resolution_share"), "{:.0%}")
gap = best["gap"]
book.glue_text("intro_best_gap", None if gap is None else abs(gap), "{:.1f}")
book.glue_str("intro_best_where", "—" if gap is None else "below" if gap > 0 else "above")
for key, value in book.ha_family_numbers(params).items():
    book.glue_str(f"intro_ha_{key}", value)
HA_BASES = list(HA_PAIRS)  # every model with an HA variant: the ledger's family of tests
family = book.ha_family(HA_BASES, params)
book.glue_text("intro_ha_tested", sum(v.adjusted_p is not None for v in family.values()), "{:d}")
book.glue_text("intro_ha_survivors", sum(v[2] in ("higher", "lower") for v in family.values()), "{:d}")
book.glue_str("intro_epochs_paper", book.epoch_range("paper"))
book.glue_str("intro_epochs_budget", book.epoch_range("budget"))
points = book.glance_points(frame)
ours, theirs = points[points["source"] == "ours"], points[points["source"] != "ours"]
if len(ours) and len(theirs):
    scale = f"{theirs['params'].median() / ours['params'].median():.0f}"
    gap = f"{(theirs['accuracy'].median() - ours['accuracy'].median()) * 100:.0f}"
else:
    scale = gap = "—"  # a sentence never carries the mark of a missing run
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
            RE: f"{short(RE)}, run logs",
            PAPER: f"{short(PAPER)}, claimed",
        },
        verdicts=book.welch_labels(HA_BASES, params),
    ),
    "fig-glance",
    f"Test accuracy against trainable parameters. (a) Every model: ours (filled, preset {params.preset}) are "
    f"about {scale} times smaller than the papers' (hollow) and about {gap} points below them, so only "
    "comparisons within our cluster carry meaning ([Re]: best accuracies in the authors' run logs after 300 "
    "epochs, parameter counts derived from their code). (b) Our models enlarged: each point is the mean over "
    "the n saved seeds written in its label, with a bar of ± one standard deviation where n ≥ 2; an arrow "
    "runs from a model to its Hierarchical-Attention variant ({ref}`chapter-hierarchical`), framed beside it "
    "HA − model in points with its 95% Welch interval and its p adjusted by Holm's method over the pairs "
    "tested (the seeds per side, n = model/HA, where a side has one seed). Colours are model families.",
)

# %% [markdown]
# At the *{glue:text}`intro_preset`* preset {glue:text}`intro_done` of the {glue:text}`intro_total` experiments
# of our tables are saved; their seed-0 runs took {glue:text}`intro_hours` of training
# ({ref}`appendix-compute` counts every run: further seeds, variants, 60-epoch runs). The figure shows two
# clusters, and only
# comparisons *within* the lower one carry meaning: the papers' models are about
# {glue:text}`intro_scale` times larger than ours (median over the points shown) and reach about
# {glue:text}`intro_gap` points more, after 300 epochs on GPUs against our few epochs on two CPU cores.
#
# Within our runs, always as the mean over the saved seeds of a model and among the paper's attention models
# (those of Paper Table 1) with the most seeds (n = {glue:text}`intro_best_seeds`), the best is
# {glue:text}`intro_best`, at
# {glue:text}`intro_best_acc` test accuracy, {glue:text}`intro_best_gap` points {glue:text}`intro_best_where`
# ResNet18 at {glue:text}`intro_resnet_acc` (n = {glue:text}`intro_resnet_seeds`). Not all of that lead is
# locality: ResNet18 sees the 32×32 image and our attention models a coarse grid of it, and the narrow ResNet18
# trained on that same grid loses {glue:text}`intro_resolution_share` of its lead over the attention model of
# its size ({ref}`chapter-reproduction`).
#
# Hierarchical Attention keeps {glue:text}`intro_ha_size` of its model's parameters. Of the
# {glue:text}`intro_ha_pairs` pairs saved on both sides, its mean over the saved seeds ends above its model's in
# {glue:text}`intro_ha_above` and below in {glue:text}`intro_ha_below` (HA − model from
# {glue:text}`intro_ha_low` to {glue:text}`intro_ha_high` points). {ref}`chapter-hierarchical` asks whether
# such differences exceed what a second seed of the same model changes, with Holm's correction for testing
# the {glue:text}`intro_ha_tested` pairs at once: {glue:text}`intro_ha_survivors` of those differences survive
# it (the labels of
# {numref}`fig-glance` give each adjusted p). The theory of {numref}`Chapter %s <chapter-theory>` needs no training: an attention
# layer built from a convolution matches it to float64 rounding once its width α is large, and gradient
# descent finds that construction when the filters carry weight decay.
#
# ```{admonition} Scale
# :class: important
# Our numbers at the `budget` preset are budget-scale CPU results ({glue:text}`intro_epochs_budget` epochs
# of scaled-down models); the published and [Re] numbers come from {glue:text}`intro_epochs_paper`-epoch
# GPU training. Read differences between the two as differences in compute, not in method.
# ```

# %% [markdown]
# (intro-claims)=
# ## Claims on trial
#
# Each claim of the two papers that this book can test, with the number that tests it, our value and a
# verdict — *reproduced*, *not reproduced*, *inconclusive*, *untestable here* where our scale cannot reach
# the conditions the claim is about (a comparable size, 300 epochs of full-size models), or *not measured*
# where its runs are not saved; each verdict names the preset, epochs and seeds it rests on —
# computed from the saved results of the *{glue:text}`intro_preset`* preset (or, for a model saved at the
# `long` preset, 60-epoch CPU runs of the same models, from that run: its value then says "(long)") by a
# rule stated with each claim in the fold-out under the table. A claim about attention maps is judged again on
# every seed saved at the *{glue:text}`intro_preset`* preset, each seed's runs alone, and its label ends with
# that tally ("seeds 0–4: not reproduced on 5 of 5"); where the two disagree the verdict stays the one of
# the longer runs, and the tally shows the disagreement. Once each model a map claim reads has two seeds
# at the papers' geometry, 16×16 tokens (preset `tokens16`, where `budget` attends over 8×8), the claim is
# judged there instead, seed by seed, and its label keeps the 8×8 evidence beside (its measures are defined in
# {ref}`the measures' definitions <def-measures>`); {ref}`chapter-reproduction` and
# {ref}`chapter-hierarchical` repeat the claims their models test. Of the {glue:text}`intro_claims` claims,
# {glue:text}`intro_n_reproduced` are reproduced, {glue:text}`intro_n_not_reproduced` not reproduced,
# {glue:text}`intro_n_inconclusive` inconclusive, {glue:text}`intro_n_untestable` untestable here and
# {glue:text}`intro_n_not_measured` not measured. These are verdicts on CPU runs of a few to 60 epochs,
# not on the papers' protocols: a claim "not reproduced" here may hold for the papers' models after 300
# epochs.

# %% tags=["hide-input"]
evidence = book.claims_evidence(params)
ledger = book.claims_ledger(params, evidence=evidence)
cost = book.ha_cost_numbers(evidence)
book.glue_str("intro_ha_memory", cost["memory"])
book.glue_str("intro_ha_held", cost["held"])
length_rows, _ = book.ha_by_length("learned_content_9h", params)  # HA − model against training length
at_length = {r.preset: f"{r.difference} points (n {r.seeds})" for r in length_rows.itertuples()}
for preset in ("budget30", "long"):
    book.glue_str(f"intro_ha_length_{preset}", at_length.get(preset, "not saved on both sides"))
logged_9 = logged_gain("learned_content_9h")
book.glue_text("intro_ha_re_logged", logged_9, "{:+.2f} points", missing="not found")
book.glue_str("intro_ha_length_reading", book.length_reading(length_rows, logged_9))
longer = book.measured_runs(["learned_9h", "learned_9h_pos_init"], params)
for key, name in (("intro_learned_peak", "learned_9h"), ("intro_learned_var_peak", "learned_9h_pos_init")):
    profile = rules.layer_profile(longer[name])
    book.glue_text(key, profile[0]["peak"] if profile else None, "{:.2f}")
for key, name in (("intro_t16_paper", "learned_9h"), ("intro_t16_re", "learned_9h_init_re")):  # 16x16 tokens
    book.glue_str(key, seed_numbers(name, "tokens16", params)["peak"])
book.glue_str("intro_local_peak", f"{claims.by_key('learned_shifts').params['local_peak']:g}")
counts = claims.verdict_counts(ledger)
book.glue_text("intro_claims", len(ledger), "{:d}")
for verdict, key in (
    ("reproduced", "reproduced"),
    ("not reproduced", "not_reproduced"),
    ("inconclusive", "inconclusive"),
    ("untestable here", "untestable"),
    ("not measured", "not_measured"),
):
    book.glue_text(f"intro_n_{key}", counts.get(verdict, 0), "{:d}")
book.glue_verdicts(ledger, "intro")  # intro_w_<claim>: the bare verdict, for sentences
book.show_ledger(
    ledger,
    caption=f"The claims ledger at preset {params.preset}: each claim and the verdict its rule gives; "
    "the fold-out below gives its words, measure, value and rule; a value taken from a 60-epoch CPU run "
    f"(preset {params.long_preset}) says so.",
)

# %% [markdown]
# ## Conclusion
#
# Every verdict below rests on CPU runs of scaled-down models, {glue:text}`intro_epochs_budget` to 60
# epochs, most of them on an 8×8 grid of tokens where the paper attends over 16×16 (a verdict judged on
# 16×16 tokens says so in its label); the papers trained for 300 epochs on GPUs. Within that scale the book
# finds five things.
#
# 1. **Attention can be a convolution.** The construction of {prf:ref}`thm-express` matches a convolution
#    to float64 rounding, and gradient descent finds it when the filters carry weight decay
#    ({numref}`Chapter %s <chapter-theory>`; {glue:text}`intro_w_theorem`).
# 2. **Most of ResNet18's lead is resolution.** ResNet18 sees the 32×32 image, our attention models a
#    coarse grid of it; on that same grid the narrow ResNet18 loses {glue:text}`intro_resolution_share` of
#    its lead over the attention model of its size ({ref}`chapter-reproduction`).
# 3. **Initialisation decides whether learned heads leave uniform attention.** From the paper's
#    $\mathcal N(0, 0.02^2)$ initialisation the positional heads of the learned-2D model stay at uniform
#    attention ({glue:text}`intro_learned_peak`× uniform in the first layer after 60 epochs): a score
#    $w_h^\top r_\delta$ that is the product of two small factors has a small gradient in each, a plateau
#    that even a clean copy task is slow to leave ({ref}`chapter-reproduction`); from a ten times larger
#    initialisation they peak at {glue:text}`intro_learned_var_peak`×. On the papers' 16×16 tokens (20
#    epochs) the first layer's mean peak goes {glue:text}`intro_t16_paper` from the paper's initialisation
#    and {glue:text}`intro_t16_re` from the [Re] code's (PyTorch's defaults). The paper's claim that such
#    heads attend at fixed shifts is {glue:text}`intro_w_learned_shifts` by the ledger's rule, fixed before
#    these runs, which credits only a rise from below {glue:text}`intro_local_peak`× uniform: heads that
#    start above it, as the [Re] code's do on 16×16 tokens, count against the claim however far they rise
#    ({ref}`chapter-reproduction`).
# 4. **Quadratic centres move little at this scale, on 8×8 tokens as on the papers' 16×16.** Whether they
#    leave their initialisation: {glue:text}`intro_w_centres_move`; whether they settle on a grid around the
#    query: {glue:text}`intro_w_centres_grid`; whether the first layers attend locally and the later ones
#    further: {glue:text}`intro_w_centres_depth`.
# 5. **Hierarchical Attention saves parameters and little or no memory; its effect on accuracy depends on
#    the network.** It keeps
#    {glue:text}`intro_ha_size` of its model's parameters; its accuracy against its model runs from
#    {glue:text}`intro_ha_low` to {glue:text}`intro_ha_high` points over the pairs, with
#    {glue:text}`intro_ha_survivors` of {glue:text}`intro_ha_tested` differences surviving Holm's correction, so
#    the report's "at least 5% gain in each case" is {glue:text}`intro_w_ha_gain`; and because activations,
#    not weights, fill the memory of training (weights, optimiser state and gradients are
#    {glue:text}`intro_ha_held` of it), an HA model holds {glue:text}`intro_ha_memory` of its model's.
#    Trained longer, the [Re] Fig. 8 pair's HA − model is {glue:text}`intro_ha_length_budget30` after 30
#    epochs and {glue:text}`intro_ha_length_long` after 60, against the [Re] logs'
#    {glue:text}`intro_ha_re_logged` after 300: by the reading fixed before the 30-epoch runs,
#    {glue:text}`intro_ha_length_reading` ({ref}`ha-length`).
#
# What the papers claim for full-size models after 300 epochs stays open: our runs can refute a claim only
# where it should already show at our scale, and the ledger above says for each which it is.
