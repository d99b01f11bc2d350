"""The tables chapters show, as strings ready to display: our results laid out as the papers' tables, the
literature figures beside them, HA against its model over seeds, the points of the introduction's figure,
the claims ledger and the CPU plan. The appendix's reference tables (protocols, model configurations) are
``attnbook.reference``.
"""

from __future__ import annotations

import math
import re

from attnbook.params import Params
from attnbook.phrases import (
    NOT_MEASURED,
    NOT_USED,
    VERDICT_SHORT,
    _orders,
    fmt,
    is_missing,
    title,
    word_list,
)
from attnbook.runs import seed_accuracies, seed_map
from attnlib.analysis.literature import PAPER, RE, REFERENCES, reference_value, references, short
from attnlib.lab import plan
from attnlib.results.tables import collect, complete

NOT_FOUND_CELL = "—"

#: The verdict of an HA pair without saved runs on both sides (a table cell and the prose's verdict word).
NO_PAIR = "no saved pair"

#: The mark of each kind of literature figure in a table cell (explained by ``literature_caption``).
KIND_MARKS = {"printed": "", "claimed": "*", "run-log": "†", "derived": "‡"}

KIND_MEANING = {
    "printed": "printed in the paper",
    "claimed": "a benchmark page quoting the paper",
    "run-log": "the best test accuracy in a run-folder name of the [Re] authors' logs, not their printed table",
    "derived": "a parameter count derived from the authors' code, not printed",
}


def split_title(experiment: str) -> tuple[str, str]:
    """(model, heads) of an experiment's title for a table: ("SA learned 2D", "9") from "SA learned 2D,
    9 heads"; heads is "—" for a model without heads (ResNet18, SAN) or whose title does not give them."""
    model, *parts = title(experiment).split(", ")
    heads = next((p.split(" ")[0] for p in parts if p.endswith(" heads")), "—")
    return model + (", HA" if "HA" in parts else ""), heads


#: The grouped headers of the parameter counts and of the wall time (one statistic everywhere: the median
#: single-image forward pass of ``python -m attnlib time``), in Tables 1 and 3 and their companions.
PARAMS = "trainable parameters"
WALL_TIME = "wall time, median"


def results_table(frame, preset: str, *, pairs: bool = False, paper_params: dict | None = None):
    """Our results laid out as the report's tables, as strings ready to show, narrow enough for the text
    column: the units are in grouped headers ("test accuracy (%)"; ``PARAMS``, as trained at ``preset``
    and at the paper's settings, whole counts with thousands separators; ``WALL_TIME``: the median in ms and
    the HA / model ratio), so the cells hold only numbers,
    "47.8", or "47.9 ± 0.1 (2)" (mean ± sd (n seeds)) for rows with seed statistics, whose spaces do not
    break; show it with ``show_table(..., wrap_names=True)`` (the model names wrap). A missing result reads
    "—"; a damaged or stale one says so (``NOT_USED``); an unmeasured wall time "not measured".

    frame: rows of ``attnlib.results.tables.frame`` (``experiment``, ``status``, ``accuracy``, ``params``,
    ``wall_time_ms``...; ``seeds``, ``accuracy_sd``, ``wall_time_measured``, ``time_ratio`` from
    ``table3_frame``). ``pairs=False`` (Table 1): model, heads, accuracy, params, wall time.
    ``pairs=True`` (Table 3): model (the normal model's title), variant (normal / HA), accuracy, params,
    params at the paper's settings (``paper_params``: {experiment: count}, when given), wall time.
    """
    import pandas as pd

    if "seeds" in frame:
        accuracy = (f"test accuracy (%), {preset}", "mean ± sd (n)")
    else:
        accuracy = ("test accuracy (%)", preset)
    rows = []
    for _, r in frame.iterrows():
        done = r.get("status") == "complete"
        absent = NOT_USED.get(r.get("status"), NOT_FOUND_CELL)  # damaged / stale rows say so; missing: "—"
        if pairs:
            row = {("", "model"): r["pair"], ("", "variant"): r["variant"]}
        else:
            model, heads = split_title(r["experiment"])
            row = {("", "model"): model, ("", "heads"): heads}
        row[accuracy] = _accuracy_cell(r, done, absent)
        params = r.get("params") if done else None
        row[PARAMS, preset] = absent if is_missing(params) else f"{int(params):,}"
        if paper_params is not None:
            row[PARAMS, "paper"] = f"{int(paper_params[r['experiment']]):,}"
        if "wall_time_measured" in r:  # measured together (``table3_frame``), trained or not
            row[WALL_TIME, "ms"] = fmt(r["wall_time_ms"], "{:.2f}", NOT_MEASURED)
            if "time_ratio" in r:
                row[WALL_TIME, "HA / model"] = fmt(r["time_ratio"], "{:.2f}×", "")
        else:
            row[WALL_TIME, "ms"] = fmt(r.get("wall_time_ms") if done else None, "{:.2f}", absent)
        rows.append(row)
    table = pd.DataFrame(rows)
    table.columns = pd.MultiIndex.from_tuples(table.columns)
    return table


