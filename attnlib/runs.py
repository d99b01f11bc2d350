"""Runs on disk: where a run's files live, its configuration and fingerprint, the checks that tell a complete
result from a missing, damaged or stale one, its provenance, and `run_or_load` (load it, else train it).

Layout of one run (seed 0; other seeds use `<preset>-seed<N>`):

    <results-dir>/<experiment>/<preset>/
        config.json      the resolved RunConfig, seed, data and fingerprint, and model_resolved (every field of
                         the model's config dataclass; not in the fingerprint: `run_config`)
        metrics.json     test_accuracy (fraction), params, wall_time_ms (Table 3 protocol), provenance (its
                         `git`: the commit the training process started from; `git_at_write` too when the
                         tree changed before the result was written), and the sha256 of every other result
                         file; written last: it marks completion
        history.csv      one row per epoch
        attention.npz    attention maps of fixed test images (`attnlib.snapshots.attention_summary`)
        probe.npz        the standard attention probe: per layer and head, distance, peak and image
                         dependence on the first test images, at initialisation and at the end, beside
                         uniform attention (`attnlib.snapshots.probe_file`); results saved before it existed
                         (2026-12-02) lack it and stay complete (`backfill_probe` adds it from checkpoints)
        centers.npz      quadratic models: centres and Σ⁻¹ of every head after every epoch
        checkpoints/     last.pt / previous.pt (not in git), used to resume
        run.lock         while a run is training (pid and host; `attnlib.store.RunLock`)

Every file is written atomically (`attnlib.store`), so a reader sees the old file or the new one, never a part.
"""

from __future__ import annotations

import functools
import hashlib
import io
import json
import logging
import math
import os
import platform
import re
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from attnlib import experiments
from attnlib.checks import MAX_SEED, SYNTHETIC, check, check_positive_int, is_synthetic, synthetic_sizes
from attnlib.env import RECORD_HOST_ENV, TRAIN_MISSING_ENV
from attnlib.errors import ConfigError
from attnlib.models import FAMILIES, resolved_config, resolved_difference
from attnlib.snapshots import (
    PROBE_FILE,
    attention_probe,
    attention_summary,
    device_name,
    inference_wall_time,
    probe_file,
)
from attnlib.store import (
    RunLock,
    RunLocked,
    check_no_links,
    check_writable,
    read_json,
    read_regular,
    sha256,
    write_json,
    write_npz,
)
from attnlib.util import write_bytes
from attnlib.validate import files_problem, history_problem, values_problem

log = logging.getLogger("attnlib")


RESULT_FILES = ("config.json", "history.csv", "attention.npz")

RESOLVED = "model_resolved"  # config.json: the model's resolved configuration, not in the fingerprint

METRICS_KEYS = ("test_accuracy", "params", "wall_time_ms", "provenance", "fingerprint", "files")


class MissingResult(LookupError):
    """No complete result with this configuration, and training was not allowed.

    `status` is what `inspect_run` found ("missing", "damaged" or "stale") and `detail` says why."""

    default_status = "missing"

    def __init__(self, message: str, status: str | None = None, detail: str | None = None):
        super().__init__(message)
        self.status = status or self.default_status
        self.detail = message if detail is None else detail


class DamagedResult(MissingResult):
    """A result folder whose metrics.json (or a file it vouches for) is unreadable or inconsistent."""

    default_status = "damaged"


class ResultExists(RuntimeError):
    """The run folder holds a complete result of another configuration (e.g. trained with other epochs);
    it is kept unless the caller passes ``replace=True`` (``python -m attnlib train ... --force``).
    `detail` names the folder and the settings that differ."""

    def __init__(self, detail: str):
        super().__init__(f"{detail}; it is kept (pass replace=True to replace it, or another results_dir)")
        self.detail = detail


REPOSITORY = Path(__file__).resolve().parent.parent
_ABSOLUTE = re.compile(r"(?<![\w.~])/[^\s:;,'\"]+")  # an absolute path inside a string


