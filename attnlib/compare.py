"""Comparisons the book draws from saved accuracies (pure functions, no I/O): a variant against its baseline
over seeds, and whether two sets of accuracies rank the models the same way."""

from __future__ import annotations

import itertools
import math
import statistics
from dataclasses import dataclass


@dataclass(frozen=True)
class Difference:
    """variant − baseline in accuracy points, from the test accuracies (fractions) of several seeds each.

    se: standard error of the difference of means, sqrt(s_a²/n_a + s_b²/n_b); None when either side has
    fewer than 2 seeds (no spread measured)."""

    base: tuple[float, ...]
    variant: tuple[float, ...]

    @property
    def points(self) -> float:
        return (statistics.mean(self.variant) - statistics.mean(self.base)) * 100

    @property
    def se(self) -> float | None:
        if min(len(self.base), len(self.variant)) < 2:
            return None
        var = statistics.variance(self.base) / len(self.base) + statistics.variance(self.variant) / len(
            self.variant
        )
        return math.sqrt(var) * 100

    @property
    def verdict(self) -> str:
        """ "higher" / "lower" when the difference exceeds 2 standard errors, "within noise" when it does not,
        "one seed" when no spread was measured."""
        se = self.se
        if se is None:
            return "one seed"
        if abs(self.points) <= 2 * se:
            return "within noise"
        return "higher" if self.points > 0 else "lower"


def difference(base, variant) -> Difference:
    """`Difference` of two lists of test accuracies (fractions in [0, 1]); each needs at least one value."""
    base, variant = tuple(float(a) for a in base), tuple(float(a) for a in variant)
    for name, values in (("base", base), ("variant", variant)):
        if not values:
            raise ValueError(f"{name}: no accuracies given (need at least one seed)")
    return Difference(base, variant)


def mean_sd(values) -> str:
    """ "m ± s %" over seeds (accuracies as fractions), or "m %" for one seed."""
    values = [v * 100 for v in values]
    if len(values) < 2:
        return f"{values[0]:.1f} %"
    return f"{statistics.mean(values):.1f} ± {statistics.stdev(values):.1f} %"


def concordance(ours: dict[str, float], theirs: dict[str, float]) -> tuple[int, int, list[tuple[str, str]]]:
    """(same, total, reversed): over the pairs of models present in both, how many are ordered the same way
    by the two sets of accuracies (ties in either count as not the same), the number of pairs, and the
    pairs (higher by theirs, lower by theirs) that ours orders the other way round."""
    common = [k for k in ours if k in theirs]
    same, flipped = 0, []
    for a, b in itertools.combinations(common, 2):
        d_ours, d_theirs = ours[a] - ours[b], theirs[a] - theirs[b]
        if d_ours * d_theirs > 0:
            same += 1
        elif d_theirs != 0:
            flipped.append((a, b) if d_theirs > 0 else (b, a))
    return same, len(common) * (len(common) - 1) // 2, flipped