def _accuracy_cell(r, done: bool, absent: str) -> str:
    """Test accuracy in percent: "47.9 ± 0.1 (2)" (mean ± sd (n seeds), unbreakable spaces) for a row with
    seed statistics (``table3_frame``; "50.8 (1)" for one seed), else "47.8"."""
    accuracy = r.get("accuracy") if done else None
    if is_missing(accuracy):
        return absent
    if "seeds" not in r:
        return f"{accuracy * 100:.1f}"
    sd = r.get("accuracy_sd")
    spread = "" if is_missing(sd) else f"\u00a0±\u00a0{sd * 100:.1f}"
    return f"{accuracy * 100:.1f}{spread} ({int(r['seeds'])})"


def _literature_cell(experiment: str, source: str, quantity: str) -> str:
    found = references(experiment, source, quantity)
    if not found:
        return NOT_FOUND_CELL
    r = found[0]
    value = f"{r.value * 100:.1f}" if quantity == "test_accuracy" else f"{int(r.value):,}"
    return value + KIND_MARKS[r.kind]


def literature_table(experiments, *, pairs: bool = False, paper: bool = True):
    """The published and [Re] figures of ``experiments``, a companion to ``results_table`` and laid out as
    it is: one row per experiment with at least one figure, one column per (quantity, source) with at least
    one figure, the units in the grouped headers ("test accuracy (%)", ``PARAMS``) and numbers in the
    cells, each with the mark of its kind (``KIND_MARKS``); "—" where none was found."""
    import pandas as pd

    from attnlib.experiments import get

    accuracy, params = "test accuracy (%)", PARAMS
    columns = [((accuracy, "[Re]"), RE, "test_accuracy")]
    if paper:
        columns += [((accuracy, "Cordonnier et al."), PAPER, "test_accuracy")]
    columns += [((params, "[Re]"), RE, "params")]
    if paper:
        columns += [((params, "official code"), PAPER, "params")]
    rows = []
    for name in experiments:
        cells = {column: _literature_cell(name, source, quantity) for column, source, quantity in columns}
        if all(c == NOT_FOUND_CELL for c in cells.values()):
            continue
        exp = get(name)
        if pairs:
            key = {
                ("", "model"): title(exp.baseline or name),
                ("", "variant"): "HA" if exp.baseline else "normal",
            }
        else:
            model, heads = split_title(name)
            key = {("", "model"): model, ("", "heads"): heads}
        rows.append({**key, **cells})
    if not rows:
        return pd.DataFrame()
    table = pd.DataFrame(rows)
    table.columns = pd.MultiIndex.from_tuples(table.columns)
    keep = [c for c in table.columns if c[0] == "" or (table[c] != NOT_FOUND_CELL).any()]
    return table[keep]


def literature_caption(experiments, what: str) -> str:
    """The caption of a ``literature_table``: what it holds and what each mark means (only the kinds used)."""
    kinds = [k for k in KIND_MARKS if any(r.kind == k for r in REFERENCES if r.experiment in experiments)]
    marks = "; ".join(
        f"{KIND_MARKS[k] + ' ' if KIND_MARKS[k] else 'unmarked: '}{k}, {KIND_MEANING[k]}" for k in kinds
    )
    return f"{what}. {marks}; — not found. Sources below."


def sources_markdown(experiments) -> str:
    """A Markdown list of the sources of every literature figure used for these experiments."""
    lines = []
    for r in REFERENCES:
        if r.experiment in experiments:
            value = f"{r.value:.2%}" if r.quantity == "test_accuracy" else f"{int(r.value):,} parameters"
            note = f"; {r.note}" if r.note else ""
            line = f"{title(r.experiment)}, {r.source}, {r.kind}: {value}. Source: {r.where}{note}."
            lines.append("- " + _MODULE.sub(r"`\1`", line))  # a module path is code: `attnlib.models.vit`
    return "\n".join(lines)


