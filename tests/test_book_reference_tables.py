"""The appendix's reference tables laid out to fit the text column (no table scrolls sideways): protocols and
model configs one row per field and one column per protocol or model, at most ``REFERENCE_COLUMNS`` side by
side; the speed benchmark in a throughput table, a memory and FLOPs table, the batch and layers timed of
each shapes, and the profile with attnlib and the plain formulation side by side. Every value of the
registry's tables and of the benchmark report is found in its cell."""

from __future__ import annotations

import math

import pytest

import attnbook as book
from attnbook.benchmarks import profile_layout, throughput_tables
from attnbook.phrases import MISSING
from attnbook.reference import (
    REFERENCE_COLUMNS,
    breakable,
    model_table,
    model_tables,
    pack_groups,
    protocol_tables,
    training_table,
)
from attnbook.tables import group
from attnlib import experiments
from attnlib.results import bench


def _plain(name: str) -> str:
    """A header or cell as the code id it stands for: breaks removed, a display name read back."""
    from attnlib.experiments import EXPERIMENTS

    name = name.replace("<wbr>", "")
    return {e.title: n for n, e in EXPERIMENTS.items()}.get(name, name)


def test_pack_groups_keeps_groups_whole_unless_too_big():
    assert pack_groups({"a": [1, 2, 3], "b": [4, 5], "c": [6]}, most=4) == [
        (["a"], [1, 2, 3]),
        (["b", "c"], [4, 5, 6]),
    ]
    assert pack_groups({"a": [1, 2, 3, 4, 5], "b": [6]}, most=2) == [
        (["a"], [1, 2]),
        (["a"], [3, 4]),
        (["a", "b"], [5, 6]),
    ]
    assert breakable("learned_content_9h") == "learned_<wbr>content_<wbr>9h"


@pytest.mark.parametrize("preset", ["budget", "paper"])
def test_protocol_tables_keep_every_setting(preset):
    full = training_table(preset)
    settings, reasons = protocol_tables(preset)
    seen = []
    for families, table in settings:
        protocols = [_plain(c) for c in table.columns[1:]]
        assert table.columns[0] == "setting" and 1 <= len(protocols) <= REFERENCE_COLUMNS
        assert families and set(families) <= {e.family for e in experiments.EXPERIMENTS.values()}
        shown = table.set_index("setting")
        assert list(shown.index) == [c for c in full.columns if c not in ("experiments", "why")]
        for column, protocol in zip(table.columns[1:], protocols, strict=True):
            for setting in shown.index:
                assert shown.loc[setting, column] == str(full.loc[protocol, setting])
        seen += protocols
    assert seen == list(full.index)  # each protocol once, in the registry's order
    assert reasons.columns.tolist() == ["protocol", "experiments", "why", "history"]
    shown = reasons.set_index("protocol")
    assert shown["experiments"].equals(full["experiments"])
    for protocol, row in shown.iterrows():  # the one-line reason, its dated history apart (issue 49): nothing lost
        why, history = full.loc[protocol, "why"], experiments.history(preset, protocol)
        assert row["history"] == history and why.startswith(row["why"].removesuffix("; the history below says why."))
        assert not history or (history in why and history not in row["why"])


@pytest.mark.parametrize("family", ["paper", "resnet", "san", "san_hier", "vit"])
def test_model_tables_keep_every_field(family):
    full = model_table("budget", family)
    shared, chunks = model_tables("budget", family)
    by_title = {book.title(n): n for n in full.index}  # the headers are display names, never code ids
    cell = lambda v: "—" if v is None or v != v else str(v)  # noqa: E731  a field a model lacks: "—", never "nan"
    common = {} if shared is None else dict(zip(shared["field"], shared["every model"], strict=True))
    for field, value in common.items():  # a shared field: one value, the same in every model of the family
        assert {cell(v) for v in full[field]} == {value}
    seen = []
    for groups, table in chunks:
        names = [by_title[c] for c in table.columns[1:]]
        assert 1 <= len(names) <= REFERENCE_COLUMNS
        assert {group(n) for n in names} == set(groups)
        shown = table.set_index("field")
        assert list(shown.index) == [f for f in full.columns if f not in common]  # every field, once
        for column, name in zip(table.columns[1:], names, strict=True):
            assert [shown.loc[f, column] for f in shown.index] == [cell(full.loc[name, f]) for f in shown.index]
        seen += names
    assert seen == list(full.index)
    assert family != "paper" or len(common) >= 5  # the paper models share most of their fields
    if (
        family == "paper"
    ):  # fifteen models: the five quadratic ones, the four learned and the six with content, each family in
        # tables of at most four columns
        assert [g for g, _ in chunks] == [
            ["SA quadratic"],
            ["SA quadratic"],
            ["SA learned 2D"],
            ["SA learned 2D + content"],
            ["SA learned 2D + content"],
        ]


