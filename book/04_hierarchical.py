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
# (chapter-hierarchical)=
# # Hierarchical Attention
#
# The [Re] report {cite}`varma2021re` does more than reproduce: it proposes **Hierarchical Attention
# (HA)**. In a standard transformer each of the $L$ layers has its own weights and derives its own queries,
# keys and values from the previous layer's output. HA instead applies *one* block (attention and MLP)
# $L$ times with shared weights; the keys are computed once, from the input of the first application, and
# reused by all later ones, while queries and values are recomputed from the current features,
# {eq}`eq-ha`:
#
# $$
# \begin{aligned}
# K &= X^{(0)} W_{key},\\
# X^{(l+1)} &= \mathrm{Block}_\theta\big(X^{(l)};\, Q^{(l)}, K, V^{(l)}\big), \qquad l = 0, \dots, L - 1,\\
# Q^{(l)} &= X^{(l)} W_{qry}, \qquad V^{(l)} = X^{(l)} W_{val} .
# \end{aligned}
# $$ (eq-ha)
#
# The authors liken it to an unrolled recurrent network that refines its representation step by step
# against a fixed set of keys. Its parameter count does not depend on $L$. For ViT and the paper's
# learned-2D model the block is shared across all layers; for SAN, HA is the [Re] code's own network, one
# layer of two SAN bottlenecks applied in four passes. Every run that reproduces a [Re] row is the network
# as the [Re] code ran it, quirks included; {ref}`appendix-re-networks` describes how the hierarchical SAN
# is built and lists each way the [Re] code departs from its report, with the difference each makes.
#
# The report claims that HA gives "at least 5% gain in each case" with "almost 1/5th of the parameters",
# after 300 epochs on GPUs. At our budget HA keeps {glue:text}`ha_family_size` of its model's parameters,
# and over the seeds saved it ends above its model in {glue:text}`ha_family_above` and below in
# {glue:text}`ha_family_below` of the {glue:text}`ha_family_pairs` pairs; weighed against the spread over
# seeds, the report's gain is {glue:text}`ha_v_ha_gain`. This chapter regenerates [Re] Table 3 (each
# model beside its HA variant: accuracy, parameters and inference wall time), asks whether the differences
# exceed what a second seed of the same model changes and whether they move with training length, and draws
# [Re] Fig. 8 (where the heads of a hierarchical model attend).
#
# **Running it yourself.** `papermill book/04_hierarchical.ipynb out.ipynb -p heads 16` (from the
# repository root) loads every result of the table that `results/` holds for the chosen preset and trains
# the missing ones; `-p train_missing False` only loads. The book build never trains (a missing result
# shows as "—" in its table, with a note naming it).

# %% tags=["remove-input"]
import pandas as pd

import attnbook as book
from attnbook import viz
from attnlib import experiments
from attnlib.analysis.costs import count_parameters
from attnlib.analysis.literature import RE, logged_gain, reference_value
from attnlib.analysis.rules import HA_PAIRS
from attnlib.measures import NEAR_UNIFORM
from attnlib.results import tables

# %% tags=["parameters"]
heads = 9  # 9 | 16: heads of the learned-2D models (ViT runs use 9)
preset = "budget"  # paper | budget | smoke
data = None  # None: the preset's (CIFAR-10) | "synthetic" | a folder
device = "auto"  # auto | cpu | cuda | cuda:N (to train what results/ lacks)
seed = 0  # the runs' seed (results/<experiment>/<preset>-seed<N> if N > 0)
train_missing = None  # None: train what results/ lacks, not in a build | bool
results_dir = None  # None: results/ at the repository root
long_preset = "long"  # preset of the longer runs shown beside (= preset: none)

# %% tags=["remove-input"]
params = book.check_params(
    heads=heads,
    preset=preset,
    data=data,
    device=device,
    seed=seed,
    train_missing=train_missing,
    results_dir=results_dir,
    long_preset=long_preset,
)