#: A dotted module path of the library outside a code span ("attnlib.models.vit").
_MODULE = re.compile(r"(?<![`\w.])(attnlib(?:\.\w+)+)(?![`\w])")


def ha_family(bases, params: Params, seeds=range(10)) -> dict:
    """The HA comparisons of ``bases`` as one family of tests: {model: (Welch or None, Holm-adjusted p or
    None, family verdict, Paired or None)} over every saved seed of the chapter's preset. Holm's adjustment
    (``compare.holm``) runs over the pairs with a Welch p; a pair is "higher" / "lower" only when it
    survives it (``compare.family_verdict``). The paired-by-seed test matches the seeds both sides hold.
    Never trains."""
    from attnlib.analysis import stats as compare

    found = {}
    for base in bases:
        a, b = seed_map(base, params, seeds), seed_map(base + "_ha", params, seeds)
        w = compare.welch(a.values(), b.values()) if a and b else None
        found[base] = (w, compare.paired(a, b) if a and b else None)
    adjusted = compare.holm([None if w is None else w.p for w, _ in found.values()])
    out = {}
    for (base, (w, t)), p in zip(found.items(), adjusted, strict=True):
        out[base] = (w, p, "no interval" if w is None else compare.family_verdict(w, p), t)
    return out


def ha_effects(bases, params: Params, seeds=range(10)):
    """One row per model of ``bases``: the seeds saved of the model and of its HA variant, their test
    accuracy (mean ± sd), HA − model in points with its 95% Welch interval, the Holm-adjusted p over the
    pairs of ``bases`` (``ha_family``), degrees of freedom ν and the unadjusted p, the verdict (HA ahead /
    behind only when it survives the adjustment; "inconclusive" otherwise), the paired-by-seed test over the
    seeds both sides hold (a robustness line), the seeds per side the project's standard asks for, and the
    [Re] run-log difference where known (never trains)."""
    import pandas as pd

    from attnlib.analysis import stats as compare

    family = ha_family(bases, params, seeds)
    rows = []
    for base in bases:
        acc_a, acc_b = seed_accuracies(base, params, seeds), seed_accuracies(base + "_ha", params, seeds)
        re_gain = (
            reference_value(base + "_ha", RE, "test_accuracy") - reference_value(base, RE, "test_accuracy")
        ) * 100
        row = {
            "model": title(base),
            "seeds (model / HA)": f"{len(acc_a)} / {len(acc_b)}",
            "model acc.": compare.mean_sd(acc_a) if acc_a else NOT_FOUND_CELL,
            "HA acc.": compare.mean_sd(acc_b) if acc_b else NOT_FOUND_CELL,
        }
        w, adjusted, verdict, pair = family[base]
        if w is None:
            row.update({"HA − model [95% CI]": "—", "p (Holm)": "—", "ν": "—", "p": "—", "verdict": NO_PAIR})
            row["paired by seed"] = "—"
            row["seeds asked"] = f"{compare.MIN_SEEDS} per side"
        else:
            row.update(
                {
                    "HA − model [95% CI]": w.difference,
                    "p (Holm)": "—" if adjusted is None else f"{adjusted:.3f}",
                    "ν": "—" if w.df is None else f"{w.df:.1f}",
                    "p": "—" if w.p is None else f"{w.p:.3f}",
                    "verdict": VERDICT_SHORT[verdict],
                    "paired by seed": paired_cell(pair),
                    "seeds asked": "met" if w.seeds_wanted == 0 else f"{w.seeds_wanted} per side",
                }
            )
        row["[Re] log"] = "—" if math.isnan(re_gain) else f"{re_gain:+.1f}"
        if w is None or math.isnan(re_gain):
            row["same sign as [Re]"] = "—"
        else:
            row["same sign as [Re]"] = "yes" if (w.points > 0) == (re_gain > 0) else "no"
        rows.append(row)
    return pd.DataFrame(rows)


