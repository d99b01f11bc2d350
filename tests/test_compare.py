"""attnlib.compare: Welch's t-test of two sets of seeds (against closed forms of the t distribution), rank
agreement."""

from __future__ import annotations

import math
import statistics

import pytest
from scipy import stats

from attnlib.analysis import stats as compare


def test_welch_two_seeds_each_matches_the_closed_form_of_two_degrees_of_freedom():
    """n = 2 per side with equal variances: ν = 2 exactly, where the t distribution has a closed form,
    P(T > t) = (1 − t/√(2 + t²)) / 2 and t_{2, 0.975} = 0.95·√(2 / (1 − 0.95²)) = 4.3027."""
    base, variant = [0.50, 0.52], [0.55, 0.57]  # 50, 52 against 55, 57 points: s² = 2 on each side
    d = compare.welch(base, variant)
    assert d.n == (2, 2) and d.points == pytest.approx(5.0)
    assert d.se == pytest.approx(math.sqrt(2 / 2 + 2 / 2))
    t = 5 / math.sqrt(2)
    assert d.t == pytest.approx(t) and d.df == pytest.approx(2.0)
    assert d.p == pytest.approx(1 - t / math.sqrt(2 + t**2))  # 0.0715
    q = 0.95 * math.sqrt(2 / (1 - 0.95**2))
    low, high = d.interval
    assert low == pytest.approx(5 - q * math.sqrt(2)) and high == pytest.approx(5 + q * math.sqrt(2))
    assert low < 0 < high and d.verdict == "inconclusive"  # p = 0.07: 5 points on 2 seeds is not enough
    assert d.seeds_wanted == compare.MIN_SEEDS


def test_welch_three_seeds_each_four_degrees_of_freedom_is_conclusive():
    """ν = 4: F(t) = 1/2 + (3/8)·u·(1 − u²/12) with u = t/√(1 + t²/4), and t_{4, 0.975} = 2.776445."""
    base, variant = [0.50, 0.51, 0.52], [0.60, 0.61, 0.62]  # s² = 1 point² on each side
    d = compare.welch(base, variant)
    se = math.sqrt(1 / 3 + 1 / 3)
    assert d.df == pytest.approx(4.0) and d.t == pytest.approx(10 / se)
    u = d.t / math.sqrt(1 + d.t**2 / 4)
    assert d.p == pytest.approx(2 * (0.5 - 3 / 8 * u * (1 - u**2 / 12)), rel=1e-6)
    assert d.interval == pytest.approx((10 - 2.776445 * se, 10 + 2.776445 * se), rel=1e-6)
    assert d.verdict == "higher" and d.seeds_wanted == 0
    assert d.difference == "+10.0 [+7.7, +12.3]"  # as tables and the ledger print it
    flipped = compare.welch(variant, base)
    assert flipped.verdict == "lower" and flipped.points == pytest.approx(-10)
    assert flipped.p == pytest.approx(d.p)


def test_welch_satterthwaite_degrees_of_freedom_for_unequal_sizes_and_variances():
    """base 40, 44 (s² = 8, n = 2); variant 50, 52, 54, 56 (s² = 20/3, n = 4):
    se² = 8/2 + (20/3)/4 = 17/3, ν = (17/3)² / (4²/1 + (5/3)²/3)."""
    d = compare.welch([0.40, 0.44], [0.50, 0.52, 0.54, 0.56])
    assert d.points == pytest.approx(11.0) and d.se == pytest.approx(math.sqrt(17 / 3))
    assert d.df == pytest.approx((17 / 3) ** 2 / (16 + 25 / 27))
    # and scipy's own Welch test (ttest_ind with equal_var=False), variant first: d = variant − base
    ref = stats.ttest_ind([50, 52, 54, 56], [40, 44], equal_var=False)
    assert d.t == pytest.approx(ref.statistic) and d.p == pytest.approx(ref.pvalue)
    ci = ref.confidence_interval(0.95)
    assert d.interval == pytest.approx((ci.low, ci.high))


@pytest.mark.parametrize(
    "base, variant, p",
    [  # the saved budget runs of issue 16 (seeds 0 and 1 each), p recomputed there independently
        ([0.4784, 0.4795], [0.4898, 0.4963], 0.14),  # learned-2D + content, 9 heads
        ([0.4350, 0.4324], [0.4455, 0.4531], 0.12),  # ViT
        ([0.4590, 0.4285], [0.4133, 0.4036], 0.24),  # learned-2D + content, 16 heads
    ],
)
def test_welch_p_values_of_the_issue(base, variant, p):
    d = compare.welch(base, variant)
    assert round(d.p, 2) == p and d.verdict == "inconclusive"
    assert 1 <= d.df < 1.3  # about one degree of freedom


def test_welch_without_an_interval():
    one = compare.welch([0.50], [0.60, 0.61])
    assert one.points == pytest.approx(10.5) and one.n == (1, 2)
    assert one.se is one.t is one.df is one.p is one.interval is None
    assert one.verdict == "no interval" and one.seeds_wanted == compare.MIN_SEEDS
    assert one.difference == "+10.5"
    flat = compare.welch([0.5, 0.5, 0.5], [0.6, 0.6, 0.6])  # no spread on either side: no test
    assert flat.interval is None and flat.verdict == "no interval"
    with pytest.raises(ValueError, match="base"):
        compare.welch([], [0.5])
    with pytest.raises(ValueError, match="level"):
        compare.welch([0.5, 0.6], [0.5, 0.7], level=95)


