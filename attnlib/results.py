"""Results on disk: layout, atomic writes, locks, provenance, `run_or_load` and Table 3.

Layout of one run (seed 0; other seeds use `<preset>-seed<N>`):

    <results-dir>/<experiment>/<preset>/
        config.json      the resolved RunConfig, seed, data and fingerprint
        metrics.json     test_accuracy (fraction), params, wall_time_ms (Table 3 protocol), provenance,
                         and the sha256 of every other result file; written last: it marks completion
        history.csv      one row per epoch
        attention.npz    attention maps of fixed test images (see `attention_summary`)
        centers.npz      quadratic models: centres and Σ⁻¹ of every head after every epoch
        checkpoints/     last.pt / previous.pt (not in git), used to resume
        run.lock         while a run is training (pid and host)

Every file is written atomically (temporary file in the same folder, fsync, rename), so a reader sees the
old file or the new one, never a part.
"""

from __future__ import annotations

import errno
import fcntl
import functools
import hashlib
import io
import json
import logging
import math
import os
import platform
import socket
import stat
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from attnlib import experiments
from attnlib.checks import SYNTHETIC, check_positive_int, is_synthetic, synthetic_sizes
from attnlib.env import TRAIN_MISSING_ENV
from attnlib.errors import ConfigError
from attnlib.util import sync, timed_ms, write_bytes

log = logging.getLogger("attnlib")

RESULT_FILES = ("config.json", "history.csv", "attention.npz")
METRICS_KEYS = ("test_accuracy", "params", "wall_time_ms", "provenance", "fingerprint", "files")
QUERY_FRACTIONS = ((0.5, 0.5), (0.25, 0.25), (0.25, 0.75), (0.75, 0.5))  # fixed query pixels (row, col)


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


class RunLocked(RuntimeError):
    """Another process is training this experiment and preset right now."""


class ResultExists(RuntimeError):
    """The run folder holds a complete result of another configuration (e.g. trained with other epochs);
    it is kept unless the caller passes ``replace=True`` (``python -m attnlib train ... --force``).
    `detail` names the folder and the settings that differ."""

    def __init__(self, detail: str):
        super().__init__(f"{detail}; it is kept (pass replace=True to replace it, or another results_dir)")
        self.detail = detail


# ---------------------------------------------------------------------------------------- writable folders
def check_writable(folder: str | Path) -> None:
    """Raise an OSError naming the path and the reason unless `folder` is, or can be made, a writable
    folder: the nearest existing ancestor must be a folder (not a file) that this process may write to, on
    a file system mounted read-write. Writes nothing."""
    folder = Path(folder).absolute()
    probe = folder
    while True:
        try:
            st = os.stat(probe)
            break
        except (FileNotFoundError, NotADirectoryError):
            if probe.parent == probe:
                raise
            probe = probe.parent
    if not stat.S_ISDIR(st.st_mode):
        where = "" if probe == folder else f"; the results go to {folder}"
        raise NotADirectoryError(errno.ENOTDIR, f"is a file, not a folder{where}", str(probe))
    if not os.access(probe, os.W_OK | os.X_OK):
        read_only = bool(os.statvfs(probe).f_flag & os.ST_RDONLY)
        code, reason = (
            (errno.EROFS, "Read-only file system") if read_only else (errno.EACCES, "Permission denied")
        )
        where = "" if probe == folder else f" (the results go to {folder})"
        raise OSError(code, f"{reason}: cannot write results here{where}", str(probe))


def write_json(path: str | Path, obj) -> None:
    write_bytes(path, (json.dumps(obj, indent=2, sort_keys=True, default=_json_default) + "\n").encode())


def write_npz(path: str | Path, arrays: dict[str, np.ndarray]) -> None:
    """Numeric arrays only (readers use allow_pickle=False)."""
    for name, a in arrays.items():
        if np.asarray(a).dtype.kind not in "biuf":
            raise ValueError(f"{name}: only numeric arrays are saved; got dtype {np.asarray(a).dtype}")
    buf = io.BytesIO()
    np.savez_compressed(buf, **arrays)
    write_bytes(path, buf.getvalue())