def paired_cell(pair) -> str:
    """A paired-by-seed test as a table cell: "−1.3, p 0.064 (5 seeds)"; without a p (fewer than 2 shared
    seeds) the mean difference and the seeds alone."""
    if pair is None or pair.n == 0:
        return "no shared seed"
    p = "" if pair.p is None else f", p {pair.p:.3f}"
    return f"{pair.points:+.1f}{p} ({pair.n} seed{'s' if pair.n > 1 else ''})"


#: The columns of ``ha_effects`` the page shows, with their shorter headers; the others (ν, p, the seeds the
#: standard asks for, the [Re] log difference and its sign against ours) go to a fold-out under it
#: (``ha_effects_split``).
HA_EFFECTS_SHOWN = {
    "model": "model",
    "seeds (model / HA)": "seeds",
    "model acc.": "model",
    "HA acc.": "HA",
    "HA − model [95% CI]": "Δ [95% CI]",
    "p (Holm)": "p (Holm)",
    "verdict": "verdict",
}


def ha_effects_split(effects):
    """(main, details) of an ``ha_effects`` table, each narrow enough for the page: ``main`` the columns of
    ``HA_EFFECTS_SHOWN`` under their shorter headers (the two accuracy columns grouped under "test accuracy
    (%)", "—" where not yet trained; Δ = HA − model), ``details`` the model and every other column (what the
    fold-out under the table shows). A number is never broken across lines: "60.1 ± 0.6" and "[−1.8, +4.9]"
    keep their spaces unbreakable, so a narrow column wraps only between the difference and its interval."""
    import pandas as pd

    main = effects[list(HA_EFFECTS_SHOWN)].copy()
    main.columns = pd.MultiIndex.from_tuples(
        [
            ("test accuracy (%)", new) if old in ("model acc.", "HA acc.") else ("", new)
            for old, new in HA_EFFECTS_SHOWN.items()
        ]
    )
    for column in [c for c in main.columns if c[0]]:  # the unit is in the header
        main[column] = main[column].map(lambda v: v.removesuffix(" %"))
    for column in main.columns[1:]:
        main[column] = main[column].map(lambda v: v.replace(" ± ", "\u00a0±\u00a0").replace(", ", ",\u00a0"))
    details = effects[["model"] + [c for c in effects.columns if c not in HA_EFFECTS_SHOWN]]
    return main, details


def welch_labels(bases, params: Params, seeds=range(10)) -> dict[str, str]:
    """{HA variant: its Welch result against its model} for the points of the introduction's figure: HA −
    model in points over every saved seed of the chapter's preset with its 95% interval and its p adjusted
    by Holm over the pairs of ``bases`` (``ha_family``), "+1.2 [−3.4, +5.8]\nHolm p 0.47", or "+1.2 (n = 1/1)"
    where a side has fewer than 2 seeds (no interval). Pairs without both saved are left out (never trains)."""
    out = {}
    for base, (w, adjusted, _, _) in ha_family(bases, params, seeds).items():
        if w is None:
            continue
        if w.interval is None:
            out[base + "_ha"] = w.difference + f" (n = {len(w.base)}/{len(w.variant)})"
        else:
            out[base + "_ha"] = w.difference + f"\nHolm p {adjusted:.2f}"
    return out


def best_attention(frame) -> dict:
    """The best attention model of ``frame`` (rows of ``seeds_frame``: means over the saved seeds) against
    ResNet18, chosen among the attention models with the most saved seeds (a mean over n seeds is never set
    beside a single run): ``model`` (its title, None when no attention model is saved), ``accuracy``,
    ``seeds`` (that n), ``resnet`` (ResNet18's accuracy, None when not saved), ``resnet_seeds`` and ``gap``
    (ResNet18 − best, in points; None without both). A NaN accuracy never wins."""
    done = complete(frame)
    if "seeds" not in done:
        done = done.assign(seeds=1)
    attention = done[done["experiment"] != "resnet18"].dropna(subset=["accuracy"])
    attention = attention[attention["seeds"] == attention["seeds"].max()]
    resnet = done[done["experiment"] == "resnet18"].dropna(subset=["accuracy"])
    out = dict(model=None, accuracy=None, seeds=None, resnet=None, resnet_seeds=None, gap=None)
    if len(attention):
        best = attention.loc[attention["accuracy"].astype(float).idxmax()]
        out.update(model=best["model"], accuracy=float(best["accuracy"]), seeds=int(best["seeds"]))
    if len(resnet):
        r = resnet.iloc[0]
        out.update(resnet=float(r["accuracy"]), resnet_seeds=int(r["seeds"]))
    if out["accuracy"] is not None and out["resnet"] is not None:
        out["gap"] = (out["resnet"] - out["accuracy"]) * 100
    return out