def test_seeds_wanted_follows_the_standard():
    """At least 3 seeds per side; 5 while the difference stays inconclusive after 3."""
    noisy = compare.welch([0.50, 0.56, 0.52], [0.52, 0.55, 0.51])
    assert noisy.verdict == "inconclusive" and noisy.seeds_wanted == compare.MORE_SEEDS
    five = compare.welch([0.50, 0.56, 0.52, 0.53, 0.54], [0.52, 0.55, 0.51, 0.53, 0.54])
    assert five.verdict == "inconclusive" and five.seeds_wanted == 0


def test_seeds_wanted_in_a_family_follows_the_adjusted_verdict():
    """A pair whose own interval excludes 0 but whose Holm-adjusted p does not pass asks for MORE_SEEDS;
    the clear pair beside it asks for none, and a pair without seeds on a side for MIN_SEEDS."""
    tested = compare.family(
        {
            "clear": ([0.50, 0.51, 0.50], [0.60, 0.61, 0.60]),
            "borderline": ([0.50, 0.52, 0.51], [0.53, 0.55, 0.535]),
            "noise": ([0.50, 0.56, 0.52], [0.52, 0.55, 0.51]),
            "untrained": ([0.50], []),
        }
    )
    assert compare.welch([0.50, 0.52, 0.51], [0.53, 0.55, 0.535]).seeds_wanted == 0
    assert tested["borderline"].adjusted_p >= 0.05 and tested["borderline"].verdict == "inconclusive"
    assert [tested[k].seeds_wanted for k in ("clear", "borderline", "noise", "untrained")] == [
        0,
        compare.MORE_SEEDS,
        compare.MORE_SEEDS,
        compare.MIN_SEEDS,
    ]


def test_mean_sd():
    assert compare.mean_sd([0.5]) == "50.0 %"
    assert compare.mean_sd([0.5, 0.6]) == f"55.0 ± {statistics.stdev([50, 60]):.1f} %"


def test_concordance_counts_same_order_reversals_and_ties():
    ours = {"a": 0.9, "b": 0.8, "c": 0.7, "only_ours": 0.1}
    theirs = {"a": 0.95, "b": 0.96, "c": 0.5, "only_theirs": 0.2}
    same, total, flipped = compare.concordance(ours, theirs)
    assert total == 3 and same == 2 and flipped == [("b", "a")]
    same, total, flipped = compare.concordance({"a": 1, "b": 2}, {"a": 3, "b": 3})
    assert (same, total, flipped) == (0, 1, [])  # a tie in theirs is neither


def test_holm_matches_a_worked_example():
    """m = 4, p = 0.01, 0.04, 0.03, 0.005: sorted 0.005, 0.01, 0.03, 0.04 times 4, 3, 2, 1 gives 0.02, 0.03,
    0.06, 0.04, and the step-down maximum lifts the last to 0.06 (R: p.adjust(p, "holm") = 0.03 0.06 0.06
    0.02). The adjusted values come back in the order given."""
    assert compare.holm([0.01, 0.04, 0.03, 0.005]) == pytest.approx([0.03, 0.06, 0.06, 0.02])
    assert compare.holm([0.3, 0.4]) == pytest.approx([0.6, 0.6])  # 2·0.3, then max(0.6, 1·0.4)
    assert compare.holm([0.6, 0.9]) == pytest.approx([1.0, 1.0])  # capped at 1
    assert compare.holm([0.02, None, 0.04]) == pytest.approx([0.04, None, 0.04])  # None: not in the family
    assert compare.holm([0.02]) == [0.02]  # one test: no adjustment


def test_family_verdict_needs_the_adjusted_p():
    """Three seeds each, 1.2 points apart with 0.5 points of spread: alone the interval excludes 0 ("lower"),
    but in a family of five whose other p-values are large the Holm-adjusted p is 5·p > 0.05."""
    w = compare.welch([0.600, 0.605, 0.610], [0.588, 0.593, 0.598])
    assert w.verdict == "lower" and 0.01 < w.p < 0.05
    adjusted = compare.holm([w.p, 0.5, 0.6, 0.7, 0.8])[0]
    assert adjusted == pytest.approx(5 * w.p)
    assert compare.family_verdict(w, adjusted) == "inconclusive"
    assert compare.family_verdict(w, w.p) == "lower"  # a family of one: the Welch verdict
    assert compare.family_verdict(compare.welch([0.5], [0.6]), None) == "no interval"


def test_paired_by_seed_matches_scipy_and_uses_only_shared_seeds():
    base = {0: 0.50, 1: 0.53, 2: 0.49, 3: 0.60}
    variant = {0: 0.52, 1: 0.54, 2: 0.52, 4: 0.70}  # seed 3 and 4 have no partner
    t = compare.paired(base, variant)
    assert t.seeds == (0, 1, 2) and t.differences == pytest.approx((2.0, 1.0, 3.0))
    ref = stats.ttest_rel([52, 54, 52], [50, 53, 49])
    assert t.points == pytest.approx(2.0) and t.t == pytest.approx(ref.statistic)
    assert t.p == pytest.approx(ref.pvalue)
    one = compare.paired({0: 0.5}, {0: 0.6, 1: 0.7})
    assert one.n == 1 and one.p is None and one.points == pytest.approx(10.0)
