"""tools/golden.py ignores pandas Styler's random table ids (T_ + 5 hex digits from a fresh uuid4 at every
run), and only them: a changed cell of the same table is still a difference."""

import importlib.util
from pathlib import Path

_SPEC = importlib.util.spec_from_file_location("golden", Path(__file__).parents[1] / "tools" / "golden.py")
golden = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(golden)


def _table(uid: str, cell: str) -> str:
    return (
        f'<style type="text/css">\n#T_{uid}_row0_col1 {{\n  text-align: right;\n}}\n</style>\n'
        f'<table id="T_{uid}">\n  <thead><tr><th id="T_{uid}_level0_col0">model</th></tr></thead>\n'
        f'  <tbody><tr><td id="T_{uid}_row0_col0">{cell}</td></tr></tbody>\n</table>\n'
    )


def _snap(*shown):
    return {
        "matplotlib": "3.9",
        "chapters": {"05": {"glued": {}, "glued_figures": {}, "shown": list(shown), "figures": []}},
    }


def test_two_runs_of_one_table_are_the_same():
    import pandas as pd

    frame = pd.DataFrame({"model": ["vit"], "acc": ["50.6%"]})
    first, second = (frame.style.hide(axis="index").to_html() for _ in range(2))
    assert first != second  # a fresh uuid each time: what the check has to see through
    assert golden.differences(_snap(first), _snap(second)) == []
    assert golden.differences(_snap(_table("e463d", "ViT")), _snap(_table("cd04c", "ViT"))) == []


def test_a_changed_cell_or_text_is_still_a_difference():
    diffs = golden.differences(_snap(_table("e463d", "ViT")), _snap(_table("cd04c", "ViT HA")))
    assert len(diffs) == 1 and diffs[0].startswith("/chapters/05/shown[0]")
    # only Styler's ids are ignored: T_ with other letters, or longer, is text
    assert golden.differences(_snap("T_total 3"), _snap("T_total 4")) != []
    assert golden.differences(_snap("id T_abcdef"), _snap("id T_abcdee")) != []