def ha_pair_numbers(pairs) -> dict[str, str]:
    """What ``ha_pairs`` says, as numbers for the prose: ``size`` (the share of its model's parameters HA
    keeps, "15%–26%"), ``pairs`` (pairs saved on both sides), ``above`` / ``below`` (pairs whose mean over
    the saved seeds ends above / below its model's, to 0.1 point), ``low`` / ``high`` (the smallest and
    largest HA − model, points); "—" for each when no pair is saved."""
    if pairs.empty:
        return dict.fromkeys(("size", "pairs", "above", "below", "low", "high"), NOT_FOUND_CELL) | {
            "pairs": "0"
        }
    low, high = f"{pairs['size'].min():.0%}", f"{pairs['size'].max():.0%}"
    return {
        "size": low if low == high else f"{low}–{high}",
        "pairs": f"{len(pairs)}",
        "above": f"{int((pairs['gain'].round(1) > 0).sum())}",
        "below": f"{int((pairs['gain'].round(1) < 0).sum())}",
        "low": f"{pairs['gain'].min():+.1f}",
        "high": f"{pairs['gain'].max():+.1f}",
    }


def architecture_table(names, presets=("paper", "budget")):
    """The models of ``names`` as each preset builds them (from the registry, ``experiments.resolve``): token
    grid, layers, hidden size, heads, epochs and trainable parameters, each cell "paper / budget". ResNet18
    has no token grid nor heads ("—"); its "hidden" is its first stage's width."""
    import pandas as pd

    from attnlib import experiments

    def cells(name, preset):
        rc = experiments.resolve(name, preset)
        m = rc.model
        if rc.family == "resnet":
            width = m.get("width", 64)
            return "—", f"{2 * sum(m.get('blocks', (2, 2, 2, 2))) + 2}", f"{width}", "—", rc
        from attnlib.models import make_config

        c = make_config(rc.family, **m)
        side = 32 // c.downsample
        return f"{side}×{side}", f"{c.layers}", f"{c.hidden}", f"{c.heads}", rc

    rows = []
    for name in names:
        per = [cells(name, p) for p in presets]

        def both(i, per=per):  # "16×16 / 8×8"; one value where the presets agree on a missing one ("—")
            return " / ".join(dict.fromkeys(c[i] for c in per) if per[0][i] == "—" else (c[i] for c in per))

        rows.append(
            {
                "model": title(name),
                "token grid": both(0),
                "layers": both(1),
                "hidden": both(2),
                "heads": both(3),
                "epochs": " / ".join(str(c[4].train.epochs) for c in per),
                "parameters": " / ".join(f"{experiments.count_parameters(name, p):,}" for p in presets),
            }
        )
    return pd.DataFrame(rows)


def ha_pairs(frame):
    """One row per model whose HA variant is in ``frame`` with both saved: ``experiment`` (the model),
    ``model`` (its title), ``gain`` (HA − model, accuracy points) and ``size`` (HA parameters / model
    parameters), from the frame's accuracies: the means over seeds of a ``seeds_frame`` (what the book
    shows), seed 0 of an ``attnlib.results.tables.frame``."""
    import pandas as pd

    from attnlib.experiments import get

    done = complete(frame).set_index("experiment")
    rows = []
    for name in done.index:
        base = get(name).baseline
        if base is not None and base in done.index:
            rows.append(
                {
                    "experiment": base,
                    "model": title(base),
                    "gain": (done.loc[name, "accuracy"] - done.loc[base, "accuracy"]) * 100,
                    "size": done.loc[name, "params"] / done.loc[base, "params"],
                }
            )
    return pd.DataFrame(rows, columns=["experiment", "model", "gain", "size"])


def rank_flips(runs: dict, source: str | None = None):
    """One row per pair of models that ``source`` (default [Re]) and our runs order differently: the model
    ``source`` puts higher, the other one, and the accuracy difference of the two (points) in both."""
    import pandas as pd

    source = source or RE
    ours, theirs, (_, _, flipped) = _orders(runs, source)
    rows = [
        {
            f"{short(source)} ranks higher": title(a),
            "than": title(b),
            short(source): f"{(theirs[a] - theirs[b]) * 100:+.1f}",
            "ours": f"{(ours[a] - ours[b]) * 100:+.1f}",
        }
        for a, b in flipped
    ]
    return pd.DataFrame(rows)


