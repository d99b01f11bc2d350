"""How the book words what the saved results say: the marks of missing and unused results, number formats,
and the sentences chapters glue into their prose (comparisons, verdicts, ranks, provenance, timing).
"""

from __future__ import annotations

import math
import re

from attnbook.params import LONG_PRESET, Params
from attnbook.runs import seed_accuracies
from attnlib.analysis.literature import RE, reference_value, short
from attnlib.measures import NEAR_UNIFORM, attention_peaks
from attnlib.results.tables import below_target, complete

MISSING = "not yet trained"

#: How tables name a saved result that is not used: damaged files, or another configuration's result.
NOT_USED = {"damaged": "damaged (not used)", "stale": "other configuration (not used)"}

NOT_MEASURED = "not measured"


def title(experiment: str) -> str:
    """How tables and figures name an experiment (the registry's title)."""
    from attnlib.experiments import get

    return get(experiment).title


def display_names(text: str) -> str:
    """``text`` with every experiment id of the registry written as its display name ("learned_9h (long)" ->
    "SA learned 2D, 9 heads (long)"): sentences name models as a reader does (`make check-book` fails on a
    code id in running text). An id inside a path (after or before a slash) is left as it is."""
    from attnlib.experiments import EXPERIMENTS

    global _IDS
    if _IDS is None:
        names = sorted(EXPERIMENTS, key=len, reverse=True)
        _IDS = re.compile(r"(?<![\w/-])(" + "|".join(map(re.escape, names)) + r")(?![\w/-])")
    return _IDS.sub(lambda m: title(m[1]), text)


_IDS = None


def is_missing(value) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value))


#: ASCII punctuation: a backslash before any of it makes (MyST) Markdown show it as typed (CommonMark)
_PUNCTUATION = re.compile(r"([!-/:-@\[-`{-~])")


def escaped(text) -> str:
    """``text`` (a string from a results file: a dataset, a device, a detail) as MyST Markdown that shows it
    as typed on one line: every ASCII punctuation backslash-escaped, so that no HTML tag, role, directive,
    link, emphasis or math can start in it, and line breaks made spaces (no block can start either)."""
    return _PUNCTUATION.sub(r"\\\1", " ".join(str(text).split()))


def fmt(value, spec: str = "{:.1%}", missing: str = MISSING) -> str:
    """Format a number for prose; a missing value (None or NaN) becomes ``missing``."""
    return missing if is_missing(value) else spec.format(value)


#: How the book words a verdict of ``attnlib.analysis.stats.Welch`` for an HA variant against its model.
VERDICT_SHORT = {  # for tables; VERDICTS says why
    "higher": "HA ahead",
    "lower": "HA behind",
    "inconclusive": "inconclusive",
    "no interval": "no interval",
}

VERDICTS = {
    "higher": "HA ahead (the 95% interval excludes 0)",
    "lower": "HA behind (the 95% interval excludes 0)",
    "inconclusive": "inconclusive (the 95% interval holds 0, or within a family of pairs the Holm-adjusted p "
    "is 0.05 or more)",
    "no interval": "no interval (fewer than 2 seeds on a side)",
}


def welch_phrase(w) -> str:
    """ "95% Welch interval −2.3 to +5.1 points, ν = 1.1, p = 0.14: inconclusive, as the interval holds 0"
    for a ``compare.Welch`` of an HA variant against its model, or why there is no interval."""
    if w.interval is None:
        return "no interval: fewer than 2 seeds on a side"
    low, high = w.interval
    verdict = VERDICTS[w.verdict].split(" (")[0]
    why = "holds 0" if w.verdict == "inconclusive" else "excludes 0"
    return (
        f"95% Welch interval {low:+.1f} to {high:+.1f} points, ν = {w.df:.1f}, p = {w.p:.2f}: "
        f"{verdict}, as the interval {why}"
    )


def compare_phrase(base: str, variant: str, runs: dict, params: Params) -> str:
    """A sentence fragment comparing ``variant`` with ``base`` from saved results: the difference of their
    mean test accuracies over every saved seed, its Welch interval and verdict (``attnlib.analysis.stats``), and
    the parameter ratio."""
    from attnlib.analysis import stats as compare

    a, b = runs.get(base), runs.get(variant)
    if a is None or b is None:
        return "not comparable: one of the two is not saved at this preset"
    size = b.metrics["params"] / a.metrics["params"]
    acc_a = seed_accuracies(base, params) or [a.test_accuracy]
    acc_b = seed_accuracies(variant, params) or [b.test_accuracy]
    w = compare.welch(acc_a, acc_b)
    rounded = round(w.points, 1)
    where = (
        "level with" if rounded == 0 else f"{abs(rounded):.1f} points {'above' if rounded > 0 else 'below'}"
    )
    return (
        f"{where} its model on average over {len(acc_b)} and {len(acc_a)} seeds, with {size:.0%} of its "
        f"parameters{_time_phrase(variant, params)} ({welch_phrase(w)})"
    )


