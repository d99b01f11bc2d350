"""Comparisons the book draws from saved accuracies (pure functions, no I/O): a variant against its baseline
over seeds (Welch's t-test and the 95% confidence interval of the difference), Holm's adjustment of the
p-values of a family of such comparisons, the paired-by-seed t-test, and whether two sets of accuracies rank
the models the same way."""

from __future__ import annotations

import contextlib
import functools
import itertools
import math
import statistics
import warnings
from dataclasses import dataclass
from typing import NamedTuple

from scipy import stats

from attnlib.checks import check_fraction

#: The project's standard for a comparison of two models (DEVELOPERS.md, issue 16): at least MIN_SEEDS seeds
#: per side, MORE_SEEDS where the difference is still inconclusive after MIN_SEEDS.
MIN_SEEDS, MORE_SEEDS = 3, 5
LEVEL = 0.95  # confidence level of the interval


class _TTest:
    """t and p of a t-test as scipy gives them (``_test``: its result, None when it could not be computed; then
    t and p are None too). Shared by `Welch` and `Paired`."""

    @property
    def t(self) -> float | None:
        return None if self._test is None else float(self._test.statistic)

    @property
    def p(self) -> float | None:
        """Two-sided p-value of the hypothesis "equal means" (Welch) or "mean difference 0" (paired)."""
        return None if self._test is None else float(self._test.pvalue)


@dataclass(frozen=True)
class Welch(_TTest):
    """variant − baseline in accuracy points, from the test accuracies (fractions) of several seeds each.

    Welch's t-test for two samples with unequal variances s_a², s_b² (sample variances, n − 1):
        d  = m_b − m_a                                   difference of the means (points)
        se = sqrt(s_a²/n_a + s_b²/n_b)                   its standard error
        t  = d / se
        ν  = se⁴ / ((s_a²/n_a)²/(n_a − 1) + (s_b²/n_b)²/(n_b − 1))   Welch–Satterthwaite degrees of freedom
        p  = 2 P(T_ν > |t|)                              two-sided
        CI = d ± t_{ν, (1 + LEVEL)/2} · se
    se, t, df, p and the interval are None when either side has fewer than 2 seeds (no spread measured) or
    when no seed differs from another on either side (se = 0)."""

    base: tuple[float, ...]
    variant: tuple[float, ...]
    level: float = LEVEL

    @property
    def n(self) -> tuple[int, int]:
        """(n_base, n_variant)"""
        return len(self.base), len(self.variant)

    @property
    def means(self) -> tuple[float, float]:
        """(base, variant) mean accuracies in points."""
        return statistics.mean(self.base) * 100, statistics.mean(self.variant) * 100

    @property
    def points(self) -> float:
        """d = m_b − m_a in accuracy points."""
        return self.means[1] - self.means[0]

    @functools.cached_property
    def _test(self):
        """scipy.stats.ttest_ind(variant, base, equal_var=False) in points: Welch's t, ν, p and the interval
        (the formulas above); None without a spread (fewer than 2 seeds on a side, or se = 0)."""
        if min(self.n) < 2 or not any(self._variances()):
            return None
        with _quiet():
            return stats.ttest_ind(_points(self.variant), _points(self.base), equal_var=False)

    @property
    def se(self) -> float | None:
        if self._test is None:
            return None
        return math.sqrt(sum(v / n for v, n in zip(self._variances(), self.n, strict=True)))

    @property
    def df(self) -> float | None:
        return None if self._test is None else float(self._test.df)

    @property
    def interval(self) -> tuple[float, float] | None:
        """The `level` confidence interval of d, in points."""
        if self._test is None:
            return None
        ci = self._test.confidence_interval(self.level)
        return float(ci.low), float(ci.high)

    @property
    def difference(self) -> str:
        """d in points with its interval, "+1.6 [-1.8, +4.9]"; "+1.6" alone when there is no interval."""
        ci = self.interval
        return f"{self.points:+.1f}" + ("" if ci is None else f" [{ci[0]:+.1f}, {ci[1]:+.1f}]")

    @property
    def verdict(self) -> str:
        """ "higher" / "lower" when the interval lies above / below 0, "inconclusive" when it holds 0,
        "no interval" when it could not be computed (fewer than 2 seeds on a side, or no spread)."""
        ci = self.interval
        if ci is None:
            return "no interval"
        if ci[0] <= 0 <= ci[1]:
            return "inconclusive"
        return "higher" if ci[0] > 0 else "lower"

    @property
    def seeds_wanted(self) -> int:
        """Seeds per side the standard asks for before this comparison counts: MIN_SEEDS, then MORE_SEEDS
        while it stays inconclusive (or without an interval); 0 when the saved seeds already meet it."""
        return seeds_wanted(min(self.n), self.verdict)

    def _variances(self) -> tuple[float, float]:
        """Sample variances (n − 1) of both sides, in points²."""
        return tuple(statistics.variance(_points(s)) for s in (self.base, self.variant))