def group(experiment: str) -> str:
    """The family an experiment belongs to in the introduction's figure (one colour each): its model's
    title without heads, variant or HA ("SA quadratic", "SA learned 2D + content", "SAN pairwise"...)."""
    import re

    from attnlib.experiments import get

    base = get(experiment).baseline or experiment
    return re.sub(r" \(.*?\)", "", title(base).split(", ")[0])


def short_label(experiment: str) -> str:
    """What tells an experiment apart within its ``group`` in a figure: "iso 9h", "16h HA", "HA", ""."""
    words = {"(isotropic)": "iso", "(non-isotropic)": "aniso"}
    name = title(experiment)
    found = [words[w] for w in words if w in name]
    for part in name.split(", ")[1:]:
        found.append(part.replace(" heads", "h"))
    return " ".join(found)


def glance_points(frame):
    """The points of the introduction's figure (``viz.accuracy_vs_params``): one row per saved result of
    ours (rows of ``seeds_frame``: the mean over seeds, or of ``attnlib.results.tables.frame``) and per literature
    accuracy that has a parameter count of the same source, with ``experiment``, ``group``, ``label``,
    ``source`` ("ours", ``RE`` or ``PAPER``), ``kind``, ``params``, ``accuracy``, ``accuracy_sd`` (the sd over
    seeds, NaN for one seed and the literature), ``seeds`` and ``baseline`` (the normal model of an HA
    variant, else None)."""
    import pandas as pd

    from attnlib.experiments import get

    rows = []
    for _, r in complete(frame).iterrows():
        sd = r.get("accuracy_sd")
        rows.append(
            {
                "experiment": r["experiment"],
                "source": "ours",
                "kind": "measured",
                "params": float(r["params"]),
                "accuracy": float(r["accuracy"]),
                "accuracy_sd": math.nan if is_missing(sd) else float(sd),
                "seeds": int(r["seeds"]) if "seeds" in r else 1,
            }
        )
    for ref in references(quantity="test_accuracy"):
        size = reference_value(ref.experiment, ref.source, "params")
        if not math.isnan(size):
            rows.append(
                {
                    "experiment": ref.experiment,
                    "source": ref.source,
                    "kind": ref.kind,
                    "params": size,
                    "accuracy": ref.value,
                    "accuracy_sd": math.nan,
                    "seeds": 1,
                }
            )
    columns = ["experiment", "source", "kind", "params", "accuracy", "accuracy_sd", "seeds"]
    points = pd.DataFrame(rows, columns=columns)
    points.insert(1, "group", [group(n) for n in points["experiment"]])
    points.insert(2, "label", [short_label(n) for n in points["experiment"]])
    points["baseline"] = [get(n).baseline for n in points["experiment"]]
    return points


def training_time(params: Params):
    """(table, total seconds): one row per experiment with the epochs and training time of its saved run at
    ``params`` (from its provenance; never trains), and the sum over the complete runs."""
    frame = collect(params.results_dir, params.preset, seed=params.seed or 0, data=params.data)
    done = frame["status"] == "complete"
    table = frame[["experiment", "status"]].copy()
    table["epochs"] = [f"{int(e)}" if ok else "—" for ok, e in zip(done, frame["epochs"], strict=True)]
    table["train time"] = [
        f"{t / 60:.1f} min" if ok else "—" for ok, t in zip(done, frame["train_seconds"], strict=True)
    ]
    return table, float(frame.loc[done, "train_seconds"].sum())


def claims_ledger(params: Params, keys=None):
    """The claims ledger (``attnlib.analysis.claims.ledger``) at the chapter's preset, with the evidence of the runs at
    its ``long_preset`` where they are saved (``claims.gather``'s ``prefer``), computed from ``results/``
    (never trains); only the claims of ``keys`` when given, in ledger order."""
    from attnlib.analysis import claims

    evidence = claims.gather(params.results_dir, params.preset, data=params.data, prefer=params.long_preset)
    frame = claims.ledger(evidence)
    return frame if keys is None else frame[frame["claim"].isin(list(keys))]


