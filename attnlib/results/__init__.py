"""The results side of attnlib (issue 32): reading saved runs, never training them.

attnlib.results.load      read and check a run folder (status, metrics, provenance, fingerprint); RunResult, Runs
attnlib.results.config    a run's folder and configuration (run_dir, run_config, the fingerprint)
attnlib.results.validate  what a saved result may hold (results are untrusted input)
attnlib.results.store     reading result files safely (no links, bounded), checksums
attnlib.results.tables    the one results table (CLI and book), seed statistics, Table 1 and Table 3

Nothing here imports the trainer (attnlib.train), data loading (attnlib.data) or the lab (attnlib.lab).
The names of the former facade ``attnlib/results.py`` stay importable from here; those of the write side
(run_or_load, train_run, RunLock, the snapshots a run computes) are looked up on first use.
"""

from __future__ import annotations

import importlib

# the former facade's names, with the module each lives in now (imported on first use)
_FACADE = {
    "DamagedResult": "attnlib.results.load",
    "MissingResult": "attnlib.results.load",
    "RunResult": "attnlib.results.load",
    "Runs": "attnlib.results.load",
    "inspect_run": "attnlib.results.load",
    "load_run": "attnlib.results.load",
    "run_config": "attnlib.results.config",
    "run_dir": "attnlib.results.config",
    "collect": "attnlib.results.tables",
    "seed_accuracies": "attnlib.results.tables",
    "seed_columns": "attnlib.results.tables",
    "table1": "attnlib.results.tables",
    "table3": "attnlib.results.tables",
    "timing_columns": "attnlib.results.tables",
    "ResultExists": "attnlib.lab.run",
    "run_or_load": "attnlib.lab.run",
    "train_run": "attnlib.lab.run",
    "RunLock": "attnlib.lab.run",
    "RunLocked": "attnlib.lab.run",
    "check_writable": "attnlib.store",
    "QUERY_FRACTIONS": "attnlib.snapshots",
    "attention_summary": "attnlib.snapshots",
    "inference_wall_time": "attnlib.snapshots",
}

__all__ = sorted(_FACADE)


def __getattr__(name: str):
    if name in _FACADE:
        return getattr(importlib.import_module(_FACADE[name]), name)
    raise AttributeError(f"module 'attnlib.results' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_FACADE))