# %% tags=["remove-input"]
viz.set_style()
learned = f"learned_content_{params.heads}h"
TABLE3 = tables.table3_names(params.heads)
if (
    params.train_missing
):  # papermill -p train_missing True, or ATTNLIB_TRAIN_MISSING=1: train what results/ lacks
    book.train_missing(TABLE3, params)
runs = book.load_all(TABLE3, params)
frame = book.table3_frame(runs, params)
paper_params = {name: count_parameters(name, "paper") for name in TABLE3}
book.glue_str("ha_preset", params.preset)
book.glue_text("ha_heads", params.heads, "{:d}")
done = tables.complete(frame)
book.glue_str("ha_data", book.dataset_words(done["dataset"].dropna()))

# %% [markdown]
# ## [Re] Table 3: each model and its HA variant
#
# Accuracy is top-1 on the whole test split, as mean ± standard deviation over the n saved seeds, "params"
# counts trainable parameters of the model as trained at preset *{glue:text}`ha_preset`* on
# {glue:text}`ha_data` (and, in the last column, at the paper's settings, counted from the registry), and wall time is the median of 300 timed
# forward passes of a single image after 10 warm-up passes, in float32 (the [Re] protocol), measured for
# every model together in one process, interleaved (`python -m attnlib time`), on the machine named in the
# fold-out below the table. "HA / model" compares the two round by round: it is the median of the
# per-round ratios, which drift between rounds can set apart from the ratio of the two medians beside it, even
# in direction; a star marks the pairs whose middle half of per-round ratios holds 1, whose times the
# measurement does not tell apart. The learned-2D rows use
# {glue:text}`ha_heads` heads. The [Re] figures follow in a companion table: their accuracies are run-log
# values (the best test accuracy encoded in the authors' run-folder names), not their printed table, which
# we could not retrieve, and their parameter counts were derived from their code.

# %% tags=["hide-input"]
book.show_table(
    book.results_table(frame, params.preset, pairs=True, paper_params=paper_params),
    caption=f"[Re] Table 3, our models at preset {params.preset}: each model and its HA variant, test accuracy "
    "as mean ± sd over the n saved seeds, trainable parameters (as trained, and at the paper's settings) and "
    "inference wall time per image (the median, as in Paper Table 1; * HA / model not told apart from 1).",
    wrap_names=True,
)
paper = "The wall times were measured as for Paper Table 1 ({ref}`chapter-reproduction`, under its table)."
book.show_folded(book.timing_markdown(params), "How the wall times were measured", on_paper=paper)
if book.unused_markdown(frame):
    book.show_folded(book.unused_markdown(frame), "Saved results that are not used, and why")
literature = book.literature_table(TABLE3, pairs=True, paper=False)
if len(literature):
    book.show_table(
        literature,
        caption=book.literature_caption(
            TABLE3, "[Re] Table 3, companion: the [Re] figures of the models that have any"
        ),
        compact=True,
    )
book.note_below_target(frame, params.preset)
missing = [n for n, r in runs.items() if r is None]
if missing:
    book.note_missing("[Re] Table 3", params.preset, missing, runs.status)

# %% tags=["remove-input"]
pairs = book.ha_pairs(frame)  # the means over the saved seeds; the next section tests them
book.glue_numbers("ha_pairs", book.ha_pair_numbers(pairs))
book.glue_numbers("ha_family", book.ha_family_numbers(params))  # every pair the tests weigh, both head counts
headline = pairs[pairs["experiment"] == learned]
book.glue_text("ha_our_gain", headline["gain"].iloc[0] if len(headline) else None, "{:+.1f}")
re_acc = [reference_value(n, RE, "test_accuracy") for n in (learned, learned + "_ha")]
re_params = [reference_value(n, RE, "params") for n in (learned, learned + "_ha")]
book.glue_text("ha_re_gain", (re_acc[1] - re_acc[0]) * 100, "{:+.1f} points", missing="not found")
book.glue_text("ha_re_size", re_params[1] / re_params[0], "{:.0%}", missing="not found")
for heads_re in (9, 16):
    book.glue_text(
        f"ha_re_logged_{heads_re}",
        logged_gain(f"learned_content_{heads_re}h"),
        "{:+.2f} points",
        missing="not found",
    )