def measure_endpoints(histories: dict, measures=("peak", "distance")):
    """The numbers behind a figure of measures against the epoch: per run (``{name: history}``) and measure,
    each layer's value after the first and after the last epoch (a pandas DataFrame, one row per run and
    measure, columns "layer 1"... as "first → last")."""
    import pandas as pd

    from attnbook import viz

    spec = {"peak": ("peak (× uniform)", "{:.2f}"), "distance": ("distance (px)", "{:.1f}")}
    rows = []
    for name, history in histories.items():
        for measure in measures:
            series = viz.layer_series(history, measure)
            if not series:
                continue
            label, number = spec[measure]  # (not `fmt`: that is the module's prose formatter)
            row = {"model": name, "measure": label}
            row |= {
                f"layer {i + 1}": f"{number.format(v[0])} → {number.format(v[-1])}" for i, v in series.items()
            }
            rows.append(row)
    return pd.DataFrame(rows).fillna("")


#: The presets of the compute record (``long_plan``): the budget grid's seeds and the ledger's `long` runs.
PLAN_PRESETS = ("budget", "long")


def long_plan(params: Params):
    """(table, numbers): the `long` runs the ledger reads (``plan.LONG_PLAN``), one row each: the claims it
    informs, its saved state (epochs and CPU-hours, wall time times threads, when complete, else "—"), the
    machine it trained on and its estimated CPU-hours on an idle core; and the numbers the appendix's compute
    section quotes: ``done`` / ``runs`` (long runs saved / listed), ``hours`` (their CPU-hours), ``seed_runs``
    and ``seed_hours`` (the budget grid's further seeds, 1 and up). Never trains."""
    import pandas as pd

    from attnlib.analysis import claims
    from attnlib.results import tables

    budget_preset, long_preset = PLAN_PRESETS
    saved = tables.collect(params.results_dir, long_preset, list(plan.LONG_PLAN), data=params.data)
    saved = saved.set_index("experiment")
    keys = {c.key: c.title for c in claims.CLAIMS}
    rows, spent, done = [], 0.0, 0
    for name, informs in plan.LONG_PLAN.items():
        complete = saved.at[name, "status"] == "complete"
        done += complete
        hours = saved.at[name, "cpu_seconds"] / 3600 if complete else 0.0  # wall time x CPU threads
        spent += hours
        device = str(saved.at[name, "wall_time_device"]) if complete else ""
        rows.append(
            {
                "run": title(name),  # the display name, as every table names a model
                "claims it informs": "; ".join(keys[k] for k in informs),
                "trained": f"{saved.at[name, 'epochs']:.0f} epochs, {hours:.1f} CPU-hours"
                if complete
                else "—",
                "machine": device.replace("(1 threads)", "(1 thread)"),
                "estimate (CPU-hours)": f"{plan.estimate_seconds(name, long_preset) / 3600:.1f}",
            }
        )
    seeds = [
        tables.collect(params.results_dir, budget_preset, seed=s, data=params.data) for s in range(1, 10)
    ]
    seeds = pd.concat(seeds)
    seeds = seeds[seeds["status"] == "complete"]
    numbers = {
        "done": f"{done}",
        "runs": f"{len(rows)}",
        "hours": f"{spent:.1f}",
        "seed_runs": f"{len(seeds)}",
        "seed_hours": f"{float(seeds['cpu_seconds'].sum()) / 3600:.1f}",
    }
    return pd.DataFrame(rows), numbers


def long_run_numbers(run) -> dict[str, str]:
    """The numbers the prose quotes of a 60-epoch run (its history logs the per-layer measures every epoch):
    ``epochs``, ``accuracy``, ``peaks`` (each layer's mean peak after the last epoch, "1.01, 1.02 and
    1.69"), ``flat`` (how many layers stayed below ``NEAR_UNIFORM`` times uniform in every epoch) and
    ``layers``; "—" for each when the run is not saved."""
    from attnbook import viz
    from attnlib.measures import NEAR_UNIFORM

    keys = ("epochs", "accuracy", "peaks", "flat", "layers")
    series = {} if run is None else viz.layer_series(run.history, "peak")
    if not series:
        return dict.fromkeys(keys, NOT_FOUND_CELL)
    return {
        "epochs": f"{len(run.history)}",
        "accuracy": fmt(run.test_accuracy),
        "peaks": word_list(f"{v[-1]:.2f}" for v in series.values()),
        "flat": f"{sum(v.max() < NEAR_UNIFORM for v in series.values())}",
        "layers": f"{len(series)}",
    }