def variant_phrase(variant: str, runs: dict, params: Params) -> str:
    """A sentence on a claim variant (``Experiment.variant_of``) against its base model from saved results:
    test accuracy over the saved seeds of each (with a Welch interval once both have two) and the first
    layer's attention peak (multiple of uniform) of each seed-0 run. Plain text (for ``glue:text``: no
    Markdown)."""
    from attnlib import experiments
    from attnlib.analysis import stats as compare
    from attnlib.analysis.rules import layer_profile

    base = experiments.get(variant).variant_of
    a, b = runs.get(base), runs.get(variant)
    if b is None:
        return f"{variant} is not trained at preset {params.preset} yet."
    acc_b = seed_accuracies(variant, params) or [b.test_accuracy]
    text = f"At preset {params.preset} {variant} reached {fmt(sum(acc_b) / len(acc_b))} test accuracy"
    if a is None:
        return text + f" ({base} is not trained at this preset)."
    acc_a = seed_accuracies(base, params) or [a.test_accuracy]
    text += f" against {fmt(sum(acc_a) / len(acc_a))} for {base}"
    if min(len(acc_a), len(acc_b)) < 2:
        seeds = "one seed each" if len(acc_a) == len(acc_b) == 1 else f"{len(acc_b)} and {len(acc_a)} seeds"
        text += f" ({seeds}: too few for an interval)"
    else:
        text += f" ({len(acc_b)} and {len(acc_a)} seeds; {welch_phrase(compare.welch(acc_a, acc_b))})"
    peaks = {n: layer_profile(r) for n, r in ((variant, b), (base, a))}
    if all(peaks.values()):
        text += (
            f", and its first layer attends with a peak of {peaks[variant][0]['peak']:.1f} times uniform "
            f"({base}: {peaks[base][0]['peak']:.2f})"
        )
    return text + "."


def measured_peaks_phrase(name: str, run, preset: str = LONG_PRESET, first: bool = True) -> str:
    """A sentence on how a run's per-layer attention peak evolved, from its history (the `long` runs log
    it every epoch): which layers stayed below NEAR_UNIFORM times uniform in every epoch, and where the
    others ended. ``first=False``: a sentence following another such one (it does not name the preset
    again). Plain text (for ``glue:text``)."""
    from attnbook import viz

    if run is None:
        return f"The {preset} run of {name} is not saved yet."
    series = viz.layer_series(run.history, "peak")
    if not series:
        return f"The {preset} run of {name} logged no attention peaks."
    flat = [i + 1 for i, v in series.items() if v.max() < NEAR_UNIFORM]
    ended = {i + 1: f"{v[-1]:.2f}" for i, v in series.items() if i + 1 not in flat}
    epochs, accuracy = len(run.history), fmt(run.test_accuracy)
    if first:
        text = f"Trained at the {preset} preset for {epochs} epochs ({accuracy} test accuracy), {name}"
    else:
        text = f"{name}, after {epochs} epochs ({accuracy}),"
    if not flat:
        peaks = word_list(ended.values())
        return f"{text} ended with attention peaks of {peaks} times uniform in its {_layers(ended)}."
    text += f" kept {_layers(flat)} below {NEAR_UNIFORM:g} times uniform attention in every epoch"
    if ended:
        text += f", and its {_layers(ended)} ended at {word_list(ended.values())} times uniform"
    return text + "."