# %% [markdown]
# At this preset HA keeps {glue:text}`ha_pairs_size` of its model's parameters. Of the
# {glue:text}`ha_pairs_pairs` pairs of the table saved on both sides, its mean over the saved seeds ends above its
# model's in {glue:text}`ha_pairs_above` and below in {glue:text}`ha_pairs_below` (HA − model from
# {glue:text}`ha_pairs_low` to {glue:text}`ha_pairs_high` points; "—": no pair saved). For the learned-2D
# model with content, the [Re] headline, HA − model over our saved seeds is {glue:text}`ha_our_gain`
# points ("—": not saved on both sides); in the [Re] run logs HA changes its accuracy by
# {glue:text}`ha_re_gain`, with {glue:text}`ha_re_size` of the parameters (counts derived from their
# code). A difference of a point or two between two single runs can be run-to-run noise: the next section
# weighs each against the spread over seeds.
#
# ## Does HA help at this budget?
#
# The table below puts every saved seed of each pair together: mean ± standard deviation of the test
# accuracy over seeds (`results/<experiment>/<preset>-seed<N>`), the difference of the means $d$ and
# Welch's t-test: standard error $s = \sqrt{s_a^2/n_a + s_b^2/n_b}$, Welch–Satterthwaite degrees of freedom
# $\nu = s^4 / \big(\frac{(s_a^2/n_a)^2}{n_a - 1} + \frac{(s_b^2/n_b)^2}{n_b - 1}\big)$, the 95% confidence
# interval $d \pm t_{\nu, 0.975}\, s$ and the two-sided p-value. Every model of the registry with an HA
# variant is one pair, the same family the claims ledger tests; the {glue:text}`ha_tested` pairs with a
# p-value are tested at once, so one of them may leave 0 outside its interval by chance alone. The p-values
# are therefore adjusted by Holm's method (with the $k$-th smallest of the $m$ p-values $p_{(k)}$,
# $\tilde p_{(k)} = \min(1, \max_{j \le k} (m - j + 1)\, p_{(j)})$), which keeps the chance of any false
# "ahead" or "behind" among them at 5%.
# A pair is "HA ahead" or "HA behind" only when its adjusted p is below 0.05; otherwise the verdict is
# "inconclusive", even where its own interval excludes 0. With one seed on a side there is no interval, and
# the verdict says so. As a robustness line, the fold-out gives the paired t-test over the seeds both sides
# hold (seed $s$ of the model against seed $s$ of HA: the same data order and initial draw of the shared
# parts), with its own p. Three seeds per side make a first test, five a firmer one where three leave it
# inconclusive; the fold-out's "seeds asked" column says how many each pair would still need.

# %% tags=["hide-input"]
HA_BASES = list(HA_PAIRS)  # every model with an HA variant: the ledger's family of tests
effects = book.ha_effects(HA_BASES, params)
tested = int((effects["p (Holm)"] != "—").sum())
book.glue_text("ha_tested", tested, "{:d}")
shown, details = book.ha_effects_split(effects)
book.show_table(
    shown,
    caption=f"HA against its model over seeds at preset {params.preset}: seeds saved (model / HA), test "
    "accuracy as mean ± sd (%; —: not saved), Δ = HA − model in points with its 95% Welch "
    f"confidence interval (CI), and p (Holm): the Welch p adjusted over the {tested} pairs tested, which the "
    "verdict "
    "follows. The fold-out below gives each test's ν and unadjusted p, the paired-by-seed test and the [Re] "
    "run-log difference.",
    wrap_names=True,
)
book.show_folded_table(
    details,
    "Welch details: ν degrees of freedom, two-sided p before the adjustment, the paired-by-seed test (mean "
    "difference over the shared seeds, its p, the seeds), the seeds per side a firmer test needs; the [Re] "
    "run-log difference and whether ours has its sign",
)
for base, verdict in zip(HA_BASES, effects["verdict"], strict=True):
    book.glue_str(f"ha_verdict_{base}", verdict)