def centre_numbers(run, shorter=None) -> dict[str, str]:
    """The numbers the prose quotes of a quadratic model's centres (``measures.logged_centres``), in input
    pixels (a token spans 32 / grid-width of them): ``epochs``, ``accuracy``, ``moved`` (each layer's mean
    displacement from initialisation at the end), ``short_moved`` / ``short_epochs`` (the same of the
    ``shorter`` run) and ``spread_start`` / ``spread_end`` (each layer's RMS distance of its centres from
    their mean, at initialisation and at the end); "—" where a run is not saved."""
    from attnlib.measures import centre_displacement, centre_spread, logged_centres

    def pixels(r):
        return 32 / float(r.attention["grid"][1]) if r is not None and r.attention else 1.0

    out = dict.fromkeys(
        ("epochs", "accuracy", "moved", "short_moved", "short_epochs", "spread_start", "spread_end"),
        NOT_FOUND_CELL,
    )
    ours = logged_centres(run)
    if ours is not None:
        scale = pixels(run)
        out |= {
            "epochs": f"{len(ours) - 1}",
            "accuracy": fmt(run.test_accuracy),
            "moved": word_list(f"{v * scale:.1f}" for v in centre_displacement(ours)[-1].tolist()),
            "spread_start": word_list(f"{v * scale:.1f}" for v in centre_spread(ours[0]).tolist()),
            "spread_end": word_list(f"{v * scale:.1f}" for v in centre_spread(ours[-1]).tolist()),
        }
    before = logged_centres(shorter)
    if before is not None:
        scale = pixels(shorter)
        out["short_epochs"] = f"{len(before) - 1}"
        out["short_moved"] = word_list(f"{v * scale:.1f}" for v in centre_displacement(before)[-1].tolist())
    return out


def ledger_table(frame):
    """The ledger at a glance: each claim's short title, whose claim it is, and the verdict with the evidence
    and scale it rests on (``label``: "not reproduced — at 60 epochs (long), 1 seed each";
    ``ledger_markdown`` gives the words, measure, value and rule of each)."""
    label = frame["label"] if "label" in frame else frame["verdict"]
    shown = frame.assign(source=frame["source"].map(short), verdict=label)
    return shown[["title", "source", "verdict"]].rename(columns={"title": "claim"})


def seeds_frame(runs: dict, params: Params):
    """The results of the chapter's ``runs`` as every table, figure and headline of the book names a model
    (``attnlib.results.tables.with_seeds`` of their ``frame``): accuracy as the mean over every saved seed of the
    current configuration (``accuracy_sd``, ``seeds``), never seed 0 alone where more seeds are saved, and the
    wall times measured for all models together by ``python -m attnlib time``. Never trains."""
    from attnlib.results import tables

    return tables.with_seeds(tables.frame(runs), params.results_dir, params.preset, data=params.data)


def table3_frame(runs: dict, params: Params):
    """Table 3 of the chapter's ``runs``: ``seeds_frame``."""
    return seeds_frame(runs, params)


def cost_table(names, preset: str = "paper"):
    """Table 1's size columns at `preset` (default the paper's settings), as strings: each model's trainable
    parameters and FLOPs of one forward pass on one 32×32 image, counted live
    (``attnlib.results.tables.table1_cost``), beside the paper's printed #params and #FLOPs ("not found" where
    the research notes hold none) and the parameters derived from the official code (‡, not printed)."""
    import pandas as pd

    from attnlib.results.tables import table1_cost

    def printed(value) -> str:
        return value if isinstance(value, str) else f"{value:,.0f}"

    cost = table1_cost(names, preset)
    return pd.DataFrame(
        {
            "model": cost["model"],
            "params (counted)": [f"{p:,}" for p in cost["params"]],
            "GFLOPs (counted)": [f"{f / 1e9:.2f}" for f in cost["flops"]],
            "#params (printed)": [printed(v) for v in cost["printed_params"]],
            "#FLOPs (printed)": [printed(v) for v in cost["printed_flops"]],
            "params, official code ‡": [
                NOT_FOUND_CELL if pd.isna(v) else f"{int(v):,}" for v in cost["derived_params"]
            ],
        }
    )