def _json_default(obj):
    if isinstance(obj, np.generic):
        return obj.item()
    if isinstance(obj, Path):
        return str(obj)
    raise TypeError(f"not JSON serialisable: {type(obj).__name__}")


def sha256(path: str | Path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


# ------------------------------------------------------------------------------------------------- locks
class RunLock:
    """An exclusive lock on one run folder: `run.lock` holding the owner's pid and host.

    Uses flock(2), which the kernel releases when the owner dies (even by SIGKILL), so a lock file left by
    a killed run never blocks: the next run takes it over and says so. A live owner makes `acquire` raise
    RunLocked naming it."""

    def __init__(self, folder: str | Path):
        self.path = Path(folder) / "run.lock"
        self._fd: int | None = None

    def acquire(self) -> RunLock:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        while True:
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError as err:
                os.close(fd)
                if err.errno not in (errno.EAGAIN, errno.EACCES):
                    raise
                owner = self._owner()
                raise RunLocked(
                    f"{self.path.parent} is being trained by another process ({owner}); wait for it to finish "
                    "or stop it (a killed run's lock is taken over automatically)"
                ) from None
            try:
                same = os.fstat(fd).st_ino == os.stat(self.path).st_ino
            except FileNotFoundError:
                same = False
            if same:  # not a file that its previous owner unlinked while we waited
                break
            os.close(fd)
        previous = self._owner()
        if previous:
            log.warning(
                "taking over the lock of a run that no longer runs (%s) in %s", previous, self.path.parent
            )
        os.ftruncate(fd, 0)
        os.write(
            fd, json.dumps({"pid": os.getpid(), "host": socket.gethostname(), "since": time.time()}).encode()
        )
        os.fsync(fd)
        self._fd = fd
        return self

    def _owner(self) -> str:
        try:
            info = json.loads(self.path.read_text() or "{}")
        except (OSError, ValueError):
            return "unknown owner"
        return f"pid {info['pid']} on {info['host']}" if "pid" in info else ""

    def release(self) -> None:
        if self._fd is not None:
            self.path.unlink(missing_ok=True)
            fcntl.flock(self._fd, fcntl.LOCK_UN)
            os.close(self._fd)
            self._fd = None

    def __enter__(self) -> RunLock:
        return self.acquire()

    def __exit__(self, *exc) -> None:
        self.release()


# -------------------------------------------------------------------------------------------- provenance
def device_name(device: torch.device | str) -> str:
    """A human-readable device name: the GPU's name, or the CPU model from /proc/cpuinfo."""
    device = torch.device(device)
    if device.type == "cuda":
        return torch.cuda.get_device_name(device)
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                name = line.split(":", 1)[1].strip()
                break
        else:
            name = platform.processor() or platform.machine()
    except OSError:
        name = platform.processor() or platform.machine()
    return f"{name} ({torch.get_num_threads()} threads)"


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


# ---------------------------------------------------------------------------------------- measurements
@torch.inference_mode()
def inference_wall_time(
    model: torch.nn.Module, device: torch.device | str, reps: int = 300, warmup: int = 10
) -> dict:
    """Table 3's protocol ([Re] main.py): `warmup` untimed, then `reps` timed forward passes of one
    1×3×32×32 image in fp32, synchronising after each. Returns mean and std in ms and the device's name."""
    device = torch.device(device)
    model = model.to(device).eval()
    x = torch.randn(1, 3, 32, 32, device=device)
    for _ in range(warmup):
        model(x)
    sync(device)
    t = np.asarray([timed_ms(lambda: model(x), device) for _ in range(reps)])
    return {
        "wall_time_ms": float(t.mean()),
        "wall_time_std_ms": float(t.std()),
        "wall_time_reps": reps,
        "wall_time_warmup": warmup,
        "wall_time_dtype": "float32",
        "wall_time_device": device_name(device),
    }


def _query_tokens(height: int, width: int) -> np.ndarray:
    return np.array([int(fr * height) * width + int(fc * width) for fr, fc in QUERY_FRACTIONS])


def _offset_mean(rows: np.ndarray, height: int, width: int) -> np.ndarray:
    """Mean attention by relative offset: rows (..., N, N) with N = H·W -> (..., 2H−1, 2W−1), entry
    [dy + H − 1, dx + W − 1] = mean over queries q of p(q → q + (dy, dx)) (0 where the key is off-grid)."""
    n = height * width
    q = np.arange(n)
    qy, qx = np.divmod(q, width)
    out = np.zeros((*rows.shape[:-2], 2 * height - 1, 2 * width - 1), dtype=np.float64)
    ky, kx = qy[None, :] - qy[:, None] + height - 1, qx[None, :] - qx[:, None] + width - 1  # (N, N)
    flat = (ky * (2 * width - 1) + kx).reshape(-1)
    lead = int(np.prod(rows.shape[:-2]))
    acc = np.zeros((lead, out.shape[-2] * out.shape[-1]))
    for i, r in enumerate(rows.reshape(lead, n * n)):
        acc[i] = np.bincount(flat, weights=r, minlength=acc.shape[1])
    return (acc / n).reshape(out.shape)


@torch.inference_mode()
def attention_summary(
    model: torch.nn.Module, images: torch.Tensor, n_show: int, device
) -> dict[str, np.ndarray]:
    """Attention maps of fixed test images, small enough for git (float16, well under 1 MB).

    images: the first test images, normalised float (M, 3, 32, 32); maps of the first `n_show` are kept
    per image, all M are averaged. Token maps (paper models, ViT; (B, heads, N, N) per layer, N = H·W):
      queries (Q,) token index of the fixed query pixels (QUERY_FRACTIONS of the grid), grid (2,) = (H, W)
      rows (n_show, L, heads, Q, N)   attention of each fixed query over all keys, per image
      rows_mean (L, heads, Q, N)      the same averaged over the M images
      offset_mean (L, heads, 2H−1, 2W−1)  attention by relative offset, averaged over queries and images
    Window maps (SAN; (B, G, K², H, W) per layer; layer i has its own grid):
      layer{i}_weights (n_show, K², H, W)   aggregation weights averaged over the G groups
      layer{i}_mean (G, K²)                 averaged over pixels and images
    """
    device = torch.device(device)
    model = model.to(device).eval()
    out: dict[str, np.ndarray] = {}
    sums: dict[str, np.ndarray] = {}
    m = images.shape[0]
    for start in range(0, m, 8):
        x = images[start : start + 8].to(device)
        _, maps = model(x, return_attention=True)
        for i, a in enumerate(maps):
            a = a.float()
            if a.dim() == 4:  # (B, heads, N, N)
                n = a.shape[-1]
                side = int(round(n**0.5))
                h, w = (side, side) if side * side == n else (1, n)
                qs = torch.as_tensor(_query_tokens(h, w), device=a.device)
                rows = a[:, :, qs, :]  # (B, heads, Q, N)
                off = _offset_mean(a.mean(0).cpu().numpy(), h, w)  # (heads, 2H−1, 2W−1), this batch
                _accumulate(sums, f"rows_{i}", rows.sum(0).cpu().numpy())
                _accumulate(sums, f"offset_{i}", off * a.shape[0])
                if start == 0:
                    out[f"rows_{i}"] = rows[:n_show].cpu().numpy()
                    out["grid"], out["queries"] = np.array([h, w]), qs.cpu().numpy()
            else:  # (B, G, K², H, W)
                if start == 0:
                    out[f"layer{i:02d}_weights"] = a[:n_show].mean(1).cpu().numpy()
                _accumulate(sums, f"layer{i:02d}_mean", a.mean((3, 4)).sum(0).cpu().numpy())
    layers = sorted(int(k.split("_")[1]) for k in sums if k.startswith("rows_"))
    if layers:
        out["rows"] = np.stack([out.pop(f"rows_{i}") for i in layers], axis=1)
        out["rows_mean"] = np.stack([sums[f"rows_{i}"] / m for i in layers])
        out["offset_mean"] = np.stack([sums[f"offset_{i}"] / m for i in layers])
    out.update({k: v / m for k, v in sums.items() if k.startswith("layer")})
    return {k: (v.astype(np.float16) if v.dtype.kind == "f" else v) for k, v in out.items()}


def _accumulate(sums: dict, key: str, value: np.ndarray) -> None:
    sums[key] = sums[key] + value if key in sums else value.astype(np.float64)


# ------------------------------------------------------------------------------------------------ runs
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
    """The configuration recorded in config.json (and hashed into the fingerprint). Validates everything."""
    check_positive_int("seed", seed, 0)
    if epochs is not None:
        check_positive_int("epochs", epochs)
    rc = experiments.resolve(experiment, preset, epochs=epochs)
    cfg = {**rc.to_dict(), "seed": seed, "data": data_key(data if data is not None else rc.data)}
    cfg.pop("reason")
    cfg["fingerprint"] = hashlib.sha256(json.dumps(cfg, sort_keys=True, default=list).encode()).hexdigest()[
        :16
    ]
    return cfg


@dataclass
class RunResult:
    """A complete result: metrics (dict), history (DataFrame, one row per epoch), attention (npz arrays),
    centers (npz arrays or None), config (dict). `trained` says whether this call trained it."""

    experiment: str
    preset: str
    path: Path
    config: dict
    metrics: dict
    history: object  # pandas.DataFrame
    attention: dict[str, np.ndarray]
    centers: dict[str, np.ndarray] | None
    trained: bool = False

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
        model = make(self.config["family"], **self.config["model"])
        try:
            state = torch.load(weights, map_location=device, weights_only=True)
            saved = state.get("fingerprint")
            if saved is not None and saved != self.config.get("fingerprint"):
                raise ValueError("it belongs to another configuration")
            if (state.get("epoch"), state.get("step")) != (self.config["train"]["epochs"], 0):
                raise ValueError(
                    f"it is not the end of training (epoch {state.get('epoch')}, step {state.get('step')})"
                )
            model.load_state_dict(state["model"])
        except Exception as err:  # truncated or corrupt zip, foreign or partial checkpoint
            detail = f"{weights} is damaged ({type(err).__name__}: {' '.join(str(err).split())})"
            raise DamagedResult(
                f"{detail}; retrain with: {self._train_command()}", "damaged", detail
            ) from None
        return model.to(device).eval()

    def _train_command(self) -> str:
        seed = self.config.get("seed", 0)
        return f"python -m attnlib train {self.experiment} --preset {self.preset}" + (
            f" --seed {seed}" if seed else ""
        )


def inspect_run(
    path: str | Path, fingerprint: str | None = None, *, expected: dict | None = None
) -> tuple[str, str]:
    """(status, detail): "complete", "missing", "damaged" or "stale" (a complete result of another
    configuration: its fingerprint is not `fingerprint`, or not `expected["fingerprint"]`; with `expected`,
    the full `run_config`, the detail names the settings that differ)."""
    path = Path(path)
    if expected is not None:
        fingerprint = expected["fingerprint"]
    metrics_path = path / "metrics.json"
    if not metrics_path.exists():
        return "missing", f"no {metrics_path}"
    try:
        metrics = json.loads(metrics_path.read_text())
        if not isinstance(metrics, dict):
            return "damaged", f"{metrics_path} holds a JSON {type(metrics).__name__}, not an object"
        absent = [k for k in METRICS_KEYS if k not in metrics]
        if absent:
            return "damaged", f"{metrics_path} lacks {', '.join(absent)}"
        wrong = _metrics_problem(metrics)
        if wrong:
            return "damaged", f"{metrics_path}: {wrong}"
        for name, digest in metrics["files"].items():
            if not (path / name).exists():
                return "damaged", f"{path / name} is missing"
            if sha256(path / name) != digest:
                return "damaged", f"{path / name} does not match its checksum in metrics.json"
    except (OSError, ValueError, TypeError, AttributeError) as err:
        return "damaged", f"{metrics_path} is unreadable ({type(err).__name__}: {err})"
    if fingerprint is not None and metrics["fingerprint"] != fingerprint:
        return "stale", f"{path} holds a result for another configuration" + _config_difference(
            path, expected
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
        saved = json.loads((path / "config.json").read_text())
    except (OSError, ValueError):
        return ""

    def flat(d: dict, prefix: str = "") -> dict:
        out = {}
        for k, v in d.items():
            if isinstance(v, dict):
                out.update(flat(v, f"{prefix}{k}."))
            elif k != "fingerprint":
                out[f"{prefix}{k}"] = list(v) if isinstance(v, tuple) else v
        return out

    a, b = flat(saved), flat(json.loads(json.dumps(expected, default=list)))
    diffs = [
        f"{k}: {a.get(k, '-')} saved, {b.get(k, '-')} now"
        for k in sorted(a.keys() | b.keys())
        if a.get(k) != b.get(k)
    ]
    return f" ({'; '.join(diffs[:4])}{'; ...' if len(diffs) > 4 else ''})" if diffs else ""


def load_run(path: str | Path, fingerprint: str | None = None) -> RunResult:
    """Read a complete result folder; DamagedResult / MissingResult otherwise."""
    import pandas as pd

    path = Path(path)
    status, detail = inspect_run(path, fingerprint)
    if status == "damaged":
        raise DamagedResult(detail)
    if status != "complete":
        raise MissingResult(detail, status)
    metrics = json.loads((path / "metrics.json").read_text())
    config = json.loads((path / "config.json").read_text())
    with np.load(path / "attention.npz") as z:
        attention = dict(z)
    centers = None
    if (path / "centers.npz").exists():
        with np.load(path / "centers.npz") as z:
            centers = dict(z)
    history = pd.read_csv(path / "history.csv")
    return RunResult(
        config["experiment"], config["preset"], path, config, metrics, history, attention, centers
    )


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

                probe_batches = Batches(dataset.test, rc.probe_images, train=False, device=dev)
                probe_x, _ = next(probe_batches.epoch(0))
                probe = functools.partial(measures.probe, images=probe_x)
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
                _write_result(path, config, rc, model, fit, dataset, dev, info)
            if info.enabled:
                dist.barrier()
        finally:
            lock.release()
    result = load_run(path, config["fingerprint"])
    result.trained = True
    return result


def _write_result(path: Path, config: dict, rc, model, fit, dataset, device, info) -> None:
    import pandas as pd

    from attnlib.data import Batches

    first = Batches(dataset.test, max(1, rc.attention_mean_images), train=False, device="cpu")
    images, _ = next(first.epoch(0))  # the first test images, normalised
    attention = attention_summary(model, images, rc.attention_images, device)
    timing = inference_wall_time(model, device, rc.timing_reps, rc.timing_warmup)
    hist = pd.DataFrame(fit.history)
    last = fit.history[-1]
    write_json(path / "config.json", config)
    buf = io.StringIO()
    hist.to_csv(buf, index=False)
    write_bytes(path / "history.csv", buf.getvalue().encode())
    write_npz(path / "attention.npz", attention)
    files = list(RESULT_FILES)
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
            "dataset": dataset.source,
            "data": config["data"],
            "train_images": len(dataset.train),
            "test_images": len(dataset.test),
            "device": device_name(device),
            "world_size": info.world_size,
            "bf16": rc.train.bf16 if rc.train.bf16 is not None else _bf16(device),
            "torch": torch.__version__,
            "python": platform.python_version(),
            "git": git_state(),
            "hostname": socket.gethostname(),
            "train_seconds": fit.train_seconds,
            "resumed_from": fit.resumed,
            "finished": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
            "command": " ".join(sys.argv),
        },
    }
    write_json(path / "metrics.json", metrics)  # last: marks the folder complete
    (path / "checkpoints" / "previous.pt").unlink(missing_ok=True)  # keep last.pt: the trained weights


