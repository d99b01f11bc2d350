"""attnlib.compare: the difference of two sets of seeds against its standard error, and rank agreement."""

from __future__ import annotations

import math
import statistics

import pytest

from attnlib import compare


def test_difference_and_standard_error_match_their_formulas():
    base, variant = [0.50, 0.52, 0.51], [0.55, 0.56, 0.54]
    d = compare.difference(base, variant)
    assert d.points == pytest.approx((statistics.mean(variant) - statistics.mean(base)) * 100)
    se = math.sqrt(statistics.variance(base) / 3 + statistics.variance(variant) / 3) * 100
    assert d.se == pytest.approx(se)
    assert d.verdict == "higher"  # 4 points against 2·SE ≈ 1.6
    assert compare.difference(variant, base).verdict == "lower"


def test_verdicts_within_noise_and_one_seed():
    assert compare.difference([0.50, 0.56], [0.52, 0.55]).verdict == "within noise"
    one = compare.difference([0.50], [0.60, 0.61])
    assert one.se is None and one.verdict == "one seed" and one.points == pytest.approx(10.5)
    with pytest.raises(ValueError, match="base"):
        compare.difference([], [0.5])


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
