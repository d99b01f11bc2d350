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

import io
import json
import logging
import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from attnlib.errors import ConfigError
from attnlib.models import FAMILIES, resolved_difference
from attnlib.results.config import RESOLVED
from attnlib.results.store import read_json, read_regular
from attnlib.results.validate import files_problem, history_problem, values_problem
from attnlib.snapshots import PROBE_FILE

log = logging.getLogger("attnlib")


RESULT_FILES = ("config.json", "history.csv", "attention.npz")

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

