"""The [Re] report's Hierarchical-Attention claims as ledger tests: HA's gain over its model (Welch intervals,
Holm-adjusted, beside [Re]'s own logged gains), its share of the parameters, and the two Fig. 8 claims judged on
the Fig. 8 model with its normal model as the control (their parameters are in claims.yaml, the shared tests in
rules.py)."""

from __future__ import annotations

from attnlib.analysis import literature
from attnlib.analysis.claims_file import Experiment, Experiments, Presets
from attnlib.analysis.rules import (
    INCONCLUSIVE,
    NOT_MEASURED,
    NOT_REPRODUCED,
    REPRODUCED,
    UNTESTABLE,
    Evidence,
    _fmt_layers,
    _further_last,
    _ordering,
    _rises,
    display,
    probe_layers,
)


def ha_gain(ev: Evidence, pairs: Experiments, gain: float, untestable_at: Presets):
    """The pairs' Welch intervals with their Holm-adjusted p, beside [Re]'s own logged gains; untestable at
    the presets `untestable_at` (scaled-down: the claim is about the papers' 300-epoch models), else judged on
    the intervals against `gain` points."""
    text, verdict = _ha_gain_intervals(ev, pairs, gain)
    logged = {b: literature.logged_gain(b) for b in pairs}
    logged = {b: g for b, g in logged.items() if g == g}  # NaN: not in the [Re] logs
    if logged:
        text += "; [Re]'s own run logs: " + ", ".join(f"{display(b)} {g:+.2f}" for b, g in logged.items())
    presets = {ev.seed_presets.get(n, ev.preset) for b in pairs for n in (b, b + "_ha")}
    if verdict != NOT_MEASURED and presets & set(untestable_at):
        return text, UNTESTABLE
    return text, verdict


def _ha_gain_intervals(ev: Evidence, pairs: Experiments, gain: float):
    from attnlib.analysis import stats

    tests = stats.family({b: (ev.accuracies.get(b, []), ev.accuracies.get(b + "_ha", [])) for b in pairs})
    parts, verdicts = [], []
    for base, (w, holm, _, _) in tests.items():
        if w is None:
            parts.append(f"{display(base)}: not trained")
            verdicts.append(NOT_MEASURED)
            continue
        n = f"n = {w.n[0]}/{w.n[1]}"
        if w.interval is None:
            parts.append(f"{ev.seeds_name(base)}: {w.difference} ({n}: no interval)")
            verdicts.append(INCONCLUSIVE)
            continue
        low, high = w.interval
        parts.append(f"{ev.seeds_name(base)}: {w.difference} ({n}, Holm p {stats.p_text(holm)})")
        verdicts.append(REPRODUCED if low >= gain else NOT_REPRODUCED if high < gain else INCONCLUSIVE)
    if NOT_REPRODUCED in verdicts:
        verdict = NOT_REPRODUCED  # "in each case": one pair that is surely below refutes it
    elif all(v == REPRODUCED for v in verdicts):
        verdict = REPRODUCED
    elif all(v == NOT_MEASURED for v in verdicts):
        verdict = NOT_MEASURED
    else:
        verdict = INCONCLUSIVE
    return "; ".join(parts), verdict


def ha_share(ev: Evidence, pairs: Experiments, at_most: float):
    """Each pair's HA / model parameters at the paper preset; reproduced when every ratio is at most `at_most`."""
    ratios = {
        b: ev.params_paper[b + "_ha"] / ev.params_paper[b]
        for b in pairs
        if b in ev.params_paper and b + "_ha" in ev.params_paper
    }
    if not ratios:
        return "parameter counts not computed", NOT_MEASURED
    text = "; ".join(f"{display(b)}: {r:.2f}" for b, r in ratios.items())
    return text, REPRODUCED if all(r <= at_most for r in ratios.values()) else NOT_REPRODUCED


def _fig8(ev: Evidence, model, control, pairs, key: str, holds, unit: str, at_init=None) -> tuple[str, str]:
    """A [Re] Fig. 8 claim judged on the Fig. 8 model alone (``_ordering``), its normal model shown as the
    control and the HA models of the other `pairs` as secondary lines (their end values only)."""
    text, verdict = _ordering(ev, [model], key, holds, unit, at_init=at_init)
    if verdict == NOT_MEASURED:
        return f"{display(model)} not trained", NOT_MEASURED
    end, _, uniform = probe_layers(ev.runs.get(control), key)
    if end is not None:
        held = "holds" if holds(end, uniform) else "does not hold"
        text += f"; control (no HA) {ev.name(control)}: {_fmt_layers(end, '{:.1f}')}{unit}, the order {held}"
    lines = []
    for n in [b + "_ha" for b in pairs if b + "_ha" != model]:
        end = probe_layers(ev.runs.get(n), key)[0]
        if end is not None:
            lines.append(f"{ev.name(n)} {_fmt_layers(end, '{:.1f}')}{unit}")
    return text + ("; secondary, not judged: " + ", ".join(lines) if lines else ""), verdict


def fig8_local_then_far(ev: Evidence, model: Experiment, control: Experiment, pairs: Experiments):
    return _fig8(ev, model, control, pairs, "distance", _rises, " px", at_init=_further_last)


def _last_two_flatter(peaks: list[float], uniform: float | None = None) -> bool:
    """Fig. 8b's "no longer sparse" of the last two layers: each of them peaks lower than every earlier one."""
    return len(peaks) > 2 and max(peaks[-2:]) < min(peaks[:-2])


def fig8_not_sparse(ev: Evidence, model: Experiment, control: Experiment, pairs: Experiments):
    return _fig8(ev, model, control, pairs, "peak", _last_two_flatter, "× uniform")
