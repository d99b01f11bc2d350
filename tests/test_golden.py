"""tools/golden.py: the book's golden snapshot (what `make golden` checks) reports every change, and only changes."""

import importlib.util
from pathlib import Path

import pytest

_SPEC = importlib.util.spec_from_file_location("golden", Path(__file__).parents[1] / "tools" / "golden.py")
golden = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(golden)


def _snap(mpl="3.9", **chapter):
    base = {
        "glued": {"acc": "46.8%"},
        "glued_figures": {"fig-glance": "sha256:0"},
        "shown": ["| a |"],
        "figures": ["sha256:1", "sha256:2"],
    }
    return {"matplotlib": mpl, "chapters": {"02": {**base, **chapter}}, "cli": {"table3": "exit 0\n"}}


def test_identical_snapshots_have_no_differences():
    assert golden.differences(_snap(), _snap()) == []


@pytest.mark.parametrize(
    "change, where",
    [
        (dict(glued={"acc": "46.9%"}), "/chapters/02/glued/acc"),
        (dict(glued={"acc": "46.8%", "new": "x"}), "/chapters/02/glued/new: added"),
        (dict(shown=["| b |"]), "/chapters/02/shown[0]"),
        (dict(shown=["| a |", "| b |"]), "/chapters/02/shown: 1 items, now 2"),
        (dict(figures=["sha256:1", "sha256:3"]), "/chapters/02/figures[1]"),
    ],
)
def test_each_change_is_reported_where_it_is(change, where):
    diffs = golden.differences(_snap(), _snap(**change), figures=True)
    assert len(diffs) == 1 and diffs[0].startswith(where), diffs


def test_figures_by_hash_only_when_asked_and_with_the_same_matplotlib():
    redrawn = dict(figures=["sha256:7", "sha256:8"], glued_figures={"fig-glance": "sha256:9"})
    assert golden.differences(_snap(), _snap(**redrawn)) == []
    assert len(golden.differences(_snap(), _snap(**redrawn), figures=True)) == 3
    assert golden.differences(_snap(), _snap(mpl="3.10", **redrawn), figures=True) == []
    fewer = _snap(figures=["sha256:7"], glued_figures={"fig-other": "sha256:9"})
    assert golden.differences(_snap(), fewer) == [
        "/chapters/02/figures: 2 figures, now 1",
        "/chapters/02/glued_figures/fig-glance: removed",
        "/chapters/02/glued_figures/fig-other: added",
    ]
