"""attnlib.analysis.stats delegates Welch's and the paired t-test to scipy.stats (issue 32): the numbers equal
the textbook formulas written out here in float64 (Welch–Satterthwaite ν, the t quantile's interval), and the
cases without a spread stay None."""

from __future__ import annotations

import math
import statistics

import numpy as np
import pytest
from scipy import stats as sp

from attnlib.analysis import stats


def _welch_by_hand(a, b, level=0.95):
    a, b = [x * 100 for x in a], [x * 100 for x in b]
    va, vb, na, nb = statistics.variance(a), statistics.variance(b), len(a), len(b)
    d = statistics.mean(b) - statistics.mean(a)
    se = math.sqrt(va / na + vb / nb)
    df = se**4 / ((va / na) ** 2 / (na - 1) + (vb / nb) ** 2 / (nb - 1))
    t = d / se
    half = sp.t.ppf((1 + level) / 2, df) * se
    return se, t, df, 2 * sp.t.sf(abs(t), df), (d - half, d + half)


@pytest.mark.parametrize("seed", range(20))
def test_welch_equals_the_formulas(seed):
    rng = np.random.default_rng(seed)
    na, nb = rng.integers(2, 7, 2)
    a, b = rng.uniform(0.3, 0.6, na).round(4), rng.uniform(0.3, 0.6, nb).round(4)
    w = stats.welch(a, b)
    se, t, df, p, (low, high) = _welch_by_hand(a, b)
    assert w.se == pytest.approx(se, rel=1e-12) and w.t == pytest.approx(t, rel=1e-9)
    assert w.df == pytest.approx(df, rel=1e-12) and w.p == pytest.approx(p, rel=1e-9, abs=1e-15)
    assert w.interval == pytest.approx((low, high), rel=1e-12, abs=1e-12)


@pytest.mark.parametrize("seed", range(10))
def test_paired_equals_the_formulas(seed):
    rng = np.random.default_rng(100 + seed)
    n = int(rng.integers(2, 7))
    a, b = (
        dict(enumerate(rng.uniform(0.3, 0.6, n).round(4))),
        dict(enumerate(rng.uniform(0.3, 0.6, n).round(4))),
    )
    d = [(b[s] - a[s]) * 100 for s in range(n)]
    se = statistics.stdev(d) / math.sqrt(n)
    t = statistics.mean(d) / se
    p = stats.paired(a, b)
    assert p.se == pytest.approx(se, rel=1e-12) and p.t == pytest.approx(t, rel=1e-9)
    assert p.p == pytest.approx(2 * sp.t.sf(abs(t), n - 1), rel=1e-9, abs=1e-15)


def test_no_spread_gives_no_test():
    assert stats.welch([0.5], [0.4, 0.6]).p is None  # one seed on a side
    flat = stats.welch([0.5, 0.5], [0.6, 0.6])  # no spread on either side
    assert (flat.se, flat.t, flat.df, flat.p, flat.interval, flat.verdict) == (None,) * 5 + ("no interval",)
    same = stats.paired({0: 0.4, 1: 0.5}, {0: 0.5, 1: 0.6})  # the same difference on every seed
    assert (same.se, same.t, same.p) == (None, None, None) and same.points == pytest.approx(10.0)


def test_family_adjusts_over_the_pairs_with_seeds_on_both_sides():
    """`family`: Welch per pair, Holm over the pairs with a p (a worked two-test adjustment: the smaller p
    doubled, the larger kept unless below it), the verdict follows the adjusted p, a pair missing a side is
    (None, None, "no interval", None), and seed maps (not lists) add the paired test."""
    a, b = {0: 0.50, 1: 0.52, 2: 0.51}, {0: 0.55, 1: 0.58, 2: 0.56}
    c, d = [0.40, 0.45, 0.41], [0.41, 0.44, 0.43]
    got = stats.family({"ab": (a, b), "cd": (c, d), "none": ([0.5], [])})
    p_ab, p_cd = stats.welch(a.values(), b.values()).p, stats.welch(c, d).p
    assert p_ab < p_cd
    assert got["ab"].adjusted_p == pytest.approx(min(1.0, 2 * p_ab))
    assert got["cd"].adjusted_p == pytest.approx(max(2 * p_ab, p_cd))
    assert got["ab"].verdict == ("higher" if 2 * p_ab < 0.05 else "inconclusive")
    assert got["ab"].paired.seeds == (0, 1, 2) and got["cd"].paired is None
    assert got["none"] == (None, None, "no interval", None)


def test_p_values_never_print_as_zero():
    assert stats.p_text(0.0474) == "0.047" and stats.p_text(0.0004) == "< 0.001"
    assert stats.p_text(0.0005) == "0.001" and stats.p_text(0.004, 2) == "< 0.01"
    assert stats.p_text(1.0) == "1.000"


def test_noninferiority_is_welch_one_sided_against_the_margin():
    base, variant = [0.405, 0.41, 0.415], [0.399, 0.40, 0.401]
    above, below = stats.noninferiority(base, variant, 2.0)
    want = sp.ttest_ind([v * 100 + 2 for v in variant], [b * 100 for b in base], equal_var=False,
                         alternative="greater")  # fmt: skip
    assert above == pytest.approx(want.pvalue) and above + below == pytest.approx(1.0)
    assert above < 0.05  # −1 point, tight: within the margin
    assert stats.noninferiority(base, [0.379, 0.38, 0.381], 2.0)[1] < 0.05  # −3: worse than the margin
    assert stats.noninferiority([0.4], variant, 2.0) == (None, None)  # one seed: no test