def portable_path(text):
    """`text` (a dataset description, a command line) with every absolute path in it made relative to the
    repository ("imagefolder-jpeg:../shared/data/cifar10"): provenance publishes no machine's layout. Not a
    string (None, an old result's odd value): returned as it is."""
    if not isinstance(text, str):
        return text
    return _ABSOLUTE.sub(lambda m: os.path.relpath(m.group(0), REPOSITORY), text)


def command_line(argv: list[str] | None = None) -> str:
    """The command that trained a run, as provenance records it: ``python -m attnlib ...`` with its paths
    relative to the repository (`portable_path`)."""
    argv = list(sys.argv if argv is None else argv)
    if argv and Path(argv[0]).name == "__main__.py" and Path(argv[0]).parent.name == "attnlib":
        argv[0] = "python -m attnlib"
    return portable_path(" ".join(argv))


def _record_host() -> bool:
    """Whether provenance names the machine's host name: only when asked ($ATTNLIB_RECORD_HOST=1)."""
    value = os.environ.get(RECORD_HOST_ENV, "").strip().lower()
    check(value in ("", "0", "1", "false", "true", "no", "yes", "off", "on"), RECORD_HOST_ENV, value, "0 or 1")
    return value in ("1", "true", "yes", "on")


def git_state() -> dict:
    """{"commit": sha or None, "dirty": bool or None} of the repository holding attnlib."""
    root = Path(__file__).resolve().parent.parent
    try:
        commit = subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=root, capture_output=True, text=True, timeout=10
        ).stdout.strip()
        status = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no"],
            cwd=root,
            capture_output=True,
            text=True,
            timeout=10,
        )
    except (OSError, subprocess.SubprocessError):
        return {"commit": None, "dirty": None}
    return {
        "commit": commit or None,
        "dirty": bool(status.stdout.strip()) if status.returncode == 0 else None,
    }


def run_dir(results_dir: str | Path, experiment: str, preset: str, seed: int = 0) -> Path:
    return Path(results_dir) / experiment / (preset if seed == 0 else f"{preset}-seed{seed}")


def data_key(data) -> str:
    """What the fingerprint records of the data: "cifar10" (any copy; provenance says which) or the
    synthetic spec / source."""
    if data is None:
        return "cifar10"
    if isinstance(data, str | os.PathLike):
        spec = str(data)
        if not is_synthetic(spec):
            return "cifar10"
        n_train, n_test = synthetic_sizes(spec)  # validates the sizes
        return spec if spec != SYNTHETIC else f"{SYNTHETIC}:{n_train}:{n_test}"
    source = getattr(data, "source", "")
    if source.startswith("synthetic"):
        return f"{source}:{len(data.train)}:{len(data.test)}"
    return "cifar10"


