"""How the book words what the saved results say: the marks of missing and unused results, number formats
and the few short texts its cells show (verdict words, ranks, the ledger's claims in full, a timing note).
The chapters write their own sentences; what is glued into them is numbers and verdict words.
"""

from __future__ import annotations

import math
import re

from attnbook.params import Params
from attnlib.analysis.literature import RE, reference_value, short

MISSING = "not yet trained"

#: How tables name a saved result that is not used: damaged files, or another configuration's result.
NOT_USED = {"damaged": "damaged (not used)", "stale": "other configuration (not used)"}

NOT_MEASURED = "not measured"

#: The cell of a figure or result that was not found or is not saved (a table's mark, never "nan").
NOT_FOUND_CELL = "—"


def dataset_words(specs) -> str:
    """How a sentence names the data of saved runs, from their provenance's ``dataset`` specs
    ("imagefolder-jpeg:../shared/data/cifar10" -> "CIFAR-10, JPEG copy"): the copy's kind, never a machine's
    path; several kinds joined by "; ", NOT_FOUND_CELL for none."""
    words = []
    for spec in sorted({str(s) for s in specs if s}):
        kind = spec.partition(":")[0]
        if kind.startswith("imagefolder-"):
            words.append(f"CIFAR-10, {'/'.join(f.upper() for f in kind.removeprefix('imagefolder-').split('+'))} copy")
        elif kind == "torchvision-pickle":
            words.append("CIFAR-10, torchvision's files")
        elif kind.startswith("synthetic"):
            words.append("synthetic images")
        else:
            words.append(kind)
    return "; ".join(dict.fromkeys(words)) or NOT_FOUND_CELL


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

#: The bidirectional controls (embeddings and overrides U+202A-U+202E, isolates U+2066-U+2069, the marks
#: U+200E / U+200F / U+061C): in a results string they would reorder what the page shows around them
_BIDI = re.compile("[\u202a-\u202e\u2066-\u2069\u200e\u200f\u061c]")


def visible(text) -> str:
    """``text`` from a results file with every bidirectional control written as its code point ("[U+202E]"),
    so that it shows as stored and reorders nothing. The one place the book does this: ``escaped`` (Markdown),
    ``_code`` (code spans), ``glue_str`` and ``display.show_table`` (HTML) call it."""
    return _BIDI.sub(lambda m: f"[U+{ord(m[0]):04X}]", str(text))


def escaped(text) -> str:
    """``text`` (a string from a results file: a dataset, a device, a detail) as MyST Markdown that shows it
    as typed on one line: bidirectional controls made visible (``visible``), every ASCII punctuation
    backslash-escaped, so that no HTML tag, role, directive, link, emphasis or math can start in it, and line
    breaks made spaces (no block can start either)."""
    return _PUNCTUATION.sub(r"\\\1", " ".join(visible(text).split()))


def fmt(value, spec: str = "{:.1%}", missing: str = MISSING) -> str:
    """Format a number for prose; a missing value (None or NaN) becomes ``missing``."""
    return missing if is_missing(value) else spec.format(value)


#: How the book words a verdict of ``attnlib.analysis.stats.Welch`` for an HA variant against its model.
VERDICT_SHORT = {  # for tables and the verdict words of the prose
    "higher": "HA ahead",
    "lower": "HA behind",
    "inconclusive": "inconclusive",
    "no interval": "no interval",
}


def rank_counts(runs, source: str | None = None) -> dict[str, int]:
    """Of the pairs of models saved in ``runs`` (a ``seeds_frame``: the means over seeds) that ``source``
    (default [Re]) also reports: ``pairs`` in all, how many our accuracies order the ``same`` way, how many
    are ``flipped`` (``rank_flips`` lists them) and how many are ``tied`` in one of the two."""
    same, total, flipped = _orders(runs, source or RE)[2]
    return dict(pairs=total, same=same, flipped=len(flipped), tied=total - same - len(flipped))


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


def _times(x: float) -> str:
    return f"{x:.2f}" if x < 10 else f"{x:.0f}"


def peak_range(peaks) -> str:
    """ "17–39×" (or "1.01–1.02×", "5.00×"): the smallest and largest of a run's per-layer peaks, or "—"."""
    if peaks is None:
        return "—"
    low, high = _times(float(peaks.min())), _times(float(peaks.max()))
    return f"{low}×" if low == high else f"{low}–{high}×"


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


def unused_markdown(frame) -> str:
    """'**Not used:** `x` is damaged (...).' for the rows whose saved result is damaged or stale ("" for none)."""
    if "status" not in frame:
        return ""
    rows = frame[frame["status"].isin(list(NOT_USED))]
    if rows.empty:
        return ""
    what = {"damaged": "is damaged", "stale": "was trained with another configuration"}
    items = [
        f"{escaped(title(r['experiment']))} {what[r['status']]} (``{_reason(r.get('detail', ''))}``)"
        for _, r in rows.iterrows()
    ]
    return (
        "**Not used:** "
        + "; ".join(items)
        + ". Retrain with `python -m attnlib train EXPERIMENT --preset PRESET` (or run this chapter with "
        "`train_missing=True`)."
    )


def _reason(detail) -> str:
    """What is wrong with a saved run, for the page: paths relative to the results folder's parent (never the
    build machine's absolute path), and for a run of another configuration only what differs."""
    text = re.sub(r"(?:/[^/\s]+)+/(results/)", r"\1", _code(detail))
    text = re.sub(r"^\S+ holds a result for another configuration ?", "", text)
    return text[1:-1] if text.startswith("(") and text.endswith(")") else text


def _code(text) -> str:
    """``text`` (a results file's message, a path) for a double-backtick code span: as typed, on one line."""
    return " ".join(visible(text or "").replace("`", "'").split())


def word_list(names) -> str:
    """ "a", "a and b", "a, b and c"."""
    names = list(names)
    return names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]


def ledger_markdown(frame) -> str:
    """Each claim of the ledger as a paragraph: its words and source, the measure, our value, the verdict
    and the rule that gives it (as the ledger writes them: it names models by their display names itself)."""
    return "\n".join(
        f"- **{r.title}** ({short(r.source)}, {r.where}): {r.words} *Measured by* {r.measure}. "
        f"*Ours:* {r.value}. *Verdict:* {getattr(r, 'label', r.verdict)}; the rule: {r.rule}."
        for r in frame.itertuples()
    )


def markdown_table(frame) -> str:
    """A DataFrame as a Markdown pipe table (no index), for tables inside fold-outs."""

    def cell(v) -> str:  # the cells may come from results files: shown as typed (a pipe escaped too)
        return escaped(v)

    lines = ["| " + " | ".join(cell(c) for c in frame.columns) + " |", "|" + "---|" * len(frame.columns)]
    lines += ["| " + " | ".join(cell(v) for v in row) + " |" for row in frame.itertuples(index=False)]
    return "\n".join(lines)