def _points(accuracies) -> list[float]:
    return [a * 100 for a in accuracies]


@contextlib.contextmanager
def _quiet():
    """scipy warns of precision loss when the values of a side are equal but for float noise (differences
    of accuracies given to 4 decimals); the formulas give the same numbers without a word, and so do we."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        yield


def seeds_wanted(n: int, verdict: str) -> int:
    """Seeds per side the standard asks for of a comparison with n seeds on its smaller side and this verdict
    (`Welch.verdict`, or its verdict within a family: `family_verdict`): MIN_SEEDS, then MORE_SEEDS while it
    is "inconclusive" or has "no interval"; 0 when the saved seeds already meet it."""
    if n < MIN_SEEDS:
        return MIN_SEEDS
    if n < MORE_SEEDS and verdict in ("inconclusive", "no interval"):
        return MORE_SEEDS
    return 0


def welch(base, variant, level: float = LEVEL) -> Welch:
    """`Welch` comparison of two lists of test accuracies (fractions in [0, 1]); each needs one value or more."""
    base, variant = tuple(float(a) for a in base), tuple(float(a) for a in variant)
    for name, values in (("base", base), ("variant", variant)):
        if not values:
            raise ValueError(f"{name}: no accuracies given (need at least one seed)")
    check_fraction("level", level)
    return Welch(base, variant, level)


def holm(pvalues) -> list[float | None]:
    """Holm's step-down adjustment of the p-values of a family of m tests, in the order given (None: a test
    that could not be computed; it is left out of the family and stays None).

    With the k-th smallest p-value p_(k) (k = 1 … m):
        p̃_(k) = min(1, max_{j ≤ k} (m − j + 1) · p_(j))
    A test is significant at level α after the adjustment when p̃ < α: the family-wise error rate (the
    chance of one false "ahead" or "behind" among the m pairs) stays at most α."""
    given = [(i, float(p)) for i, p in enumerate(pvalues) if p is not None]
    m, out, running = len(given), [None] * len(pvalues), 0.0
    for k, (i, p) in enumerate(sorted(given, key=lambda ip: ip[1])):
        running = max(running, min(1.0, (m - k) * p))  # (m − j + 1) with j = k + 1
        out[i] = running
    return out


def family_verdict(w: Welch, adjusted_p: float | None) -> str:
    """A pair's verdict within a family of comparisons: "higher" / "lower" only when its Holm-adjusted p
    (``holm``) is below 1 − level (its interval then excludes 0 too), "inconclusive" otherwise, "no interval"
    where the Welch test could not be computed."""
    if w.interval is None or adjusted_p is None:
        return "no interval"
    if adjusted_p >= 1 - w.level:
        return "inconclusive"
    return "higher" if w.points > 0 else "lower"


@dataclass(frozen=True)
class Paired(_TTest):
    """variant − baseline in accuracy points over the seeds run on both sides (seed s of the model against
    seed s of its variant): the paired t-test, a robustness check of the Welch test where the seeds match.

        d_s = 100 (b_s − a_s)        per shared seed s, n of them
        d̄ = mean d_s,  se = sd(d_s) / √n,  t = d̄ / se,  ν = n − 1,  p = 2 P(T_ν > |t|)
    se, t and p are None with fewer than 2 shared seeds or when every d_s is the same."""

    seeds: tuple[int, ...]
    differences: tuple[float, ...]  # d_s in points

    @property
    def n(self) -> int:
        return len(self.seeds)

    @property
    def points(self) -> float | None:
        return statistics.mean(self.differences) if self.differences else None

    @functools.cached_property
    def _test(self):
        """scipy.stats.ttest_1samp(d_s, 0): the paired t-test (the formulas above); None with fewer than 2
        shared seeds or when every d_s is the same."""
        if self.n < 2 or statistics.stdev(self.differences) == 0:
            return None
        with _quiet():
            return stats.ttest_1samp(self.differences, 0.0)

    @property
    def se(self) -> float | None:
        return None if self._test is None else statistics.stdev(self.differences) / math.sqrt(self.n)


def paired(base: dict, variant: dict) -> Paired:
    """`Paired` test of two {seed: test accuracy (fraction)} maps over the seeds both hold."""
    seeds = tuple(sorted(set(base) & set(variant)))
    return Paired(seeds, tuple((float(variant[s]) - float(base[s])) * 100 for s in seeds))


class Tested(NamedTuple):
    """One comparison of a `family`: its Welch test, its Holm-adjusted p, its verdict within the family
    (`family_verdict`) and the paired-by-seed test; (None, None, "no interval", None) without seeds on both
    sides."""

    welch: Welch | None
    adjusted_p: float | None
    verdict: str
    paired: Paired | None

    @property
    def seeds_wanted(self) -> int:
        """Seeds per side the standard asks for, judged on the verdict within the family: a pair whose own
        interval excludes 0 but whose Holm-adjusted p does not pass still asks for MORE_SEEDS."""
        return seeds_wanted(0 if self.welch is None else min(self.welch.n), self.verdict)


def family(pairs: dict, level: float = LEVEL) -> dict[str, Tested]:
    """The comparisons {name: (base, variant)} as one family of tests, each side a {seed: test accuracy} map
    (or a list, where seeds do not matter: then no paired test): Welch's test of each pair with seeds on both
    sides, Holm's adjustment over those with a p (`holm`), and each pair's verdict within the family."""
    tests = {}
    for name, (a, b) in pairs.items():
        values = [list(s.values()) if isinstance(s, dict) else list(s) for s in (a, b)]
        w = welch(*values, level) if all(values) else None
        tests[name] = (
            w,
            paired(a, b) if w is not None and isinstance(a, dict) and isinstance(b, dict) else None,
        )
    adjusted = holm([None if w is None else w.p for w, _ in tests.values()])
    return {
        name: Tested(w, p, "no interval" if w is None else family_verdict(w, p), pair)
        for (name, (w, pair)), p in zip(tests.items(), adjusted, strict=True)
    }


def p_text(p: float, digits: int = 3) -> str:
    """A p-value as the book prints it: "0.047" (``digits`` decimals), "< 0.001" where it rounds to zero."""
    floor = 10.0**-digits
    return f"< {floor:.{digits}f}" if p < floor / 2 else f"{p:.{digits}f}"


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


def best_by_seed_mean(accuracies: dict[str, list[float]]) -> tuple[str, float, int] | None:
    """(model, mean accuracy over its seeds, n) of the model with the highest seed mean among those with the
    most seeds of any model given (a model with fewer seeds is never named beside means over more: issue 29
    §4); None when none has a seed. Ties keep the order given."""
    full = max((len(v) for v in accuracies.values()), default=0)
    if not full:
        return None
    means = {m: sum(v) / len(v) for m, v in accuracies.items() if len(v) == full}
    best = max(means, key=means.get)
    return best, means[best], full


def noninferiority(base, variant, margin: float) -> tuple[float | None, float | None]:
    """One-sided Welch tests of "variant is at most `margin` points worse than base" (accuracies as fractions,
    the margin in points): (p of H0 d ≤ −margin, p of H0 d ≥ −margin), d = m_variant − m_base. A small first p
    says the variant is as good within the margin (non-inferior); a small second p says it is worse by more than
    the margin. (None, None) with fewer than 2 seeds a side or no spread, as `Welch`."""
    w = welch(base, variant)
    if w.interval is None:
        return None, None
    shifted = [a + margin for a in _points(w.variant)]
    with _quiet():
        above = stats.ttest_ind(shifted, _points(w.base), equal_var=False, alternative="greater")
        below = stats.ttest_ind(shifted, _points(w.base), equal_var=False, alternative="less")
    return float(above.pvalue), float(below.pvalue)