def _bf16(device) -> bool:
    from attnlib.train import fast_bf16

    return fast_bf16(torch.device(device))


def _train_missing_default() -> bool:
    value = os.environ.get(TRAIN_MISSING_ENV, "").strip().lower()
    return value not in ("0", "false", "no", "off")


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


# ------------------------------------------------------------------------------------------------ tables
def collect(
    results_dir: str | Path = "results", preset: str = "paper", names=None, seed: int = 0, *, data=None
):
    """One row per experiment with whatever is saved: status, detail, accuracy, params, wall time, device,
    epochs, training time. Never trains.

    status: "complete" (a result of the experiment's current configuration at `preset`, `seed` and `data`,
    as `run_or_load` would load it), "missing", "damaged" (unreadable or not matching its checksums) or
    "stale" (a result of another configuration, e.g. trained before the preset changed); only complete
    rows carry numbers, and `detail` says what is wrong with the others."""
    import pandas as pd

    experiments.check_preset(preset)
    rows = []
    for name in names or experiments.names():
        exp = experiments.get(name)
        path = run_dir(results_dir, name, preset, seed)
        status, detail = inspect_run(path, expected=run_config(name, preset, seed=seed, data=data))
        row = {"experiment": name, "model": exp.title, "status": status, "detail": detail}
        if status == "complete":
            m = json.loads((path / "metrics.json").read_text())
            row.update(
                accuracy=m["test_accuracy"],
                params=m["params"],
                wall_time_ms=m["wall_time_ms"],
                wall_time_std_ms=m.get("wall_time_std_ms"),
                device=m.get("wall_time_device"),
                epochs=m["provenance"].get("epochs"),
                train_seconds=m["provenance"].get("train_seconds"),
            )
        rows.append(row)
    return pd.DataFrame(rows)


