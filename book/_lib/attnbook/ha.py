"""The tables and numbers of chapter 4 (Hierarchical Attention against its model): the HA comparisons over
seeds as one family of tests (Welch intervals, Holm's correction, the paired-by-seed test), the table of
their effects, the pairs' differences for the prose and the introduction's figure, and the numbers the
chapter quotes from the claims ledger's cost rows."""

from __future__ import annotations

import math

from attnbook.params import Params
from attnbook.phrases import (
    NOT_FOUND_CELL,
    VERDICT_SHORT,
    title,
)
from attnbook.runs import seed_accuracies, seed_map
from attnlib.analysis import stats as compare
from attnlib.analysis.literature import logged_gain
from attnlib.results.tables import complete

#: The verdict of an HA pair without saved runs on both sides (a table cell and the prose's verdict word).
NO_PAIR = "no saved pair"


def ha_family(bases, params: Params, seeds=range(10)) -> dict:
    """The HA comparisons of ``bases`` as one family of tests (``attnlib.analysis.stats.family``): {model:
    (Welch or None, Holm-adjusted p or None, family verdict, Paired or None)} over every saved seed of the
    chapter's preset; a pair is "higher" / "lower" only when it survives Holm's adjustment, and the
    paired-by-seed test matches the seeds both sides hold. Never trains."""
    from attnlib.analysis import stats

    return stats.family({b: (seed_map(b, params, seeds), seed_map(b + "_ha", params, seeds)) for b in bases})


def ha_effects(bases, params: Params, seeds=range(10)):
    """One row per model of ``bases``: the seeds saved of the model and of its HA variant, their test
    accuracy (mean ± sd), HA − model in points with its 95% Welch interval, the Holm-adjusted p over the
    pairs of ``bases`` (``ha_family``), degrees of freedom ν and the unadjusted p, the verdict (HA ahead /
    behind only when it survives the adjustment; "inconclusive" otherwise), the paired-by-seed test over the
    seeds both sides hold (a robustness line), the seeds per side the project's standard asks for, and the
    [Re] run-log difference where known (never trains)."""
    import pandas as pd

    family = ha_family(bases, params, seeds)
    rows = []
    for base in bases:
        acc_a, acc_b = seed_accuracies(base, params, seeds), seed_accuracies(base + "_ha", params, seeds)
        re_gain = logged_gain(base)  # the ledger's: the [Re] Gaussian network's logs for quadratic_re_9h
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
                    "p (Holm)": "—" if adjusted is None else compare.p_text(adjusted),
                    "ν": "—" if w.df is None else f"{w.df:.1f}",
                    "p": "—" if w.p is None else compare.p_text(w.p),
                    "verdict": VERDICT_SHORT[verdict],
                    "paired by seed": paired_cell(pair),
                    "seeds asked": "met"
                    if family[base].seeds_wanted == 0
                    else f"{family[base].seeds_wanted} per side",
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
    p = "" if pair.p is None else f", p {compare.p_text(pair.p)}"
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
            out[base + "_ha"] = w.difference + f"\nHolm p {compare.p_text(adjusted, 2)}"
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


def ha_family_numbers(params: Params) -> dict[str, str]:
    """``ha_pair_numbers`` over every pair of the HA family (``attnlib.analysis.rules.HA_FAMILY``), from the
    means over the saved seeds: the same pairs the family of tests weighs, whatever the chapter's ``heads``.
    Never trains."""
    from attnbook.runs import load_all
    from attnbook.tables import seeds_frame
    from attnlib.analysis.rules import HA_FAMILY

    return ha_pair_numbers(ha_pairs(seeds_frame(load_all(list(HA_FAMILY), params), params)))


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


def ha_cost_numbers(evidence) -> dict[str, str]:
    """The range over the HA pairs of the ratios HA / model the ledger's rows ``ha_train_cost`` and
    ``ha_inference_time`` judge (``attnlib.analysis.costs.pair_costs`` of the ledger's evidence): ``memory``
    and ``step`` (the memory training holds and the time of one training step), ``inference`` (wall time per image: Table 3's
    timing where a pair has it, else each saved run's own), as "0.84× to 2.51×" (one pair: "1.38×"), and
    ``held``: the share of a model's training memory that its weights, optimiser state and gradients take
    (the part sharing shrinks; the rest is one step's activations), over every model of the train-cost
    report, "0.1% to 1.8%"; "—" where nothing was measured."""
    from attnlib.analysis.costs import pair_costs

    costs = pair_costs(evidence).values()

    def span(key: str) -> str | None:
        found = sorted(v for v in (getattr(c, key) for c in costs) if v is not None)
        if not found:
            return None
        low, high = f"{found[0]:.2f}×", f"{found[-1]:.2f}×"
        return low if low == high else f"{low} to {high}"

    out = {"memory": span("memory"), "step": span("step"), "inference": span("timed") or span("runs")}
    models = ((evidence.train_cost or {}).get("models") or {}).values()
    shares = sorted(1 - m["peak_mib"] / m["total_mib"] for m in models if m.get("total_mib"))
    out["held"] = shares and (f"{shares[0]:.1%}" if f"{shares[0]:.1%}" == f"{shares[-1]:.1%}" else f"{shares[0]:.1%} to {shares[-1]:.1%}")
    return {key: NOT_FOUND_CELL if not value else value for key, value in out.items()}


#: The learned-2D pair with content trained in both initialisations (issue 30): {form: experiment suffix}, the
#: registry's [Re] form (the [Re] code's PyTorch defaults) and its declared variant with the official code's
#: ``init_bert_weights``.
INIT_FORMS = {"[Re] code (PyTorch's defaults)": "", "official code (N(0, 0.02²))": "_init_official"}