book.glue_str("ha_epochs", book.epoch_range(params.preset))

# %% [markdown]
# The verdicts, pair by pair: SA quadratic ([Re] code), 9 heads: {glue:text}`ha_verdict_quadratic_re_9h`;
# SA learned 2D + content, 9 heads: {glue:text}`ha_verdict_learned_content_9h`;
# 16 heads: {glue:text}`ha_verdict_learned_content_16h`; SAN pairwise: {glue:text}`ha_verdict_san_pairwise`;
# SAN patchwise: {glue:text}`ha_verdict_san_patchwise`; ViT: {glue:text}`ha_verdict_vit`.
#
# **What this says about the [Re] claim, and what it cannot.** In the report's own words (§4.4), HA gives
# "at least 5% gain in each case" with "almost 1/5th of the parameters". Their own run logs do not show
# that gain in each case: HA − model is {glue:text}`ha_re_logged_9` for the learned-2D model with content
# and 9 heads and {glue:text}`ha_re_logged_16` with 16 heads (the best test accuracies in the authors'
# run-folder names, one run each), and
# for the {glue:text}`ha_heads`-head model HA keeps {glue:text}`ha_re_size` of its parameters. The table answers for our budget, pair by pair: "same sign as [Re]" (in its fold-out)
# compares the sign of our difference with theirs, and the verdict says whether it is larger than our
# run-to-run noise.
# Three limits keep us from reading more into it:
#
# 1. *Learning speed, not capacity.* Our runs stop after {glue:text}`ha_epochs` epochs, while still learning (training and
#    test accuracy are still close and rising, {numref}`fig-curves`). A difference here says which model learns
#    faster in its first epochs; [Re] compare accuracies after 300.
# 2. *Noise.* A difference between single runs is no evidence until it is compared with the spread
#    between seeds of one configuration; the verdict column does that where several seeds are saved.
#    With few seeds per side Welch's test has few degrees of freedom (the fold-out above gives each pair's
#    ν: about one would come from two seeds a side, $t_{1, 0.975} = 12.7$, about eight from five,
#    $t_{8, 0.975} = 2.31$), so its interval is wide and only a large, consistent difference can leave 0
#    outside it.
# 3. *Stability.* Sharing one block makes every application add its gradient to the same weights. At the
#    published learning rate (0.1) with a short warm-up, our first hierarchical learned-2D run collapsed
#    to chance while its baseline trained normally, and at lr 0.1 the 16-head HA model stalled near 20%; the budget
#    protocol of these models was changed for both members of each pair alike ({ref}`appendix-hyperparameters`,
#    protocol `learned_content`). [Re] warm up for 15 of their 300 epochs. Even "alike" is not neutral: with the
#    gradient norm clipped to 1, active on almost every step for both members, each update has the same
#    length, which the normal model spreads over four blocks and HA puts into its one shared block.
#    The learning rate therefore favours one member or the other: in the seed-0 runs of the 16-head pair's
#    earlier form in this library (before it was built as the [Re] code builds it), HA was ahead at lr 0.03
#    and behind at the current 0.06 (the same protocol's history gives both runs),
#    so at this budget the sign of HA − model is a property of the protocol as much as of the
#    model.
#    The 9-head pair, the [Re] headline, was trained at lr 0.06 only: its row of the table is one
#    protocol's answer, not a verdict on HA at every learning rate.
#
# (ha-length)=
# ### HA − model against training length
#
# The first limit above can be tested on the CPU: does HA − model of the [Re] Fig. 8 pair (the
# 9-head learned-2D model with content) move with training length? The same two networks and protocol
# are trained for 12 epochs (`budget`), 30 (`budget30`) and 60 (`long`, whose learning rate is capped at
# 0.05). The reading was fixed before the 30-epoch runs were trained: a difference that rises with length
# toward the [Re] logs' gain at 300 epochs, with an interval above 0 that holds it, supports the report;
# differences that all stay within ±2 points of 0, with the [Re] gain above the longest interval, say that
# there is no trend toward it up to that length; anything else is inconclusive. The reading needs an interval
# longer than the budget's, two seeds a side at 30 epochs or more.