def seed_accuracies(
    results_dir: str | Path, preset: str, experiment: str, *, data=None
) -> tuple[dict[int, float], list[str]]:
    """({seed: test accuracy}, problems) over every saved seed of `experiment` at `preset`
    (`<preset>/` is seed 0, `<preset>-seed<N>/` seed N) whose result is complete for the current
    configuration; `problems` says why any other seed folder is not used ("seed 1: stale (...)"). Never trains."""
    folder = Path(results_dir) / experiment
    seeds = {0}
    for path in folder.glob(f"{preset}-seed*"):
        tail = path.name[len(f"{preset}-seed") :]
        if tail.isdigit() and int(tail) > 0:
            seeds.add(int(tail))
    found, problems = {}, []
    for seed in sorted(seeds):
        path = run_dir(results_dir, experiment, preset, seed)
        status, detail = inspect_run(path, expected=run_config(experiment, preset, seed=seed, data=data))
        if status == "complete":
            found[seed] = json.loads((path / "metrics.json").read_text())["test_accuracy"]
        elif status != "missing" or seed > 0:
            problems.append(f"seed {seed}: {status}" + (f" ({detail})" if detail else ""))
    return found, problems


def seed_columns(results_dir: str | Path, preset: str, names, *, data=None):
    """One row per experiment: `seeds` (n), `accuracy_mean`, `accuracy_sd` (None below 2 seeds), `seed_list`
    and `seed_problems`, from `seed_accuracies`."""
    import pandas as pd

    rows = []
    for name in names:
        acc, problems = seed_accuracies(results_dir, preset, name, data=data)
        values = list(acc.values())
        rows.append(
            {
                "experiment": name,
                "seeds": len(values),
                "accuracy_mean": float(np.mean(values)) if values else None,
                "accuracy_sd": float(np.std(values, ddof=1)) if len(values) > 1 else None,
                "seed_list": sorted(acc),
                "seed_problems": "; ".join(problems),
            }
        )
    return pd.DataFrame(rows)