def run_config(experiment: str, preset: str, *, seed: int = 0, data=None, epochs: int | None = None) -> dict:
    """The configuration recorded in config.json (and hashed into the fingerprint). Validates everything.

    `model` holds the registry's model fields (the overrides of the family's defaults) and enters the
    fingerprint; `model_resolved`, every field of the family's config dataclass as built from them
    (`attnlib.models.resolved_config`), is recorded next to it but kept out of the fingerprint, so that
    results saved before it existed keep theirs. `inspect_run` compares it: a run whose resolved model
    differs from today's (a default changed) is stale. Runs saved without it cannot be checked so."""
    check_positive_int("seed", seed, 0, f"an integer in [0, {MAX_SEED}]")
    check(seed <= MAX_SEED, "seed", seed, f"an integer in [0, {MAX_SEED}]")  # numpy seeds take 32 bits
    if epochs is not None:
        check_positive_int("epochs", epochs)
    rc = experiments.resolve(experiment, preset, epochs=epochs)
    cfg = {**rc.to_dict(), "seed": seed, "data": data_key(data if data is not None else rc.data)}
    cfg.pop("reason")
    cfg["fingerprint"] = hashlib.sha256(json.dumps(cfg, sort_keys=True, default=list).encode()).hexdigest()[
        :16
    ]
    cfg[RESOLVED] = resolved_config(rc.family, **rc.model)  # after the hash: not in the fingerprint
    return cfg


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

    def model(self, device="cpu") -> torch.nn.Module:
        """The trained model, from checkpoints/last.pt (kept after training; not in git)."""
        from attnlib.models import make

        weights = self.path / "checkpoints" / "last.pt"
        if not weights.exists():
            raise MissingResult(
                f"{weights} is missing (checkpoints are not kept in git); retrain with: python -m attnlib train "
                f"{self.experiment} --preset {self.preset}"
            )
        try:  # every resolved field where config.json records them: a default changed since cannot
            # rebuild another network (runs saved before `model_resolved` existed: the registry's overrides)
            model = make(self.config["family"], **self.config.get(RESOLVED, self.config["model"]))
        except ConfigError as err:  # a field the model no longer has
            raise MissingResult(
                f"{self.path}: its network cannot be built today ({err}); retrain with: "
                f"{self._train_command()} --force",
                "stale",
                str(err),
            ) from None
        try:
            state = torch.load(weights, map_location=device, weights_only=True)
            saved = state.get("fingerprint")
            if saved is not None and saved != self.config.get("fingerprint"):
                raise ValueError("it belongs to another configuration")
            if (state.get("epoch"), state.get("step")) != (self.epochs_trained, 0):
                raise ValueError(
                    f"it is not the end of training (epoch {state.get('epoch')}, step {state.get('step')}; "
                    f"the run ended after epoch {self.epochs_trained})"
                )
            model.load_state_dict(state["model"])
            if not all(bool(torch.isfinite(p).all()) for p in model.parameters()):
                raise ValueError("its weights are not finite")  # never a model of NaNs
        except Exception as err:  # truncated or corrupt zip, foreign or partial checkpoint
            detail = f"{weights} is damaged ({type(err).__name__}: {' '.join(str(err).split())})"
            raise DamagedResult(
                f"{detail}; retrain with: {self._train_command()}", "damaged", detail
            ) from None
        return model.to(device).eval()

    @property
    def epochs_trained(self) -> int:
        """Epochs the run trained (one history row each): its protocol's epochs (or, for results saved by the
        former `converge` preset's plateau stop, fewer)."""
        return len(self.history)

    def _train_command(self) -> str:
        seed = self.config.get("seed", 0)
        return f"python -m attnlib train {self.experiment} --preset {self.preset}" + (
            f" --seed {seed}" if seed else ""
        )