def _first_peak(run) -> str:
    """The first layer's mean peak (× uniform, heads averaged) of a run's standard probe, "1.0 → 3.2" from
    initialisation to the end (the end alone where no probe at initialisation was saved); "—" without maps."""
    from attnlib.analysis.rules import probe_layers

    end, init, _ = probe_layers(run, "peak") if run is not None else (None, None, None)
    if not end:
        return NOT_FOUND_CELL
    return (f"{init[0]:.1f} → " if init else "") + f"{end[0]:.1f}"


def init_forms(base: str, params: Params, seeds=range(10)):
    """The pair ``base`` / ``base_ha`` in each initialisation of ``INIT_FORMS``, one row each: the seeds and
    test accuracy (mean ± sd) of the model and of HA, HA − model in points (with its Welch interval where
    both sides hold two seeds or more, else the difference of the means alone), and the first layer's mean
    peak (× uniform) from initialisation to the end, in the standard probe of each side's run at the
    chapter's seed. Never trains."""
    import pandas as pd

    from attnbook.runs import load_all
    from attnlib.analysis import stats

    rows = []
    for form, suffix in INIT_FORMS.items():
        names = (base + suffix, base + "_ha" + suffix)
        acc = [seed_accuracies(n, params, seeds) for n in names]
        runs = load_all(names, params)
        rows.append(
            {
                "initialisation": form,
                "seeds (model / HA)": f"{len(acc[0])} / {len(acc[1])}",
                "model acc. (%)": stats.mean_sd(acc[0]).removesuffix(" %") if acc[0] else NOT_FOUND_CELL,
                "HA acc. (%)": stats.mean_sd(acc[1]).removesuffix(" %") if acc[1] else NOT_FOUND_CELL,
                "HA − model": stats.welch(*acc).difference if all(acc) else NOT_FOUND_CELL,
                "layer 1 peak, model": _first_peak(runs[names[0]]),
                "layer 1 peak, HA": _first_peak(runs[names[1]]),
            }
        )
    return pd.DataFrame(rows)


# ------------------------------------------------------------------ HA − model against training length
#: The presets HA − model of the [Re] Fig. 8 pair is read at (issue 48): 12 epochs (budget), 30 (budget30)
#: and 60 (long), the same models and protocol but for the lr cap and clipping of `long`.
LENGTH_PRESETS = ("budget", "budget30", "long")
#: The reading decided before the 30-epoch runs: within this many points of 0 at every length, with the
#: [Re] logs' gain outside the longest interval, there is "no trend toward the [Re] gain".
LENGTH_BAND = 2.0


def ha_by_length(base: str, params: Params, presets=LENGTH_PRESETS, seeds=range(10)):
    """HA − model of ``base`` at each training length of ``presets``: (rows, curves). ``rows``: a DataFrame, one
    row per preset with a saved seed on both sides (preset, epochs, seeds per side, the difference in points,
    its 95% Welch interval or None below 2 seeds a side, both as text in ``difference``, and `Welch.verdict`
    as ``verdict``); ``curves``: {preset: (epochs, HA − model of the seed means after every epoch, in
    points)} from the saved histories. Never trains."""
    import numpy as np
    import pandas as pd

    from attnlib import experiments
    from attnlib.results.load import read_seeds

    rows, curves = [], {}
    for preset in presets:
        runs = {}  # {name: [every complete run among seeds]}: what seed_map reads, with the histories
        for name in (base, base + "_ha"):
            found = read_seeds(name, preset, results_dir=params.results_dir, data=params.data, seeds=seeds)
            runs[name] = [saved.run for saved in found.values() if saved.complete]
        a, b = runs[base], runs[base + "_ha"]
        if not a or not b:
            continue
        w = compare.welch([r.test_accuracy for r in a], [r.test_accuracy for r in b])
        epochs = experiments.resolve(base, preset).train.epochs
        rows.append({"preset": preset, "epochs": epochs, "seeds": f"{len(a)} / {len(b)}", "points": w.points,
                     "interval": w.interval, "difference": w.difference, "verdict": w.verdict})  # fmt: skip
        mean = {
            n: 100 * np.mean([r.history["test_acc"].to_numpy(float) for r in rs], axis=0)
            for n, rs in runs.items()
        }
        curves[preset] = (np.arange(1, epochs + 1), mean[base + "_ha"] - mean[base])
    columns = ["preset", "epochs", "seeds", "points", "interval", "difference", "verdict"]
    return pd.DataFrame(rows, columns=columns), curves


def length_reading(rows, logged: float, band: float = LENGTH_BAND, longer_than: int = 12) -> str:
    """The reading of ``ha_by_length``'s rows decided before the 30-epoch runs, judged on the longest length
    with an interval (2 seeds a side or more), which must be longer than ``longer_than`` epochs (the budget's)
    or the reading is "not measured": "toward the [Re] gain" when that interval lies above 0 and holds
    ``logged`` (the [Re] logs' HA − model) and the difference grows with length; "no trend toward the [Re]
    gain" when every difference is within ``band`` points of 0 and ``logged`` lies above that interval;
    "inconclusive" otherwise."""
    with_ci = [r for r in rows.itertuples() if r.interval is not None and r.epochs > longer_than]
    if not with_ci:
        return "not measured"
    last = max(with_ci, key=lambda r: r.epochs)
    points = [r.points for r in sorted(rows.itertuples(), key=lambda r: r.epochs)]
    rising = all(b >= a for a, b in zip(points, points[1:], strict=False))
    if last.interval[0] > 0 and last.interval[0] <= logged <= last.interval[1] and rising:
        return "toward the [Re] gain"
    if all(abs(p) <= band for p in points) and logged > last.interval[1]:
        return "no trend toward the [Re] gain"
    return "inconclusive"