# %% tags=["remove-input"]
length_rows, length_curves = book.ha_by_length("learned_content_9h", params)
logged_9 = logged_gain("learned_content_9h")
book.glue_str("ha_length_reading", book.length_reading(length_rows, logged_9))
book.glue_text("ha_length_saved", len(length_rows), "{:d}")
at_length = {r.preset: f"{r.difference} points (n {r.seeds})" for r in length_rows.itertuples()}
for preset in ("budget", "budget30", "long"):  # the three lengths the paragraph names
    book.glue_str(f"ha_length_{preset}", at_length.get(preset, "not saved on both sides"))
side = {"higher": "above 0", "lower": "below 0", "inconclusive": "across 0"}  # Welch.verdict: interval vs 0
verdict = length_rows.set_index("preset")["verdict"].get("budget30")  # None: not saved on both sides
book.glue_str("ha_length_side_budget30", side.get(verdict, "not computed"))
book.show(
    viz.gap_by_length(length_rows, length_curves, logged_9, book.LENGTH_BAND),
    "fig-ha-length",
    "HA − model of the 9-head learned-2D pair with content, in test-accuracy points, against the epoch: a thin "
    "line per training length (the difference of the seed means after every epoch of that run's own "
    "schedule), its final difference as a dot with the 95% Welch interval where each side holds two seeds or "
    "more, the [Re] logs' difference after 300 epochs dashed, and the band of ±2 points shaded.",
)

# %% [markdown]
# HA − model is {glue:text}`ha_length_budget` at 12 epochs, {glue:text}`ha_length_budget30` at 30
# and {glue:text}`ha_length_long` at 60 (95% Welch interval where each side holds two seeds; n seeds model /
# HA). Of the three lengths, {glue:text}`ha_length_saved` are saved on both sides, and the reading is:
# {glue:text}`ha_length_reading`. That reading asks whether the difference moves toward the [Re] gain; the
# difference at one length is judged, as everywhere in this book, by its interval: at 30 epochs it lies
# {glue:text}`ha_length_side_budget30` (above 0 favours HA, below 0 its model).
#
# ### The [Re] initialisation and the intended one
#
# Of the [Re] code's quirks ({ref}`appendix-re-networks`), the initialisation changes most where the attention starts: the [Re] code draws
# the positional tables of the learned-2D models from $\mathcal N(0, 1)$ and keeps PyTorch's defaults
# elsewhere, where the official code of Cordonnier et al. draws every Linear and Embedding weight from
# $\mathcal N(0, 0.02^2)$. The registry declares the 9-head pair with content in the official
# initialisation as a variant of the [Re] form, trained with the same protocol. The table sets
# the two forms side by side, with the first layer's mean peak (as a multiple of uniform attention) from
# initialisation to the end in each side's standard probe. The variant stays out of Table 3 and of the
# family of tests above: with fewer than two seeds on a side it shows which way the initialisation moves
# each model, not an interval.

# %% tags=["hide-input"]
init_table = book.init_forms("learned_content_9h", params)
init_epochs = experiments.preset_for("learned_content_9h", params.preset).train.epochs
book.glue_str("ha_init_scale", f"{params.preset} ({init_epochs} epochs)")
for key, (_, row) in zip(("re", "official"), init_table.iterrows(), strict=True):
    missing = row["HA − model"] == book.NOT_FOUND_CELL  # a sentence says so in words, never "—"
    book.glue_str(f"ha_init_{key}", "not saved on both sides" if missing else f"{row['HA − model']} points")
    book.glue_str(f"ha_init_{key}_seeds", row["seeds (model / HA)"])