class Runs(dict):
    """Several results: ``{experiment: RunResult or None}``, plus ``status``: ``{experiment: (status,
    detail)}`` with status "complete", "missing", "damaged" or "stale" (a saved result of another
    configuration) and what is wrong with it (``inspect_run``). What ``attnlib.tables.saved`` and the
    book's ``load_all`` return, and what ``attnlib.tables.frame`` tabulates."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.status: dict[str, tuple[str, str]] = {}


def inspect_run(
    path: str | Path, fingerprint: str | None = None, *, expected: dict | None = None
) -> tuple[str, str]:
    """(status, detail): "complete", "missing", "damaged" or "stale" (a complete result of another
    configuration: its fingerprint is not `fingerprint`, or not `expected["fingerprint"]`; with `expected`,
    the full `run_config`, the detail names the settings that differ, and a result whose config.json
    records another resolved model (`model_resolved`: a model default changed since) is stale too; one
    saved before config.json recorded it cannot be checked so)."""
    path = Path(path)
    if expected is not None:
        fingerprint = expected["fingerprint"]
    metrics_path = path / "metrics.json"
    if not metrics_path.exists():
        return "missing", f"no {metrics_path}"
    try:
        metrics = read_json(metrics_path)  # bounded, a regular file, not nested deeper than a result
        if not isinstance(metrics, dict):
            return "damaged", f"{metrics_path} holds a JSON {type(metrics).__name__}, not an object"
        absent = [k for k in METRICS_KEYS if k not in metrics]
        if absent:
            return "damaged", f"{metrics_path} lacks {', '.join(absent)}"
        wrong = _metrics_problem(metrics) or values_problem(metrics)
        if wrong:
            return "damaged", f"{metrics_path}: {wrong}"
        # "files": plain files of this folder covering the result, checksums; metrics = history's last row
        wrong = files_problem(path, metrics["files"]) or history_problem(path, metrics)
        if wrong:
            return "damaged", wrong
    except OSError as err:  # a file named in "files" is a link, a FIFO, a device, too large, unreadable
        return "damaged", f"{err.filename or metrics_path} is unreadable ({err.strerror or err})"
    except (ValueError, TypeError, AttributeError) as err:
        return "damaged", f"{metrics_path} is unreadable ({type(err).__name__}: {err})"
    if fingerprint is not None and metrics["fingerprint"] != fingerprint:
        return "stale", f"{path} holds a result for another configuration" + _config_difference(
            path, expected
        )
    if expected is not None and RESOLVED in expected:  # same fingerprint: has a model default changed?
        config_path = path / "config.json"
        try:
            saved = read_json(config_path)
        except (OSError, ValueError) as err:
            return "damaged", f"{config_path} is unreadable ({type(err).__name__}: {err})"
        resolved = saved.get(RESOLVED) if isinstance(saved, dict) else None
        if resolved is not None and not isinstance(resolved, dict):
            return "damaged", f"{config_path}: {RESOLVED} is {resolved!r}, not an object"
        # a run saved before config.json recorded the resolved model cannot be checked: it stays complete
        config_cls = FAMILIES[expected["family"]][0]
        diffs = [] if resolved is None else resolved_difference(resolved, expected[RESOLVED], config_cls)
        if diffs:
            shown = "; ".join(f"{RESOLVED}.{d}" for d in diffs[:4]) + ("; ..." if len(diffs) > 4 else "")
            return "stale", (
                f"{path} holds a result for another configuration ({shown}: a model default changed since "
                "it was trained)"
            )
    return "complete", ""


def _number(v, low: float = -math.inf, high: float = math.inf) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v) and low <= v <= high


def _count(v) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) and v >= 0


# What `_write_result` writes and readers (tables, the book, the CLI) use, with the type each must have:
# metrics.json is not covered by a checksum, so a hand-edited value must not pass as a result.
_METRICS_TYPES = {
    "test_accuracy": (lambda v: _number(v, 0, 1), "a number in [0, 1]"),
    "params": (_count, "an integer >= 0"),
    "wall_time_ms": (lambda v: _number(v, 0), "a number >= 0"),
    "provenance": (lambda v: isinstance(v, dict), "an object"),
    "fingerprint": (lambda v: isinstance(v, str), "a string"),
    "files": (
        lambda v: (
            isinstance(v, dict) and all(isinstance(k, str) and isinstance(d, str) for k, d in v.items())
        ),
        "an object of file names and sha256 digests",
    ),
}

_OPTIONAL_TYPES = {
    "test_loss": (lambda v: _number(v, 0), "a number >= 0"),
    "train_accuracy": (lambda v: _number(v, 0, 1), "a number in [0, 1]"),
    "wall_time_std_ms": (lambda v: v is None or _number(v, 0), "a number >= 0"),
    "wall_time_device": (lambda v: isinstance(v, str), "a string"),
}

_PROVENANCE_TYPES = {
    "epochs": (lambda v: _count(v) and v >= 1, "an integer >= 1"),
    "train_seconds": (lambda v: _number(v, 0), "a number >= 0"),
    "threads": (lambda v: v is None or (_count(v) and v >= 1), "an integer >= 1 or null"),
}


def _metrics_problem(metrics: dict) -> str:
    """'' when every value that readers use has its type, else what is wrong (e.g. "test_accuracy is
    'abc', not a number in [0, 1]")."""
    checks = [(metrics, k, *c) for k, c in _METRICS_TYPES.items()]
    checks += [(metrics, k, *c) for k, c in _OPTIONAL_TYPES.items() if k in metrics]
    for key, (ok, allowed) in _PROVENANCE_TYPES.items():
        if isinstance(metrics.get("provenance"), dict) and key in metrics["provenance"]:
            checks.append((metrics["provenance"], key, ok, allowed))
    for d, key, ok, allowed in checks:
        if not ok(d[key]):
            name = key if d is metrics else f"provenance.{key}"
            return f"{name} is {d[key]!r}, not {allowed}"
    return ""


def _config_difference(path: Path, expected: dict | None) -> str:
    """' (train.epochs: 4 saved, 8 now; ...)': the settings of the saved config.json that differ."""
    if expected is None:
        return ""
    try:
        saved = read_json(path / "config.json")
    except (OSError, ValueError):
        return ""
    if not isinstance(saved, dict):
        return ""

    def flat(d: dict, prefix: str = "") -> dict:
        out = {}
        for k, v in d.items():
            if isinstance(v, dict):
                out.update(flat(v, f"{prefix}{k}."))
            elif k != "fingerprint":
                out[f"{prefix}{k}"] = list(v) if isinstance(v, tuple) else v
        return out

    expected = json.loads(json.dumps(expected, default=list))
    a = flat({k: v for k, v in saved.items() if k != RESOLVED})
    b = flat({k: v for k, v in expected.items() if k != RESOLVED})
    diffs = [
        f"{k}: {a.get(k, '-')} saved, {b.get(k, '-')} now"
        for k in sorted(a.keys() | b.keys())
        if a.get(k) != b.get(k)
    ]
    family = expected["family"]
    if isinstance(saved.get(RESOLVED), dict) and RESOLVED in expected and saved.get("family") == family:
        # a changed default too; a field already listed as model.<name> is not repeated
        listed = {d.split(":")[0] for d in diffs}
        diffs += [
            f"{RESOLVED}.{d}"
            for d in resolved_difference(saved[RESOLVED], expected[RESOLVED], FAMILIES[family][0])
            if f"model.{d.split(':')[0]}" not in listed
        ]
    return f" ({'; '.join(diffs[:4])}{'; ...' if len(diffs) > 4 else ''})" if diffs else ""


def load_run(path: str | Path, fingerprint: str | None = None) -> RunResult:
    """Read a complete result folder; DamagedResult / MissingResult otherwise (a checksummed file that does
    not parse too: its checksum may have been forged with it)."""
    try:
        return _load_checked(path, fingerprint)
    except MissingResult:
        raise
    except Exception as err:  # noqa: BLE001 -- whatever a forged file breaks in a reader: damaged
        detail = f"{path} holds a result file that does not parse ({type(err).__name__}: {err})"
        raise DamagedResult(" ".join(detail.split())) from None


def _load_checked(path: str | Path, fingerprint: str | None = None) -> RunResult:
    import pandas as pd

    path = Path(path)
    status, detail = inspect_run(path, fingerprint)
    if status == "damaged":
        raise DamagedResult(detail)
    if status != "complete":
        raise MissingResult(detail, status)
    metrics, config = read_json(path / "metrics.json"), read_json(path / "config.json")
    if not all(isinstance(config.get(k), str) for k in ("experiment", "preset")):
        raise ValueError("config.json does not name its experiment and preset as strings")
    with np.load(io.BytesIO(read_regular(path / "attention.npz"))) as z:
        attention = dict(z)
    centers = None
    if (path / "centers.npz").exists():
        with np.load(io.BytesIO(read_regular(path / "centers.npz"))) as z:
            centers = dict(z)
    probe = None
    if PROBE_FILE in metrics["files"]:
        with np.load(io.BytesIO(read_regular(path / PROBE_FILE))) as z:
            probe = dict(z)
    history = pd.read_csv(io.BytesIO(read_regular(path / "history.csv")))
    return RunResult(
        config["experiment"],
        config["preset"],
        path,
        config,
        metrics,
        history,
        attention,
        centers,
        probe=probe,
    )


def initial_model(config: dict) -> torch.nn.Module:
    """The model of a saved run as its training built it before the first step: the global RNG seeded with
    the run's seed, then the network of its config.json (every resolved field where recorded), as
    `train_run` does (`torch.manual_seed(seed)`, then `make`). The global RNG is left as it was."""
    from attnlib.models import make

    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(config.get("seed", 0))
        return make(config["family"], **config.get(RESOLVED, config["model"]))


def backfill_probe(
    experiment: str,
    preset: str,
    *,
    seed: int = 0,
    results_dir: str | Path = "results",
    data=None,
    device="cpu",
) -> Path:
    """Add the standard probe (probe.npz) to a complete saved run that lacks it (or recompute it): the end
    probe from its final weights (checkpoints/last.pt, which must be the end of training), the
    initialisation probe from the model rebuilt from its seed (`initial_model`), on the first test images of
    its data (`data`: a CIFAR-10 folder for a run on "cifar10", None: $ATTNLIB_DATA; a synthetic run's data
    is rebuilt from its spec). Rewrites metrics.json's file list (checksums) under the run's lock; the
    fingerprint and every other file are unchanged. Returns the path of probe.npz. MissingResult /
    DamagedResult when the run is not complete or its checkpoint is absent or not the end of training."""
    path = run_dir(results_dir, experiment, preset, seed)
    lock = RunLock(path)
    if not (path / "metrics.json").exists():
        raise MissingResult(f"no complete result in {path} (no metrics.json)")
    lock.acquire()
    try:
        run = load_run(path)
        end_model = run.model(device)  # checks the checkpoint: this run's, at the end of training
        spec = run.config.get("data")
        dataset = _load_data(spec if is_synthetic(str(spec)) else data)
        images = first_test_images(dataset, run.config.get("attention_mean_images", 100))
        init = attention_probe(initial_model(run.config), images, device)
        write_npz(
            path / PROBE_FILE, probe_file(len(images), init, attention_probe(end_model, images, device))
        )
        metrics = dict(run.metrics)
        metrics["files"] = {**metrics["files"], PROBE_FILE: sha256(path / PROBE_FILE)}
        write_json(path / "metrics.json", metrics)
    finally:
        lock.release()
    return path / PROBE_FILE


def _load_data(spec):
    """CIFAR10Data from a spec (None = $ATTNLIB_DATA), a folder, "synthetic[:N:M]", or a CIFAR10Data."""
    from attnlib import data as datamod

    if isinstance(spec, datamod.CIFAR10Data):
        return spec
    return datamod.load_dataset(spec)


def train_run(
    experiment: str,
    preset: str = "paper",
    *,
    data=None,
    results_dir: str | Path = "results",
    device=None,
    seed: int = 0,
    epochs: int | None = None,
    progress: bool | None = None,
    on_step=None,
    replace: bool = False,
    checkpoint_every: float | None = None,
) -> RunResult:
    """Train `experiment` at `preset` and write its result folder; resumes from its checkpoints.

    Works alone or under torchrun (every rank calls it; rank 0 locks the folder and writes results).
    data: None (the preset's default, else $ATTNLIB_DATA), a folder, "synthetic[:N_TRAIN:N_TEST]" or a
    CIFAR10Data. Raises ConfigError for bad arguments (data too small for one batch included) and an
    OSError naming the path when the results folder cannot be written, both before the data is loaded
    or anything is written; RunLocked when another process trains the same folder; ResultExists when
    the folder holds a complete result of another configuration, unless `replace`. checkpoint_every:
    seconds between mid-epoch checkpoints (attnlib.train.checkpoint_interval)."""
    import torch.distributed as dist

    from attnlib import train as trainer
    from attnlib.data import Batches
    from attnlib.models import make

    rc = experiments.resolve(experiment, preset, epochs=epochs)
    spec = data if data is not None else rc.data
    config = run_config(experiment, preset, seed=seed, data=spec, epochs=epochs)
    trainer.resolve_device(device)  # validate the device and the data before anything is written
    trainer.checkpoint_interval(checkpoint_every)
    path = run_dir(results_dir, experiment, preset, seed)
    check_writable(path)
    check_no_links(path, results_dir)  # a linked run.lock / checkpoints/ would write outside the results
    dataset = _load_data(spec)
    if len(dataset.train) < rc.train.batch_size:
        raise ConfigError(
            "data",
            spec if isinstance(spec, str | os.PathLike | None) else dataset.source,
            f"at least {rc.train.batch_size} training images (one batch of {experiment} at preset {preset}); "
            f"{dataset.source} has {len(dataset.train)}",
        )
    with trainer.distributed_session(device) as (info, dev):
        lock = RunLock(path)
        refusal = None
        if info.is_main:
            try:
                lock.acquire()
            except RunLocked as err:
                refusal = ("locked", str(err))
            else:  # under the lock: a complete result of another configuration is kept unless `replace`
                status, detail = inspect_run(path, expected=config)
                if status == "stale" and not replace:
                    lock.release()
                    refusal = ("exists", detail)
        if info.enabled:
            box = [refusal]
            dist.broadcast_object_list(box, src=0)
            refusal = box[0]
        if refusal:
            raise (RunLocked if refusal[0] == "locked" else ResultExists)(refusal[1])
        if info.is_main:  # temporary files of a killed writer (never complete: safe to drop)
            for stray in [*path.glob(".*.tmp*"), *path.glob("checkpoints/.*.tmp*")]:
                stray.unlink(missing_ok=True)
        try:
            torch.manual_seed(seed)
            model = make(rc.family, **rc.model)
            bs = rc.train.batch_size
            kw = dict(seed=seed, device=dev, rank=info.rank, world_size=info.world_size)
            probe = None
            if rc.probe_images:  # per-layer attention measures of fixed test images, every epoch
                from attnlib import measures

                probe = functools.partial(
                    measures.probe, images=first_test_images(dataset, rc.probe_images, dev)
                )
            # the standard probe at initialisation, before the first step (it consumes no RNG: resumed or
            # not, the model here is the seed's initial one; `fit` loads a checkpoint's weights later)
            init_probe = None
            if info.is_main:
                init_probe = attention_probe(
                    model, first_test_images(dataset, rc.attention_mean_images, dev), dev
                )
            code = git_state()  # the code this process trains with (the tree may change before the end)
            fit = trainer.fit(
                model,
                Batches(dataset.train, bs, train=True, **kw),
                Batches(dataset.test, bs, train=False, **kw),
                rc.train,
                device=dev,
                seed=seed,
                checkpoint_dir=path / "checkpoints",
                fingerprint=config["fingerprint"],
                progress=progress,
                desc=f"{experiment}/{preset}",
                on_step=on_step,
                probe=probe,
                checkpoint_every=checkpoint_every,
            )
            if info.is_main:
                _write_result(path, config, rc, model, fit, dataset, dev, info, code, init_probe)
            if info.enabled:
                dist.barrier()
        finally:
            lock.release()
    result = load_run(path, config["fingerprint"])
    result.trained = True
    return result


def first_test_images(dataset, n: int, device="cpu") -> torch.Tensor:
    """The first `n` (at least 1) test images of `dataset`, normalised, on `device`: the fixed images of the
    saved attention maps, the standard probe and the per-epoch measures."""
    from attnlib.data import Batches

    images, _ = next(Batches(dataset.test, max(1, n), train=False, device=device).epoch(0))
    return images


def _write_result(
    path: Path, config: dict, rc, model, fit, dataset, device, info, code: dict, init_probe=None
) -> None:
    import pandas as pd

    images = first_test_images(dataset, rc.attention_mean_images)
    attention = attention_summary(model, images, rc.attention_images, device)
    end_probe = attention_probe(model, images, device)
    timing = inference_wall_time(model, device, rc.timing_reps, rc.timing_warmup)
    hist = pd.DataFrame(fit.history)
    last = fit.history[-1]
    write_json(path / "config.json", config)
    buf = io.StringIO()
    hist.to_csv(buf, index=False)
    write_bytes(path / "history.csv", buf.getvalue().encode())
    write_npz(path / "attention.npz", attention)
    write_npz(path / PROBE_FILE, probe_file(len(images), init_probe, end_probe))
    files = [*RESULT_FILES, PROBE_FILE]
    if fit.quadratic is not None:
        write_npz(path / "centers.npz", {k: v.numpy() for k, v in fit.quadratic.items()})
        files.append("centers.npz")
    metrics = {
        "test_accuracy": last["test_acc"],
        "test_loss": last["test_loss"],
        "train_accuracy": last["train_acc"],
        "params": sum(p.numel() for p in model.parameters() if p.requires_grad),
        **timing,
        "fingerprint": config["fingerprint"],
        "files": {name: sha256(path / name) for name in files},
        "provenance": {
            "experiment": config["experiment"],
            "preset": config["preset"],
            "seed": config["seed"],
            "epochs": rc.train.epochs,
            "epochs_trained": len(fit.history),
            "best_test_accuracy": max(row["test_acc"] for row in fit.history),
            "dataset": portable_path(dataset.source),  # its folder relative to the repository
            "data": config["data"],
            "train_images": len(dataset.train),
            "test_images": len(dataset.test),
            "device": device_name(device),
            "threads": torch.get_num_threads() if torch.device(device).type == "cpu" else None,
            "world_size": info.world_size,
            "bf16": rc.train.bf16 if rc.train.bf16 is not None else _bf16(device),
            "torch": torch.__version__,
            "python": platform.python_version(),
            "git": code,
            **({"hostname": socket.gethostname()} if _record_host() else {}),  # only when asked
            "train_seconds": fit.train_seconds,
            "resumed_from": fit.resumed,
            "finished": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
            "command": command_line(),
        },
    }
    if (now := git_state()) != code:  # the tree changed while it trained (a merge, an edit)
        metrics["provenance"]["git_at_write"] = now
    write_json(path / "metrics.json", metrics)  # last: marks the folder complete
    (path / "checkpoints" / "previous.pt").unlink(missing_ok=True)  # keep last.pt: the trained weights


def _bf16(device) -> bool:
    from attnlib.train import fast_bf16

    return fast_bf16(torch.device(device))


def _train_missing_default() -> bool:
    """$ATTNLIB_TRAIN_MISSING as the chapters read it (attnlib.book.params): unset or empty -> True, 1 / true /
    yes / on, 0 / false / no / off; anything else is refused (ConfigError), never taken for "train"."""
    value = os.environ.get(TRAIN_MISSING_ENV, "").strip().lower()
    if value in ("", "1", "true", "yes", "on"):
        return True
    check(value in ("0", "false", "no", "off"), TRAIN_MISSING_ENV, value, "0 or 1 (false / true, no / yes, off / on)")
    return False


def run_or_load(
    experiment: str,
    preset: str = "paper",
    data=None,
    results_dir: str | Path = "results",
    device=None,
    seed: int = 0,
    train_missing: bool | None = None,
    *,
    epochs: int | None = None,
    progress: bool | None = None,
    replace: bool = False,
) -> RunResult:
    """The saved result of `experiment` at `preset` when one exists for the same configuration, else train
    it (resuming from its checkpoints). A damaged result is reported and retrained.

    train_missing: False -> raise MissingResult (DamagedResult for a damaged one) instead of training;
    None -> $ATTNLIB_TRAIN_MISSING (0 during the book build), default True.
    replace: a complete result of another configuration in the same folder ("stale": e.g. trained with
    other epochs, or before the preset changed) is retrained over only with replace=True; otherwise
    training raises ResultExists and the result is kept."""
    from attnlib.train import resolve_device

    config = run_config(experiment, preset, seed=seed, data=data, epochs=epochs)
    resolve_device(device)
    path = run_dir(results_dir, experiment, preset, seed)
    status, detail = inspect_run(path, expected=config)
    if status == "complete":
        return load_run(path, config["fingerprint"])
    if train_missing is None:
        train_missing = _train_missing_default()
    if status == "damaged":
        log.warning("%s is damaged (%s)%s", path, detail, "; retraining it" if train_missing else "")
    elif status == "stale" and train_missing:
        if not replace:
            raise ResultExists(detail)
        log.warning("%s; replacing it", detail)
    if not train_missing:
        hint = f"train it with: python -m attnlib train {experiment} --preset {preset}"
        cls = DamagedResult if status == "damaged" else MissingResult
        message = f"no complete result for {experiment} at preset {preset} in {path} ({detail}); {hint}"
        raise cls(message, status, detail)
    return train_run(
        experiment,
        preset,
        data=data,
        results_dir=results_dir,
        device=device,
        seed=seed,
        epochs=epochs,
        progress=progress,
        replace=replace,
    )
