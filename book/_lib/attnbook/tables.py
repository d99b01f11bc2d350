"""The tables chapters show, as strings ready to display: our results laid out as the papers' tables, the
literature figures beside them, the best attention model, the order of the models against [Re]'s and the
points of the introduction's figure. Chapter 4's comparisons of HA with its model are ``attnbook.ha``, the
claims ledger and the longer runs ``attnbook.ledger``, the appendix's reference tables (protocols, model
configurations) ``attnbook.reference``.
"""

from __future__ import annotations

import math
import re

from attnbook.params import Params
from attnbook.phrases import (
    NOT_FOUND_CELL,
    NOT_MEASURED,
    NOT_USED,
    _orders,
    fmt,
    is_missing,
    title,
)
from attnlib import experiments
from attnlib.analysis.costs import count_parameters
from attnlib.analysis.literature import PAPER, RE, REFERENCES, reference_value, references, short
from attnlib.results.tables import attention_rows, complete

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
                row[WALL_TIME, "HA / model"] = fmt(r["time_ratio"], "{:.2f}×", "") + _unresolved(r)
        else:
            row[WALL_TIME, "ms"] = fmt(r.get("wall_time_ms") if done else None, "{:.2f}", absent)
        rows.append(row)
    table = pd.DataFrame(rows)
    table.columns = pd.MultiIndex.from_tuples(table.columns)
    return table


UNRESOLVED = "*"  # marks an HA / model time whose per-round ratios' middle half holds 1


def _unresolved(r) -> str:
    """UNRESOLVED where the quartiles of the per-round ratios HA / model hold 1 (the two models' times not
    told apart: the median ratio's direction may differ from the ratio of the two medians beside it), else ""."""
    low, high = r.get("time_ratio_p25"), r.get("time_ratio_p75")
    return UNRESOLVED if not is_missing(low) and not is_missing(high) and low <= 1 <= high else ""


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
    return f'{what}. {marks}; — not found. Sources: the appendix, "Where the literature figures come from".'


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


def best_attention(frame, accuracies: dict | None = None) -> dict:
    """The best attention model of ``frame`` (rows of ``seeds_frame``: means over the saved seeds) against
    ResNet18, as ``attnlib.analysis.stats.best_by_seed_mean`` picks it (the highest seed mean among the
    attention models with the most saved seeds: a mean over n seeds is never set beside a single run), from
    ``accuracies`` (``{experiment: per-seed test accuracies}``, ``seed_accuracies``) or, without them, from
    the frame's means (a mean over n seeds counted as n seeds of that mean: the same mean and n). Returns
    ``model`` (its title, None when no attention model is saved), ``accuracy``, ``seeds`` (that n),
    ``resnet`` (ResNet18's accuracy, None when not saved), ``resnet_seeds`` and ``gap`` (ResNet18 − best, in
    points; None without both). A NaN accuracy never wins."""
    from attnlib.analysis.stats import best_by_seed_mean

    done = complete(frame)
    if "seeds" not in done:
        done = done.assign(seeds=1)
    attention = done[done["experiment"] != "resnet18"].dropna(subset=["accuracy"])
    resnet = done[done["experiment"] == "resnet18"].dropna(subset=["accuracy"])
    if accuracies is None:
        accuracies = {r.experiment: [float(r.accuracy)] * int(r.seeds) for r in attention.itertuples()}
    seeds = {e: [a for a in accuracies.get(e, ()) if not math.isnan(a)] for e in attention["experiment"]}
    out = dict(model=None, accuracy=None, seeds=None, resnet=None, resnet_seeds=None, gap=None)
    best = best_by_seed_mean({e: v for e, v in seeds.items() if v})
    if best is not None:
        name, mean, n = best
        model = attention.loc[attention["experiment"] == name, "model"].iloc[0]
        out.update(model=model, accuracy=float(mean), seeds=int(n))
    if len(resnet):
        r = resnet.iloc[0]
        out.update(resnet=float(r["accuracy"]), resnet_seeds=int(r["seeds"]))
    if out["accuracy"] is not None and out["resnet"] is not None:
        out["gap"] = (out["resnet"] - out["accuracy"]) * 100
    return out


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
                "parameters": " / ".join(f"{count_parameters(name, p):,}" for p in presets),
            }
        )
    return pd.DataFrame(rows)


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
    """What tells an experiment apart within its ``group`` in a figure: "iso 9h", "[Re] aniso 9h HA", "16h HA",
    "HA", ""."""
    words = {"isotropic": "iso", "non-isotropic": "aniso", "[Re] code": "[Re]"}
    name = title(experiment)
    within = name.split("(", 1)[1].split(")", 1)[0].split("; ") if "(" in name else []
    found = [words[w] for w in sorted(within, key=lambda w: w != "[Re] code") if w in words]
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

    from attnlib.analysis.costs import table1_cost

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