def measured_centres_phrase(name: str, run, shorter=None, preset: str = LONG_PRESET) -> str:
    """A sentence on how far a quadratic model's centres moved in a longer run, and how their spread per layer
    (RMS distance from the layer's mean centre, ``measures.centre_spread``) ended against its initialisation;
    ``shorter``: the same model's run at the book's preset, whose displacements follow in brackets. Plain text
    (for ``glue:text``)."""
    from attnlib.measures import centre_displacement, centre_spread
    from attnlib.measures import logged_centres as centres

    ours = centres(run)
    if ours is None:
        return f"The {preset} run of {name} is not saved yet."
    moved = [f"{v:.2f}" for v in centre_displacement(ours)[-1].tolist()]
    layers = _layers(range(1, len(moved) + 1))
    text = (
        f"Trained at the {preset} preset for {len(ours) - 1} epochs ({fmt(run.test_accuracy)} test accuracy), "
        f"{name} moved its centres by {word_list(moved)} key positions on average in its {layers}"
    )
    before = centres(shorter)
    if before is not None:
        short_moved = word_list(f"{v:.2f}" for v in centre_displacement(before)[-1].tolist())
        epochs = len(before) - 1
        text += f" (after the shorter run's {epochs} epoch{'s' if epochs != 1 else ''}: {short_moved})"
    start, end = (word_list(f"{v:.1f}" for v in centre_spread(ours[i]).tolist()) for i in (0, -1))
    return f"{text}; their spread per layer went from {start} to {end} key positions."


def _layers(numbers) -> str:
    """ "layer 1", "layers 1, 2 and 3" (1-based layer numbers)."""
    numbers = [str(n) for n in numbers]
    return ("layer " if len(numbers) == 1 else "layers ") + word_list(numbers)


def _time_phrase(variant: str, params: Params) -> str:
    """ " and 0.92× its inference time" from the timing file (``python -m attnlib time``), or ""."""
    from attnlib.results.tables import timing_columns
    from attnlib.results.timing import load

    row = timing_columns(params.results_dir, params.preset, [variant]).iloc[0]
    if is_missing(row["time_ratio"]):
        return ""
    shared = (load(params.results_dir, params.preset) or {}).get("load", {}).get("shared")
    where = ", timed on shared cores" if shared else ""
    return f" and {row['time_ratio']:.2f}× its inference time{where}"


def ha_sentence(pairs) -> str:
    """What ``ha_pairs`` says in one sentence: the share of parameters HA keeps and in how many pairs its
    mean over the saved seeds (``ha_pairs`` of a ``seeds_frame``) ends above or below its model's (chapter 4
    weighs the differences against the spread over seeds)."""
    if pairs.empty:
        return "No model is saved together with its HA variant at this preset yet."
    above, below = int((pairs["gain"].round(1) > 0).sum()), int((pairs["gain"].round(1) < 0).sum())
    level = len(pairs) - above - below
    low, high = f"{pairs['size'].min():.0%}", f"{pairs['size'].max():.0%}"
    size = low if low == high else f"{low}–{high}"
    if len(pairs) == 1:  # one pair saved: its difference, not a count
        gain = pairs["gain"].iloc[0]
        where = (
            "level with"
            if round(gain, 1) == 0
            else f"{abs(gain):.1f} points {'above' if gain > 0 else 'below'}"
        )
        return (
            f"HA keeps {size} of its model's parameters; in the one pair saved ({pairs['model'].iloc[0]}) "
            f"its mean over the saved seeds ends {where} its model's."
        )
    text = (
        f"HA keeps {size} of its model's parameters; on average over the saved seeds it ends above its model in "
        f"{above} of the {len(pairs)} pairs and below in {below}"
    )
    if level:
        text += f", level in {level}"
    return text + f" (from {pairs['gain'].min():+.1f} to {pairs['gain'].max():+.1f} points)."


def verdict_summary(effects) -> str:
    """One sentence per verdict of an ``ha_effects`` table: which models it applies to (pairs without saved
    runs: "No saved pair at this preset", so that the prose never carries the missing mark)."""
    groups = {}
    for model, verdict in zip(effects["model"], effects["verdict"], strict=True):
        groups.setdefault("no saved pair at this preset" if verdict == MISSING else verdict, []).append(model)
    return " ".join(
        f"{verdict[0].upper()}{verdict[1:]}: {'; '.join(models)}." for verdict, models in groups.items()
    )


def learned_protocol_phrase(frame, preset: str) -> str:
    """How many epochs the learned-2D protocols need against the other paper models at ``preset`` and
    whether their saved runs reach the budget target, as one clause for chapter 2."""
    from attnlib import experiments

    def train(name):
        return experiments.preset_for(name, preset).train

    def learned(name):
        return experiments.get(name).protocol in ("learned", "learned_content")

    base, pos, content = train("quadratic_iso_9h"), train("learned_9h"), train("learned_content_9h")
    if pos.epochs == base.epochs == content.epochs:
        phrase = "train as long as the other models at this preset"
    else:
        phrase = (
            f"needed {pos.epochs} epochs instead of {base.epochs} without content, and with content "
            f"{content.epochs} epochs at lr {content.lr:g}"
            + (f" with the gradient norm clipped to {content.grad_clip:g}" if content.grad_clip else "")
        )
    if preset != "budget":
        return phrase
    family = frame["experiment"].map(learned)
    saved = complete(frame[family])
    low = [title(n) for n, _ in below_target(frame, preset) if learned(n)]
    target = f"{experiments.BUDGET_TARGET:.0%}"
    if low:
        verb = "is" if len(low) == 1 else "are"
        return f"{phrase}; {', '.join(low)} {verb} still below {target} at this budget"
    if len(saved) < int(family.sum()):
        return f"{phrase}; every saved one passes {target}, not all are saved yet"
    return f"{phrase} to pass {target}"


