"""Reading a saved run, never training it (issue 32): the loader of the results side. Imports no trainer
(attnlib.train), no data loading (attnlib.data) and nothing of the lab (attnlib.lab).

A run folder read is "complete", "missing" (not trained), "damaged" (unreadable, inconsistent or not matching
its checksums: `attnlib.results.validate`) or "stale" (a complete result of another configuration), with one
line saying what is wrong; `read` raises only ConfigError (bad experiment, preset, seed or data spec). Each
file is read and hashed once and parsed from the bytes checked (about 8 ms a run: the ledger's 83 saved runs
in 0.7 s, so nothing is cached). The write side (`run_or_load`, `train_run`, `trained_model`) is
`attnlib.lab.run`.

Layout of one run (seed 0; other seeds use `<preset>-seed<N>`):

    <results-dir>/<experiment>/<preset>/
        config.json      the resolved RunConfig, seed, data and fingerprint, and model_resolved (every field of
                         the model's config dataclass; not in the fingerprint: `run_config`)
        metrics.json     test_accuracy (fraction), params, wall_time_ms (Table 3 protocol), provenance (its
                         `git`: the commit the training process started from; `git_at_write` too when the
                         tree changed before the result was written), and the sha256 of every other result
                         file; written last: it marks completion
        history.csv      one row per epoch
        attention.npz    attention maps of fixed test images (`attnlib.measures.attention_summary`)
        probe.npz        the standard attention probe: per layer and head, distance, peak and image
                         dependence on the first test images, at initialisation and at the end, beside
                         uniform attention (`attnlib.measures.probe_file`); results saved before it existed
                         (2026-12-02) lack it and stay complete (`backfill_probe` adds it from checkpoints)
        centers.npz      quadratic models: centres and Σ⁻¹ of every head after every epoch
        checkpoints/     last.pt / previous.pt (not in git), used to resume; last.pt kept after training: the
                         trained weights (`attnlib.lab.run.trained_model`)
        run.lock         while a run is training (pid and host; `attnlib.lab.lock.RunLock`)

Every file is written atomically (`attnlib.util`), so a reader sees the old file or the new one, never a part.
"""

from __future__ import annotations

import io
import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from attnlib.results.config import config_difference, run_config, run_dir
from attnlib.results.store import read_json, read_npz
from attnlib.results.validate import PROBE_FILE, files_problem, history_problem, metrics_problem


class MissingResult(LookupError):
    """No complete result with this configuration (or no checkpoint to rebuild its model from:
    `attnlib.lab.run.trained_model`), and training was not allowed.

    `status` is what `inspect_run` found ("missing", "damaged" or "stale") and `detail` says why."""

    def __init__(self, message: str, status: str = "missing", detail: str | None = None):
        super().__init__(message)
        self.status = status
        self.detail = message if detail is None else detail


class DamagedResult(MissingResult):
    """A result folder whose metrics.json (or a file it vouches for, or the checkpoint of its trained model)
    is unreadable or inconsistent (raised with status "damaged")."""


@dataclass
class RunResult:
    """A complete result: metrics (dict), history (DataFrame, one row per epoch), attention (npz arrays),
    centers (npz arrays or None), config (dict), probe (probe.npz's arrays, or None for a result saved
    before runs saved it). `trained` says whether this call trained it."""

    experiment: str
    preset: str
    path: Path
    config: dict
    metrics: dict
    history: object  # pandas.DataFrame
    attention: dict[str, np.ndarray]
    centers: dict[str, np.ndarray] | None
    trained: bool = False
    probe: dict[str, np.ndarray] | None = None

    @property
    def test_accuracy(self) -> float:
        return self.metrics["test_accuracy"]