def below_target(table, preset: str) -> list[tuple[str, float]]:
    """(experiment, accuracy) of every saved attention model of `table` under the budget target (empty off
    budget)."""
    if preset != "budget" or "accuracy" not in table:
        return []
    low = attention_rows(table)
    low = low[low["accuracy"] < experiments.BUDGET_TARGET]
    return list(zip(low["experiment"], low["accuracy"], strict=True))


# ------------------------------------------------------------------ ResNet18: locality or resolution?
#: The resolution control (issue 48): the narrow ResNet18 on the 32x32 image and on the attention models'
#: space-to-depth grid.
RESOLUTION_PAIR = ("resnet18_narrow", "resnet18_narrow_s2d")


def resolution_control(params: Params):
    """(table, numbers): the narrow ResNet18 on the 32x32 image, the same network on the attention models' token
    grid, and the best paper attention model of a size comparable with the latter's (the near_resnet claim's
    ``comparable_within``, analysis/claims.yaml; by its mean over the saved seeds, among those with the most
    seeds), each over every saved seed of ``params.preset``;
    ``numbers``: the two differences in points with their 95% Welch intervals, Holm-adjusted over the two
    ("resolution": tokens − image; "locality": attention − ResNet on tokens), the attention model's name and
    ``resolution_share``, the part of the image ResNet's lead over the attention model that the grid takes away.
    Never trains."""
    import pandas as pd

    from attnbook.runs import seed_accuracies
    from attnlib.analysis import claims, rules
    from attnlib.analysis import stats as compare

    within = claims.by_key("near_resnet").params["comparable_within"]
    image, tokens = RESOLUTION_PAIR
    size = count_parameters(tokens, params.preset)
    rivals = [n for n in (*rules.QUADRATIC, *rules.LEARNED_POSITIONAL, *rules.LEARNED_CONTENT)
              if rules._comparable(size, count_parameters(n, params.preset), within)]  # fmt: skip
    acc = {n: seed_accuracies(n, params) for n in (image, tokens, *rivals)}  # each model's seeds read once
    best = compare.best_by_seed_mean({n: acc[n] for n in rivals})
    names = [image, tokens] + ([best[0]] if best else [])
    grid = experiments.resolve(tokens, params.preset).model.get("downsample", 1)
    side = 32 // grid
    rows = []
    for name in names:
        seen = "32×32 pixels" if name == image else f"{side}×{side} grid, {3 * grid * grid} channels"
        rows.append({"model": title(name), "input": seen, "params": f"{count_parameters(name, params.preset):,}",
                     "seeds": len(acc[name]), "test accuracy": compare.mean_sd(acc[name]) if acc[name] else NOT_FOUND_CELL})  # fmt: skip
    numbers = {"attention": title(names[2]) if len(names) == 3 else None}
    if len(names) < 3:
        return pd.DataFrame(rows), numbers
    pairs = {"resolution": (image, tokens), "locality": (tokens, names[2])}
    tested = compare.family({k: (acc[a], acc[b]) for k, (a, b) in pairs.items()})  # Welch, Holm over the two
    tests = {k: t.welch for k, t in tested.items() if t.welch is not None}
    if len(tests) == 2:  # the share of the image ResNet's lead over the attention model that resolution is
        total = tests["resolution"].points + tests["locality"].points
        numbers["resolution_share"] = tests["resolution"].points / total if total else None
    for key, w in tests.items():
        numbers[key] = w.difference
        numbers[f"{key}_verdict"] = tested[key].verdict
        numbers[f"{key}_seeds"] = f"{w.n[0]} / {w.n[1]}"
    return pd.DataFrame(rows), numbers