def rank_counts(runs: dict, source: str | None = None) -> tuple[int, int]:
    """(same, total): of the pairs of models saved in ``runs`` that ``source`` (default [Re]) also reports,
    how many our accuracies order the same way."""
    same, total, _ = _orders(runs, source or RE)[2]
    return same, total


def flat_models(runs: dict) -> list[str]:
    """Titles of the runs whose token attention stayed near-uniform (below ``NEAR_UNIFORM`` × uniform) in
    every layer (runs without token attention maps are left out)."""
    found = []
    for name, run in runs.items():
        peaks = attention_peaks(run)
        if peaks is not None and peaks.max() < NEAR_UNIFORM:
            found.append(title(name))
    return found


def _orders(runs, source: str):
    """(ours, theirs, concordance) of ``runs``: {name: RunResult or None} (seed 0), or a ``seeds_frame``
    (the mean accuracy over the saved seeds of each complete row, what the book names a model by)."""
    from attnlib.analysis import stats as compare

    if hasattr(runs, "columns"):
        done = runs[runs["status"] == "complete"]
        ours = dict(zip(done["experiment"], done["accuracy"].astype(float), strict=True))
    else:
        ours = {n: r.test_accuracy for n, r in runs.items() if r is not None}
    theirs = {n: reference_value(n, source, "test_accuracy") for n in ours}
    theirs = {n: v for n, v in theirs.items() if not math.isnan(v)}
    return ours, theirs, compare.concordance(ours, theirs)


def rank_agreement(runs: dict, source: str | None = None) -> str:
    """A sentence: over the pairs of models saved in ``runs`` that ``source`` (default: the [Re] report) also
    reports, how many our accuracies order the same way, how many the other way round (``rank_flips``
    lists them) and how many are tied."""
    source = source or RE
    _, _, (same, total, flipped) = _orders(runs, source)
    if total == 0:
        return f"No two saved models have a {source} accuracy to compare their order with."
    text = (
        f"Our runs order {same} of the {total} pairs of models that {short(source)} also reports the same way"
    )
    ties = total - same - len(flipped)
    parts = []
    if flipped:
        parts.append(f"{len(flipped)} the other way round (the table below)")
    if ties:
        parts.append(f"{ties} {'is' if ties == 1 else 'are'} tied in {short(source)} or in ours")
    if parts:
        text += "; " + " and ".join(parts)
    return text + "."


def _times(x: float) -> str:
    return f"{x:.2f}" if x < 10 else f"{x:.0f}"


def _peak_range(peaks) -> str:
    low, high = _times(float(peaks.min())), _times(float(peaks.max()))
    return f"{low}×" if low == high else f"{low}–{high}×"


def uniform_attention_phrase(runs: dict) -> str:
    """Each run's strongest attention per layer as a multiple of uniform, and which runs kept near-uniform
    attention (below ``NEAR_UNIFORM``) in every layer, as sentences for the book."""
    peaks = {name: attention_peaks(run) for name, run in runs.items()}
    peaks = {name: p for name, p in peaks.items() if p is not None}
    if not peaks:
        return "No attention maps of these models are saved at this preset yet."
    listed = "; ".join(f"{title(n)}: {_peak_range(p)}" for n, p in peaks.items())
    flat = flat_models(runs)
    if flat:
        verdict = (
            f"{' and '.join(flat)} kept near-uniform attention (below {NEAR_UNIFORM:g}× uniform) in every "
            "layer: at this budget they did not learn where to look."
        )
    else:
        verdict = f"Every one of them moved beyond {NEAR_UNIFORM:g}× uniform in at least one layer."
    return f"Strongest attention probability per layer, as a multiple of uniform ({listed}). {verdict}"