def timing_columns(results_dir: str | Path, preset: str, names):
    """One row per experiment: `wall_time_ms` (median), `wall_time_p25_ms`, `wall_time_p75_ms` and, for an HA
    variant, `time_ratio` (HA / model, paired by round: `attnlib.timing.ratios`) with `time_ratio_p25` /
    `time_ratio_p75` (quartiles of the per-round ratios), from `results/timing/<preset>.json`
    (`python -m attnlib time`); None where the file lacks the model or measured another configuration of it
    (`wall_time_measured` False)."""
    import pandas as pd

    from attnlib import timing

    report = timing.load(results_dir, preset)
    measured = timing.wall_times(report, preset)
    ratios = (report or {}).get("ratios", {})
    rows = []
    for name in names:
        m, r = measured.get(name), ratios.get(name)
        if r is not None and r["baseline"] not in measured:
            r = None
        rows.append(
            {
                "experiment": name,
                "wall_time_measured": m is not None,
                "wall_time_ms": None if m is None else m["median_ms"],
                "wall_time_p25_ms": None if m is None else m["p25_ms"],
                "wall_time_p75_ms": None if m is None else m["p75_ms"],
                "time_ratio": None if m is None or r is None else r["ratio"],
                "time_ratio_p25": None if m is None or r is None else r["round_ratio_p25"],
                "time_ratio_p75": None if m is None or r is None else r["round_ratio_p75"],
            }
        )
    return pd.DataFrame(rows)