book.show_table(
    init_table,
    caption=f"The 9-head learned-2D pair with content at preset {params.preset} ({init_epochs} epochs) in the [Re] "
    "code's initialisation "
    "and in the official one: seeds, test accuracy as mean ± sd (—: not saved), HA − model in points (its "
    "95% Welch interval where each side holds two seeds or more), and the first layer's mean peak (× uniform) "
    f"from initialisation to the end (seed {params.seed or 0}).",
    wrap_names=True,
)

# %% [markdown]
# ## Where a hierarchical model attends ([Re] Fig. 8)
#
# {numref}`fig-ha-attention-one` and {numref}`fig-ha-attention-mean` show the attention probabilities of
# the hierarchical learned-2D model with content for one query pixel: one row per application of the
# shared block, one column per head (the first four; the others are in the appendix), and the mean over
# all heads in the last column; first for one test image, then averaged over the saved test images.

# %% tags=["hide-input"]
book.show_attention(
    runs[learned + "_ha"],
    learned + "_ha",
    params,
    name="fig-ha-attention",
    status=runs.status,
    others="appendix",
)

# %% [markdown]
# The claims on these maps (below) are judged on the runs of the `long` preset, 60-epoch CPU runs, where
# both the model and its control are saved. The next figures draw that run of the same model, captioned with
# its preset and epochs (none where it is not saved); {ref}`appendix-maps` draws its control, the model
# without HA, after the same training.

# %% tags=["hide-input"]
drawn_long = book.show_measured_attention(
    [learned + "_ha"], params, names={learned + "_ha": "fig-ha-attention-long"}, others="appendix"
)

# %% [markdown]
# ## How each layer's attention evolves, model beside HA
#
# The [Re] report describes the HA models' maps after training; the runs of the `long` preset (60-epoch
# CPU runs of the budget's models) log after every epoch, per layer (per application of the shared
# block for HA), the measures of {ref}`the definitions <def-measures>`: distance, mean peak, image
# dependence and similarity to the previous layer. Each figure sets a model beside
# its HA variant, on shared axes (SAN's attention is a fixed window, so it has no such measures).

# %% tags=["hide-input"]
drawn = book.show_measure_curves(
    {
        f"fig-measures-{base}": ((base, base + "_ha"), f"{book.title(base)} and its HA variant.")
        for base in (learned, "vit")
    },
    params,
)
longer = book.measured_runs([learned, learned + "_ha"], params)
numbers = {book.title(n): book.long_run_numbers(r) for n, r in longer.items()}
book.show_table(
    pd.DataFrame(numbers)
    .T.reset_index(names="model")[["model", "epochs", "accuracy", "peaks", "flat"]]
    .rename(
        columns={
            "accuracy": "test accuracy",
            "peaks": "mean peak per layer, last epoch (× uniform)",
            "flat": f"layers below {NEAR_UNIFORM:g}× throughout",
        }
    ),
    caption="The 60-epoch runs (preset long, seed 0) of the learned-2D model with content and its HA variant "
    "(— : not saved).",
    wrap_names=True,
)

# %% [markdown]
# These are single runs, one seed per side: they show where each layer's attention ends after the longer
# training, while the comparison of accuracies over seeds above stays the evidence on HA's gain.
#
# ## The report's claims on trial
#
# The [Re] report's claims about HA, as the claims ledger ({ref}`chapter-intro`) tests them at this preset, or from
# a pair's `long` runs (60-epoch CPU runs) where both are saved (the value then says "(long)"): the accuracy gain over
# seeds with its Welch interval, the share of parameters at the paper's settings, the memory and time of a
# training step and the inference wall time (HA / model, measured on this machine), and what the HA models'
# attention maps do layer by layer. The gain is compared over the seeds of this preset until the
# `long` preset holds as many (or three) per side: one long run per side shows the maps, it cannot
# give an interval. The claims on the maps are judged on the model of [Re] Fig. 8, the learned-2D model
# with content and 9 heads with HA, with the same model without HA as its control; the other HA models
# are listed as secondary lines, not judged. An order between layers (local early, far later; the last two
# layers flatter) counts only where training created it, against the model at initialisation: where the
# saved run has no probe at initialisation, its value says "not measured against initialisation" and the
# claim is not passed on it.

