"""The [Re] report's Hierarchical-Attention claims as ledger tests: HA's gain over its model (Welch intervals,
Holm-adjusted, beside [Re]'s own logged gains), its share of the parameters, and the two Fig. 8 claims judged on
the Fig. 8 model with its normal model as the control (the thresholds and the shared tests are in rules.py)."""

from __future__ import annotations

from attnlib.analysis import literature
from attnlib.analysis.rules import (
    FIFTH,
    FIG8_CONTROL,
    FIG8_MODEL,
    HA_FAMILY,
    HA_GAIN,
    HA_PAIRS,
    INCONCLUSIVE,
    NOT_MEASURED,
    NOT_REPRODUCED,
    REPRODUCED,
    SCALED_DOWN,
    UNTESTABLE,
    Evidence,
    _fmt_layers,
    _further_last,
    _ordering,
    _rises,
    display,
    probe_layers,
)


def _ha_gain(ev: Evidence):
    """The pairs' Welch intervals with their Holm-adjusted p, beside [Re]'s own logged gains; untestable at
    a scaled-down preset (the claim is about the papers' 300-epoch models), else judged on the intervals."""
    text, verdict = _ha_gain_intervals(ev)
    logged = {b: literature.logged_gain(b) for b in HA_PAIRS}
    logged = {b: g for b, g in logged.items() if g == g}  # NaN: not in the [Re] logs
    if logged:
        text += "; [Re]'s own run logs: " + ", ".join(f"{display(b)} {g:+.2f}" for b, g in logged.items())
    presets = {ev.seed_presets.get(n, ev.preset) for n in HA_FAMILY}
    if verdict != NOT_MEASURED and presets & set(SCALED_DOWN):
        return text, UNTESTABLE
    return text, verdict


def _ha_gain_intervals(ev: Evidence):
    from attnlib.analysis import stats

    tests = stats.family({b: (ev.accuracies.get(b, []), ev.accuracies.get(b + "_ha", [])) for b in HA_PAIRS})
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
        verdicts.append(REPRODUCED if low >= HA_GAIN else NOT_REPRODUCED if high < HA_GAIN else INCONCLUSIVE)
    if NOT_REPRODUCED in verdicts:
        verdict = NOT_REPRODUCED  # "in each case": one pair that is surely below refutes it
    elif all(v == REPRODUCED for v in verdicts):
        verdict = REPRODUCED
    elif all(v == NOT_MEASURED for v in verdicts):
        verdict = NOT_MEASURED
    else:
        verdict = INCONCLUSIVE
    return "; ".join(parts), verdict


def _ha_fifth(ev: Evidence):
    ratios = {
        b: ev.params_paper[b + "_ha"] / ev.params_paper[b]
        for b in HA_PAIRS
        if b in ev.params_paper and b + "_ha" in ev.params_paper
    }
    if not ratios:
        return "parameter counts not computed", NOT_MEASURED
    text = "; ".join(f"{display(b)}: {r:.2f}" for b, r in ratios.items())
    return text, REPRODUCED if all(r <= FIFTH for r in ratios.values()) else NOT_REPRODUCED


def _secondary(ev: Evidence, key: str, unit: str, spec="{:.1f}") -> str:
    """The pooled HA models other than the Fig. 8 model, as secondary lines: their end values only."""
    lines = []
    for n in [b + "_ha" for b in HA_PAIRS if b + "_ha" != FIG8_MODEL]:
        end = probe_layers(ev.runs.get(n), key)[0]
        if end is not None:
            lines.append(f"{ev.name(n)} {_fmt_layers(end, spec)}{unit}")
    return "; secondary, not judged: " + ", ".join(lines) if lines else ""


def _fig8(ev: Evidence, key: str, holds, unit: str, spec="{:.1f}", at_init=None) -> tuple[str, str]:
    """A [Re] Fig. 8 claim judged on the Fig. 8 model alone (``_ordering``), its normal model shown as the
    control and the other HA models as secondary lines."""
    text, verdict = _ordering(ev, [FIG8_MODEL], key, holds, unit, spec, at_init)
    if verdict == NOT_MEASURED:
        return f"{display(FIG8_MODEL)} not trained", NOT_MEASURED
    control = probe_layers(ev.runs.get(FIG8_CONTROL), key)[0]
    if control is not None:
        held = "holds" if holds(control, probe_layers(ev.runs.get(FIG8_CONTROL), key)[2]) else "does not hold"
        text += (
            f"; control (no HA) {ev.name(FIG8_CONTROL)}: {_fmt_layers(control, spec)}{unit}, the order {held}"
        )
    return text + _secondary(ev, key, unit, spec), verdict


def _ha_local_then_far(ev: Evidence):
    return _fig8(ev, "distance", _rises, " px", at_init=_further_last)


def _last_two_flatter(peaks: list[float], uniform: float | None = None) -> bool:
    """Fig. 8b's "no longer sparse" of the last two layers: each of them peaks lower than every earlier one."""
    return len(peaks) > 2 and max(peaks[-2:]) < min(peaks[:-2])


def _ha_last_not_sparse(ev: Evidence):
    return _fig8(ev, "peak", _last_two_flatter, "× uniform")