TABLE3_COLUMNS = (
    "model",
    "variant",
    "seeds",
    "accuracy",
    "accuracy_sd",
    "params",
    "wall_time_ms",
    "time_ratio",
    "status",
    "experiment",
    "detail",
)


def table3(results_dir: str | Path = "results", preset: str = "paper", *, data=None):
    """Table 3 of the [Re] report: each model beside its HA variant (model, variant normal/HA, seeds: the
    number of saved seeds, accuracy: their mean, accuracy_sd: their standard deviation (n − 1; None below 2),
    params, wall_time_ms: the median single-image forward pass of `python -m attnlib time` (None: not
    measured), time_ratio: HA / model, paired by round (`attnlib.timing.ratios`), status, experiment, detail).

    status: "complete" when at least one seed is; otherwise seed 0's status as in `collect` ("missing",
    "damaged", "stale"), with no numbers. detail names the seeds that are not used and why."""
    pairs = [(e.baseline, e.name) for e in experiments.EXPERIMENTS.values() if e.baseline]
    names = [n for pair in pairs for n in pair]
    df = collect(results_dir, preset, names, 0, data=data)
    seeds = seed_columns(results_dir, preset, names, data=data).set_index("experiment")
    times = timing_columns(results_dir, preset, names).set_index("experiment")
    df["variant"] = ["HA" if experiments.get(n).baseline else "normal" for n in df["experiment"]]
    df["model"] = [experiments.get(experiments.get(n).baseline or n).title for n in df["experiment"]]
    if "params" not in df:
        df["params"] = None
    for i, name in enumerate(df["experiment"]):
        row = seeds.loc[name]
        if row["seeds"]:  # at least one usable seed; detail names the seed folders that are not used
            if df.at[i, "status"] != "complete":  # seed 0 is not, another seed is
                df.at[i, "status"] = "complete"
                df.at[i, "params"] = _params_of_any_seed(results_dir, name, preset, row["seed_list"])
            df.at[i, "detail"] = row["seed_problems"]
    df["seeds"] = [int(seeds.loc[n, "seeds"]) for n in df["experiment"]]
    df["accuracy"] = [seeds.loc[n, "accuracy_mean"] for n in df["experiment"]]
    df["accuracy_sd"] = [seeds.loc[n, "accuracy_sd"] for n in df["experiment"]]
    for column in ("wall_time_ms", "time_ratio"):
        df[column] = [times.loc[n, column] for n in df["experiment"]]
    return df[list(TABLE3_COLUMNS)]


def _params_of_any_seed(results_dir, experiment: str, preset: str, seeds) -> int:
    path = run_dir(results_dir, experiment, preset, seeds[0])
    return json.loads((path / "metrics.json").read_text())["params"]


def table1(results_dir: str | Path = "results", preset: str = "paper", seed: int = 0, *, data=None):
    """Table 1 of Cordonnier et al.: ResNet18 and the paper's attention models (no HA); see `collect`."""
    names = [
        n for n, e in experiments.EXPERIMENTS.items() if e.family in ("resnet", "paper") and not e.baseline
    ]
    return collect(results_dir, preset, names, seed, data=data)


__all__ = [
    "DamagedResult",
    "MissingResult",
    "ResultExists",
    "RunLocked",
    "RunResult",
    "attention_summary",
    "check_writable",
    "collect",
    "inference_wall_time",
    "inspect_run",
    "load_run",
    "run_dir",
    "run_or_load",
    "seed_accuracies",
    "table1",
    "table3",
    "train_run",
]