# %% tags=["hide-input"]
evidence = book.claims_evidence(params)
ledger = book.claims_ledger(
    params,
    [
        "ha_gain",
        "ha_params",
        "ha_train_cost",
        "ha_inference_time",
        "ha_layers_differ",
        "ha_depth",
        "ha_not_sparse",
    ],
    evidence,
)
book.glue_verdicts(ledger, "ha")
book.glue_numbers("ha_cost", book.ha_cost_numbers(evidence))  # HA / model, the range over the pairs
book.show_ledger(
    ledger,
    caption=f"Claims of the [Re] report about Hierarchical Attention at preset {params.preset}.",
    printed_under="intro-claims",
)

# %% [markdown]
# {ref}`appendix-maps` draws the same maps for the normal model and for every other attention model of
# the table.
#
# ## Findings
#
# - **Parameters.** HA keeps {glue:text}`ha_family_size` of its model's parameters at this preset; the
#   report's "almost 1/5th", judged at the paper's settings (the ledger above gives each pair's share), is
#   {glue:text}`ha_w_ha_params`.
# - **Accuracy.** Over the seeds saved, HA ends above its model in {glue:text}`ha_family_above` and below in
#   {glue:text}`ha_family_below` of the {glue:text}`ha_family_pairs` pairs. Weighed against the spread over
#   seeds with Holm's correction, the verdict is {glue:text}`ha_verdict_quadratic_re_9h` for the [Re]
#   quadratic network, {glue:text}`ha_verdict_learned_content_9h` and
#   {glue:text}`ha_verdict_learned_content_16h` for the learned-2D model with content (9 and 16 heads),
#   {glue:text}`ha_verdict_san_pairwise` for SAN pairwise, {glue:text}`ha_verdict_san_patchwise` for SAN
#   patchwise and {glue:text}`ha_verdict_vit` for ViT. The report's "at least 5% gain in each case" is
#   {glue:text}`ha_w_ha_gain`; the [Re] logs themselves give {glue:text}`ha_re_logged_9` (9 heads) and
#   {glue:text}`ha_re_logged_16` (16 heads).
# - **Cost.** An HA model holds {glue:text}`ha_cost_memory` of its model's memory in training: sharing
#   shrinks the weights, optimiser state and gradients, but at this preset they are only
#   {glue:text}`ha_cost_held` of what a model holds, the rest one step's activations; one step takes {glue:text}`ha_cost_step` of its model's time, and inference
#   {glue:text}`ha_cost_inference`. "Deeper models without memory constraints" is therefore
#   {glue:text}`ha_w_ha_train_cost`, and a faster HA model {glue:text}`ha_w_ha_inference_time`.
# - **Initialisation.** For the 9-head pair with content at {glue:text}`ha_init_scale`, HA − model is
#   {glue:text}`ha_init_re` in the [Re] code's initialisation and {glue:text}`ha_init_official` in the
#   official one: the gap depends on where the weights start.
# - **Training length.** For the same pair in the [Re] initialisation, HA − model is
#   {glue:text}`ha_length_budget` at 12 epochs, {glue:text}`ha_length_budget30` at 30 and
#   {glue:text}`ha_length_long` at 60, against the [Re] logs' {glue:text}`ha_re_logged_9` after 300; by the
#   reading fixed before the 30-epoch runs, {glue:text}`ha_length_reading`; the 30-epoch interval lies
#   {glue:text}`ha_length_side_budget30`.
# - **Attention maps.** That every layer of an HA model attends differently is
#   {glue:text}`ha_w_ha_layers_differ`, that it attends locally early and further later
#   {glue:text}`ha_w_ha_depth`, and that its last layers are no longer sparse {glue:text}`ha_w_ha_not_sparse`.
#
# Our budget measures how fast each model learns in its first {glue:text}`ha_epochs` epochs, under a
# protocol whose learning rate alone can change the sign of HA − model (limit 3 above), so it can neither
# confirm nor refute the report's claim that HA improves the learned-2D model after 300 epochs.
