"""Saved benchmark reports read back: a report of ``python -m attnlib bench`` (`attnlib.lab.bench`,
``results/bench/<device>.json``) as tables, one row per measurement (`table`) and the share of each op category
in its profiled steps (`profile_table`); the lab prints them, the book's appendix shows them. Imports no
benchmark harness and no torch.
"""

from __future__ import annotations


def table(report: dict):
    """The report's rows as a pandas DataFrame (one row per shapes x model x dtype x impl)."""
    import pandas as pd

    cols = [
        "shapes", "model", "dtype", "impl", "batch", "layers_timed", "images_per_s", "speedup_vs_plain",
        "infer_images_per_s", "infer_speedup_vs_plain", "peak_mem_mb", "gflop_per_image",
        "achieved_gflops", "utilisation", "model_utilisation",
    ]  # fmt: skip
    df = pd.DataFrame(report["rows"])
    return df[[c for c in cols if c in df.columns]]


def profile_table(report: dict):
    """Share of the profiled step's op time per category, one row per measurement (None if not profiled)."""
    import pandas as pd

    rows = [
        {**{k: r[k] for k in ("shapes", "model", "dtype", "impl")}, "total_ms": r["profile"]["total_ms"],
         **r["profile"]["category_share"]}
        for r in report["rows"] if "profile" in r
    ]  # fmt: skip
    return pd.DataFrame(rows).fillna(0.0) if rows else None