def _report(batches=(100, 100)):
    rows = []
    for shapes, batch, layers in (("paper", batches[0], 1), ("budget", batches[1], 4)):
        for model in ("learned_content_9h", "quadratic_iso_9h"):
            for dtype in ("fp32", "bf16"):
                for impl in ("attnlib", "plain"):
                    k = len(rows) + 1
                    row = dict(
                        shapes=shapes, model=model, dtype=dtype, impl=impl, batch=batch, layers_timed=layers,
                        images_per_s=10.0 * k + 0.1234, infer_images_per_s=30.0 * k, peak_mem_mb=100.5 + k,
                        gflop_per_image=0.25 * k, achieved_gflops=5.0 * k, utilisation=0.01 * k,
                        model_utilisation=0.011 * k,
                        profile=dict(total_ms=1000.0 + k, category_share=dict(gemm=0.8, softmax=0.001 * k)),
                    )  # fmt: skip
                    if impl == "attnlib":
                        row["speedup_vs_plain"] = row["infer_speedup_vs_plain"] = 1.0 + 0.01 * k
                    rows.append(row)
    return dict(rows=rows)


def test_bench_tables_keep_every_figure():
    report = _report()
    rows = bench.table(report)
    main, more, setup = throughput_tables(report)
    assert main.columns.tolist() == list(book.benchmarks.THROUGHPUT_SHOWN.values())
    assert [c for _, c in more.columns] == [
        "shapes", "model", "dtype", "impl", "peak memory (MB)", "GFLOP per image", "achieved GFLOP/s",
        "model utilisation",
    ]  # fmt: skip
    assert setup.values.tolist() == [["paper", "100", "1"], ["budget", "100", "4"]]
    headers = {**book.benchmarks.THROUGHPUT_SHOWN, **book.benchmarks.THROUGHPUT_MORE}
    for i, r in rows.iterrows():
        for column, header in headers.items():
            cell = (main if header in main.columns else more).loc[i, header]
            if column in ("shapes", "model"):  # written on the first row of each block
                assert _plain(cell) in (r[column], "")
            elif column in ("dtype", "impl"):
                assert cell == r[column]
            elif math.isnan(r[column]):
                assert cell == "—"  # the plain formulation's speed-up over itself
            else:
                assert float(cell) == pytest.approx(r[column], abs=5e-4)
    blocks = main[("", "model")].map(_plain).replace("", None).ffill()
    assert blocks.tolist() == rows["model"].tolist()
    profile = profile_layout(report)
    assert [c for c in profile.columns[3:]] == [
        ("fp32", "attnlib"), ("fp32", "plain"), ("bf16", "attnlib"), ("bf16", "plain"),
    ]  # fmt: skip
    assert profile[("", "op")].tolist() == ["op time (ms)", "gemm", "softmax"] * 4
    for k, r in enumerate(report["rows"], 1):
        block = profile.iloc[3 * ((k - 1) // 4) : 3 * ((k - 1) // 4) + 3]
        assert _plain(block.iloc[0, 1]) == r["model"] and block.iloc[0, 0] == r["shapes"]
        column = block[(r["dtype"], r["impl"])].tolist()
        assert column == [f"{1000.0 + k:.3f}", "0.800", f"{0.001 * k:.3f}"]
    unprofiled = [{k: v for k, v in r.items() if k != "profile"} for r in report["rows"]]
    assert profile_layout(dict(rows=unprofiled)) is None


def test_bench_setup_stays_in_the_rows_where_it_varies_within_a_shapes():
    report = _report()
    report["rows"][1]["batch"] = 50  # one measurement of the paper shapes at another batch
    _, more, setup = throughput_tables(report)
    assert setup is None
    assert more[("", "batch")].tolist()[:2] == ["100", "50"] and ("", "layers_timed") in more.columns


def test_show_table_sets_numbers_right_and_writes_no_nan(monkeypatch):
    """Issue 31: a missing value reads "—" (never "nan"), a float two decimals (never "0.620000"), and the
    columns of numbers (formatted or not, with their marks) are right-aligned with their headers."""
    import IPython.display
    import pandas as pd

    shown = []
    monkeypatch.setattr(IPython.display, "display", lambda obj: shown.append(obj.data))
    frame = pd.DataFrame(
        {
            "model": ["SAN pairwise", "ViT, HA"],
            "size (MiB)": [0.62, 5.62],
            "trainable parameters": ["161,372", MISSING],
            "field": [float("nan"), "learned"],
        }
    )
    assert book.display.number_columns(frame) == ["size (MiB)", "trainable parameters"]
    book.show_table(frame, caption="T")
    page = shown[0]
    assert ">0.62<" in page and "0.620000" not in page and ">nan<" not in page and ">—<" in page
    style = page.split("</style>")[0]  # two columns right-aligned: their cells and their headers
    assert all(f in style for f in ("level0.col1", "level0.col2", "_row0_col1", "_row1_col2")), style
    assert "col0" not in style and "col3" not in style and "text-align: right" in style
    # issue 49: a number never breaks across lines, whatever the table's class; a word cell may
    nowrap = [rule for rule in style.split("}") if "nowrap" in rule]
    assert any("_row0_col2" in rule for rule in nowrap) and not any("_row1_col2" in rule for rule in nowrap)