class Runs(dict):
    """Several results: ``{experiment: RunResult or None}``, plus ``status``: ``{experiment: (status,
    detail)}`` (see the module) with what is wrong (``inspect_run``). What ``read_runs`` and the book's
    ``load_all`` return, and what ``attnlib.results.tables.frame`` tabulates."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.status: dict[str, tuple[str, str]] = {}


def inspect_run(path: str | Path, *, expected: dict | None = None) -> tuple[str, str]:
    """(status, detail): "complete", "missing", "damaged" or "stale" (with `expected`, the full `run_config`:
    a complete result of another configuration, its fingerprint not `expected["fingerprint"]`, the detail
    naming the settings that differ; a result whose config.json records another resolved model
    (`model_resolved`: a model default changed since) is stale too; one saved before config.json recorded
    it cannot be checked so)."""
    status, detail, _ = _read(Path(path), None, expected)
    return status, detail


def load_run(path: str | Path, fingerprint: str | None = None) -> RunResult:
    """Read a complete result folder; DamagedResult / MissingResult otherwise (a checksummed file that does
    not parse too: its checksum may have been forged with it). The lab's reader of a folder it just wrote;
    `read` is the reader of saved runs."""
    status, detail, run = _read(Path(path), fingerprint, None)
    if run is None:
        raise (DamagedResult if status == "damaged" else MissingResult)(detail, status)
    return run


def _read(path: Path, fingerprint: str | None, expected: dict | None) -> tuple[str, str, RunResult | None]:
    """(status, detail, the `RunResult` when complete) of the folder `path`: each file read, checked and
    hashed once, and the result parsed from the very bytes checked (a checksummed file that does not parse:
    damaged, its checksum may have been forged with it). Stale when its fingerprint is not `fingerprint`
    (or `expected["fingerprint"]`)."""
    import pandas as pd

    if expected is not None:
        fingerprint = expected["fingerprint"]
    metrics_path = path / "metrics.json"
    if not metrics_path.exists():
        return "missing", f"no {metrics_path}", None
    blobs: dict[str, bytes] = {}
    try:
        metrics = read_json(metrics_path)  # bounded, a regular file, not nested deeper than a result
        wrong = metrics_problem(metrics)
        if wrong:
            return "damaged", f"{metrics_path}: {wrong}", None
        # "files": plain files of this folder covering the result, checksums; metrics = history's last row
        wrong = files_problem(path, metrics["files"], blobs) or history_problem(
            path, metrics, blobs["history.csv"]
        )
        if wrong:
            return "damaged", wrong, None
    except OSError as err:  # a file named in "files" is a link, a FIFO, a device, too large, unreadable
        return "damaged", f"{err.filename or metrics_path} is unreadable ({err.strerror or err})", None
    except (ValueError, TypeError, AttributeError, OverflowError) as err:  # OverflowError: a backstop
        return "damaged", f"{metrics_path} is unreadable ({type(err).__name__}: {err})", None
    config = json.loads(blobs["config.json"])  # checked: an object naming its experiment (files_problem)
    if fingerprint is not None and metrics["fingerprint"] != fingerprint:
        detail = f"{path} holds a result for another configuration" + config_difference(config, expected)
        return "stale", detail, None
    # same fingerprint: has a model default changed? (a run saved before config.json recorded the resolved
    # model cannot be checked: it stays complete)
    changed = config_difference(config, expected)
    if changed:
        detail = f"{path} holds a result for another configuration{changed[:-1]}"
        return "stale", detail + ": a model default changed since it was trained)", None

    def arrays(name: str) -> dict[str, np.ndarray] | None:
        if name not in blobs:
            return None
        return read_npz(blobs[name])  # each member's size checked before it is read

    try:
        run = RunResult(
            config["experiment"],
            config["preset"],
            path,
            config,
            metrics,
            pd.read_csv(io.BytesIO(blobs["history.csv"])),
            arrays("attention.npz"),
            arrays("centers.npz"),
            probe=arrays(PROBE_FILE),
        )
    except Exception as err:  # noqa: BLE001 -- whatever a forged file breaks in a reader: damaged
        detail = f"{path} holds a result file that does not parse ({type(err).__name__}: {err})"
        return "damaged", " ".join(detail.split()), None
    return "complete", "", run


# ------------------------------------------------------------------------------------- reading saved runs
@dataclass(frozen=True)
class Saved:
    """What `read` found of one run: its `status` (complete, missing, damaged or stale: see the module) and
    `detail` (what is wrong, '' when complete), `run` (the `RunResult` when complete, else None: its metrics,
    history, ...), where it is (`path`) and the `fingerprint` the registry gives that run today."""

    experiment: str
    preset: str
    seed: int
    path: Path
    fingerprint: str
    status: str
    detail: str = ""
    run: RunResult | None = None

    @property
    def complete(self) -> bool:
        return self.status == "complete"


def read(
    experiment: str,
    preset: str = "paper",
    *,
    seed: int = 0,
    results_dir: str | Path = "results",
    data=None,
    epochs: int | None = None,
) -> Saved:
    """The saved run of `experiment` at `preset` and `seed` in `results_dir`, read and checked, never
    trained: a `Saved` whose status says whether it is complete for the configuration the registry gives it
    today (`run_config` with `data` and `epochs`, as `run_or_load` would train it), not trained, damaged or
    of another configuration. Raises only ConfigError (an unknown experiment or preset, a bad seed or data
    spec); a bad result folder is a status, never an exception.

    Cheap: no device is validated, every file is read and hashed once and parsed from the bytes checked."""
    expected = run_config(experiment, preset, seed=seed, data=data, epochs=epochs)
    path = run_dir(results_dir, experiment, preset, seed)
    status, detail, run = _read(path, None, expected)
    return Saved(experiment, preset, seed, path, expected["fingerprint"], status, detail, run)


def read_runs(
    names, preset: str = "paper", *, seed: int = 0, results_dir: str | Path = "results", data=None
) -> Runs:
    """`Runs` ({name: RunResult or None}, with `status` {name: (status, detail)}) of `read` for `names`."""
    runs = Runs()
    for name in names:
        saved = read(name, preset, seed=seed, results_dir=results_dir, data=data)
        runs[name], runs.status[name] = saved.run, (saved.status, saved.detail)
    return runs


def read_seeds(
    experiment: str, preset: str = "paper", *, results_dir: str | Path = "results", data=None, seeds=None
) -> dict[int, Saved]:
    """{seed: `read` of that seed} for every seed of `experiment` at `preset` with a folder (`<preset>/` is
    seed 0, always read: its status says whether it was trained; `<preset>-seed<N>/` seed N), in order, or
    for those of `seeds`."""
    found = {0}
    for path in (Path(results_dir) / experiment).glob(f"{preset}-seed*"):
        tail = path.name[len(f"{preset}-seed") :]
        if tail.isdigit() and int(tail) > 0:
            found.add(int(tail))
    found = sorted(s for s in found if seeds is None or s in set(seeds))
    return {s: read(experiment, preset, seed=s, results_dir=results_dir, data=data) for s in found}