def epoch_range(preset: str) -> str:
    """The epochs a preset trains for, as "4–12" (or "300" when every experiment shares one count)."""
    from attnlib import experiments

    epochs = sorted({p.train.epochs for p in experiments.PRESET_TABLE[preset].values()})
    return "–".join(dict.fromkeys(str(e) for e in (epochs[0], epochs[-1])))


def timing_markdown(params: Params) -> str:
    """Where Table 3's wall times come from (``attnlib.results.timing.machine_line``), or how to measure them."""
    from attnlib.results import timing

    report = timing.load(params.results_dir, params.preset)
    if report is None:
        return (
            f"**Wall time: {NOT_MEASURED}** at preset `{params.preset}`: run "
            f"`python -m attnlib time --preset {params.preset}` on an idle machine (it writes "
            f"`results/timing/{params.preset}.json`)."
        )
    stale = [n for n in report.get("models", {}) if n not in timing.wall_times(report, params.preset)]
    note_stale = (
        f" Measured with another configuration than the current one, hence not shown: "
        f"{escaped('; '.join(title(n) for n in stale))}."
        if stale
        else ""
    )
    return escaped(timing.machine_line(report)) + note_stale  # the timing file's strings, as typed


def provenance_markdown(frame) -> str:
    """One sentence on where our numbers come from: datasets, test images, devices, epochs; and one per
    saved result that is not used (damaged, or of another configuration), saying why."""
    done = complete(frame)
    unused = _unused_markdown(frame)
    if done.empty:
        return "No result of this table is saved at this preset yet." + unused
    parts = [
        f"{len(done)} of {len(frame)} runs are saved",
        "data: " + "; ".join(sorted({escaped(d) for d in done["dataset"].dropna()})),
        "test images: " + ", ".join(sorted({f"{int(n):,}" for n in done["test_images"].dropna()})),
        "epochs: " + ", ".join(sorted({str(int(e)) for e in done["epochs"].dropna()})),
    ]
    if done["wall_time_device"].notna().any():
        parts.append("device: " + "; ".join(sorted({escaped(d) for d in done["wall_time_device"].dropna()})))
    return "Our runs: " + "; ".join(parts) + "." + unused


def _unused_markdown(frame) -> str:
    """' **Not used:** `x` is damaged (...).' for the rows whose saved result is damaged or stale."""
    if "status" not in frame:
        return ""
    rows = frame[frame["status"].isin(list(NOT_USED))]
    if rows.empty:
        return ""
    what = {"damaged": "is damaged", "stale": "was trained with another configuration"}
    items = [
        f"{escaped(title(r['experiment']))} {what[r['status']]} (``{_code(r.get('detail', ''))}``)"
        for _, r in rows.iterrows()
    ]
    return (
        " **Not used:** "
        + "; ".join(items)
        + ". Retrain with `python -m attnlib train EXPERIMENT --preset PRESET` (or run this chapter with "
        "`train_missing=True`)."
    )


def _code(text) -> str:
    """``text`` (a results file's message, a path) for a double-backtick code span: as typed, on one line."""
    return " ".join(str(text or "").replace("`", "'").split())


def word_list(names) -> str:
    """ "a", "a and b", "a, b and c"."""
    names = list(names)
    return names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]


def verdict_phrase(frame) -> str:
    """ "Of the 11 claims, 2 are reproduced, 4 not reproduced, 3 inconclusive and 2 not measured" """
    from attnlib.analysis import claims

    counts = claims.verdict_counts(frame)
    return f"Of the {len(frame)} claims, {word_list(f'{n} {v}' for v, n in counts.items())}"


def ledger_markdown(frame) -> str:
    """Each claim of the ledger as a paragraph: its words and source, the measure, our value, the verdict
    and the rule that gives it."""
    return "\n".join(
        f"- **{r.title}** ({short(r.source)}, {r.where}): {r.words} *Measured by* {display_names(r.measure)}. "
        f"*Ours:* {display_names(r.value)}. *Verdict:* {getattr(r, 'label', r.verdict)}; the rule: {r.rule}."
        for r in frame.itertuples()
    )


def markdown_table(frame) -> str:
    """A DataFrame as a Markdown pipe table (no index), for tables inside fold-outs."""

    def cell(v) -> str:  # the cells may come from results files: shown as typed (a pipe escaped too)
        return escaped(v)

    lines = ["| " + " | ".join(cell(c) for c in frame.columns) + " |", "|" + "---|" * len(frame.columns)]
    lines += ["| " + " | ".join(cell(v) for v in row) + " |" for row in frame.itertuples(index=False)]
    return "\n".join(lines)
