"""The results API in one place, for callers of ``attnlib.results``: each name lives in the module of its job.

attnlib.store      files: writable folders, JSON / npz written atomically, checksums, the run lock
attnlib.snapshots  what a run saves of its model: attention maps of fixed images, inference wall time
attnlib.runs       run layout, configuration and fingerprint, validation, provenance, run_or_load
attnlib.tables     the one results table (CLI and book), seed statistics, Table 1 and Table 3
"""

from __future__ import annotations

from attnlib.runs import (
    DamagedResult,
    MissingResult,
    ResultExists,
    RunResult,
    Runs,
    inspect_run,
    load_run,
    run_config,
    run_dir,
    run_or_load,
    train_run,
)
from attnlib.snapshots import QUERY_FRACTIONS, attention_summary, inference_wall_time
from attnlib.store import RunLock, RunLocked, check_writable
from attnlib.tables import collect, seed_accuracies, seed_columns, table1, table3, timing_columns

__all__ = [
    "QUERY_FRACTIONS",
    "DamagedResult",
    "MissingResult",
    "ResultExists",
    "RunLock",
    "RunLocked",
    "RunResult",
    "Runs",
    "attention_summary",
    "check_writable",
    "collect",
    "inference_wall_time",
    "inspect_run",
    "load_run",
    "run_config",
    "run_dir",
    "run_or_load",
    "seed_accuracies",
    "seed_columns",
    "table1",
    "table3",
    "timing_columns",
    "train_run",
]
