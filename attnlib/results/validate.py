"""What a saved result may hold: a results folder is untrusted input (people share, commit and pull it), so
every value a reader uses is checked here before `attnlib.results.load.inspect_run` calls the result complete.

- `files_problem`: metrics.json's "files" names only plain files of the run folder (no path, no link, no
  FIFO or device), covers every file the result needs (RESULT_FILES, and each of OPTIONAL_FILES present in
  the folder), and each matches its sha256 (read bounded: `attnlib.results.store.read_regular`).
- `history_problem`: metrics.json's test accuracy (and test loss) is the last row of the checksummed
  history.csv, and its row count the provenance's epochs_trained.
- `metrics_problem`: metrics.json's keys, and the type and range of its values and of every provenance field.
- `timing_problem`, `train_cost_problem`: a saved timing report (results/timing/PRESET.json), a saved
  train-cost report (results/train_cost/PRESET.json).

Each returns '' when all is well, else one line saying what is wrong (the result is then *damaged*)."""

from __future__ import annotations

import csv
import hashlib
import io
import json
import math
import re
from collections.abc import Callable
from pathlib import Path

import numpy as np

from attnlib.checks import MAX_SECONDS
from attnlib.checks import in_range as _int
from attnlib.checks import is_number as _number
from attnlib.checks import shown as _shown
from attnlib.results.store import read_regular

RESULT_FILES = ("config.json", "history.csv", "attention.npz")  # what every complete result holds
PROBE_FILE = "probe.npz"  # the standard attention probe (attnlib.measures.probe_file)
OPTIONAL_FILES = ("centers.npz", PROBE_FILE)  # listed in "files" whenever present in the folder
NOT_A_RESULT_FILE = ("metrics.json", "run.lock", "checkpoints")

MAX_PARAMS = 10**10  # 100x the largest network of either paper
MAX_WALL_MS = 10**6  # one image in over 16 minutes: no measurement of these networks
MAX_IMAGES = 10**8
MAX_EPOCHS = 10**5
MAX_STRING = 4096
_SHA256 = re.compile(r"[0-9a-f]{64}")


def _string(v) -> bool:
    return isinstance(v, str) and len(v) <= MAX_STRING


def _optional(ok: Callable[[object], bool]) -> Callable[[object], bool]:
    return lambda v: v is None or ok(v)


def _git(v) -> bool:
    return (
        isinstance(v, dict)
        and set(v) <= {"commit", "dirty"}
        and _optional(_string)(v.get("commit"))
        and (v.get("dirty") is None or isinstance(v.get("dirty"), bool))
    )


def _between(low: float, high: float = math.inf) -> Callable[[object], bool]:
    """A predicate: a finite number (not a bool) in [low, high] (`in_range` is that of integers)."""
    return lambda v: _number(v, low, high)


def _digests(v) -> bool:
    return isinstance(v, dict) and all(isinstance(k, str) and isinstance(d, str) for k, d in v.items())


# metrics.json is not covered by a checksum: every value a reader (tables, the book, the CLI) uses is checked,
# type and range, so that a hand-edited or absurd value is damage. {key: (ok, allowed)}
METRICS = {
    "test_accuracy": (_between(0, 1), "a number in [0, 1]"),
    "params": (_int(0, MAX_PARAMS), f"an integer in [0, {MAX_PARAMS:.0e}]"),
    "wall_time_ms": (_between(0, MAX_WALL_MS), f"a number in [0, {MAX_WALL_MS:.0e}]"),
    "provenance": (lambda v: isinstance(v, dict), "an object"),
    "fingerprint": (lambda v: isinstance(v, str) and re.fullmatch(r"[0-9a-f]{1,64}", v), "hex"),
    "files": (_digests, "an object of file names and sha256 digests"),
    "test_loss": (_between(0), "a number >= 0"),
    "train_accuracy": (_between(0, 1), "a number in [0, 1]"),
    "wall_time_std_ms": (_optional(_between(0, MAX_WALL_MS)), f"a number in [0, {MAX_WALL_MS:.0e}]"),
    "wall_time_reps": (_int(1, 10**7), "an integer >= 1"),
    "wall_time_warmup": (_int(0, 10**7), "an integer >= 0"),
    "wall_time_dtype": (_string, "a string"),
    "wall_time_device": (_string, "a string"),
}
REQUIRED = ("test_accuracy", "params", "wall_time_ms", "provenance", "fingerprint", "files")

# every field `attnlib.lab.run` writes in provenance (a field absent from older results is not required)
PROVENANCE = {
    "experiment": (_string, "a string"),
    "preset": (_string, "a string"),
    "seed": (_int(0, 2**32 - 1), "an integer in [0, 2**32)"),
    "epochs": (_int(1, MAX_EPOCHS), f"an integer in [1, {MAX_EPOCHS}]"),
    "epochs_trained": (_int(1, MAX_EPOCHS), f"an integer in [1, {MAX_EPOCHS}]"),
    "best_test_accuracy": (_between(0, 1), "a number in [0, 1]"),
    "dataset": (_string, "a string"),
    "data": (_string, "a string"),
    "train_images": (_int(1, MAX_IMAGES), f"an integer in [1, {MAX_IMAGES:.0e}]"),
    "test_images": (_int(1, MAX_IMAGES), f"an integer in [1, {MAX_IMAGES:.0e}]"),
    "device": (_string, "a string"),
    "threads": (_optional(_int(1, 4096)), "an integer in [1, 4096] or null"),
    "world_size": (_int(1, 4096), "an integer in [1, 4096]"),
    "bf16": (lambda v: isinstance(v, bool), "true or false"),
    "torch": (_string, "a string"),
    "python": (_string, "a string"),
    "git": (_git, 'an object {"commit": string or null, "dirty": bool or null}'),
    "git_at_write": (_git, 'an object {"commit": string or null, "dirty": bool or null}'),
    "hostname": (_optional(_string), "a string or null"),
    "train_seconds": (_between(0, MAX_SECONDS), f"a number in [0, {MAX_SECONDS:.0e}]"),
    "resumed_from": (_optional(_string), "a string or null"),
    "finished": (_string, "a string"),
    "command": (_optional(_string), "a string or null"),
}


def metrics_problem(metrics) -> str:
    """'' when metrics.json (parsed) holds every key of REQUIRED and each value of METRICS and PROVENANCE
    present has its type and range, else what is wrong (e.g. "test_accuracy is 'abc', not a number in
    [0, 1]")."""
    if not isinstance(metrics, dict):
        return f"holds a JSON {type(metrics).__name__}, not an object"
    wrong = _fields(metrics, METRICS, REQUIRED) or _fields(
        metrics["provenance"], PROVENANCE, (), "provenance"
    )
    if wrong:
        return wrong
    trained, epochs = metrics["provenance"].get("epochs_trained"), metrics["provenance"].get("epochs")
    if isinstance(trained, int) and isinstance(epochs, int) and trained > epochs:
        return f"provenance.epochs_trained is {trained}, more than provenance.epochs ({epochs})"
    return ""


def _fields(d, fields: dict, required, where: str = "") -> str:
    """'' when `d` is an object holding every key of `required` and each of its fields in `fields` ({name:
    (ok, allowed)}) is ok; else what is wrong, naming the field (`where`: the object's own name)."""
    if not isinstance(d, dict):
        return f"{where} is {_shown(d)}, not an object".lstrip()
    absent = [k for k in required if k not in d]
    if absent:
        return f"{where} lacks {', '.join(absent)}".lstrip()
    for key, (ok, allowed) in fields.items():
        if key in d and not ok(d[key]):
            return f"{where}.{key}".lstrip(".") + f" is {_shown(d[key])}, not {allowed}"
    return ""


def files_problem(path: str | Path, files: dict, blobs: dict[str, bytes]) -> str:
    """'' or what is wrong with metrics.json's "files" of the run folder `path` (see the module). `blobs`
    receives the bytes of every file read and checked ({name: bytes}), so that a reader parses exactly what
    was checked, without reading a file twice."""
    path = Path(path)
    for name in files:
        plain = name == Path(name).name and name not in ("", ".", "..") and "\x00" not in name
        if not plain or name.startswith(".") or name in NOT_A_RESULT_FILE:
            return f'metrics.json "files" names {_shown(name)}, not a result file of the run folder'
    absent = [n for n in RESULT_FILES if n not in files]
    absent += [n for n in OPTIONAL_FILES if n not in files and (path / n).is_file()]
    if absent:
        return f'metrics.json "files" lacks {", ".join(absent)} (it must vouch for every result file)'
    for name, digest in files.items():
        if not isinstance(digest, str) or not _SHA256.fullmatch(digest):
            return f'metrics.json "files" gives {name} the digest {_shown(digest)}, not a sha256'
        if not (path / name).exists() and not (path / name).is_symlink():
            return f"{path / name} is missing"
        data = read_regular(path / name)  # a link, FIFO, device or huge file: an OSError naming it
        if hashlib.sha256(data).hexdigest() != digest:
            return f"{path / name} does not match its checksum in metrics.json"
        wrong = _content_problem(name, data)  # a checksum forged with the file
        if wrong:
            return f"{path / name} {wrong}"
        blobs[name] = data
    return ""


def _content_problem(name: str, data: bytes) -> str:
    """'' when a result file parses as what readers take it for: an npz of numeric arrays (no pickles), a
    config.json object naming its experiment and preset."""
    if name.endswith(".npz"):
        try:
            with np.load(io.BytesIO(data), allow_pickle=False) as z:
                for key in z.files:
                    if z[key].dtype.kind not in "biuf":
                        return f"holds {key} of dtype {z[key].dtype}, not numbers"
        except Exception as err:  # noqa: BLE001 -- zip, format or pickle errors alike: not an npz of numbers
            return (
                f"is not an npz of numeric arrays ({type(err).__name__}: {' '.join(str(err).split())[:120]})"
            )
    elif name == "config.json":
        try:
            config = json.loads(data)
        except (ValueError, RecursionError):
            return "is not JSON"
        if not isinstance(config, dict) or not all(
            isinstance(config.get(k), str) for k in ("experiment", "preset", "family", "fingerprint")
        ):
            return "does not name its experiment, preset, family and fingerprint as strings"
        if not isinstance(config.get("model_resolved", {}), dict):
            return f"holds model_resolved {_shown(config['model_resolved'])}, not an object"
    return ""


def history_problem(path: str | Path, metrics: dict, data: bytes) -> str:
    """'' when metrics.json's test_accuracy (and test_loss, when given) equals the last row of history.csv
    (its checksum is checked first: `files_problem`) and provenance.epochs_trained its row count. `data`:
    history.csv's bytes as `files_problem` read them."""
    path = Path(path) / "history.csv"
    text = data.decode("utf-8", errors="replace")
    try:
        rows = list(csv.DictReader(io.StringIO(text)))
    except csv.Error as err:  # e.g. a field over the csv module's size limit: no history a run writes
        return f"{path} is not a CSV table ({err})"
    if not rows:
        return f"{path} has no rows"
    last = rows[-1]
    for key, column in (("test_accuracy", "test_acc"), ("test_loss", "test_loss")):
        if key not in metrics or column not in last:
            if key == "test_accuracy":
                return f"{path} has no {column} column"
            continue
        try:
            saved = float(last[column])
        except (TypeError, ValueError):
            return f"{path}: its last {column} is {_shown(last[column])}, not a number"
        if not math.isfinite(saved):
            return f"{path}: its last {column} is {saved} (the run diverged)"
        if not math.isclose(saved, metrics[key], rel_tol=1e-9, abs_tol=1e-12):
            return f"metrics.json {key} is {metrics[key]!r}, but the last row of {path} says {saved!r}"
    trained = metrics.get("provenance", {}).get("epochs_trained")
    if isinstance(trained, int) and trained != len(rows):
        return f"metrics.json provenance.epochs_trained is {trained}, but {path} has {len(rows)} rows"
    return ""


def _numbers(v) -> bool:
    return isinstance(v, list) and all(_number(x, 0) for x in v)


_TIMING = {
    "preset": (_string, "a string"),
    "quick": (lambda v: isinstance(v, bool), "true or false"),
    "finished": (_optional(_string), "a string"),
}
_TIMING_MACHINE = {
    "cpu": (_optional(_string), "a string"),
    "cpu_flags": (lambda v: isinstance(v, list) and all(_string(f) for f in v), "a list of strings"),
    "usable_cores": (_int(1, 1 << 16), "an integer >= 1"),
}
_TIMING_LOAD = {
    "shared": (lambda v: isinstance(v, bool), "true or false"),
    "load_before": (_numbers, "load averages"),
    "load_after": (_numbers, "load averages"),
}
_TIMING_PROTOCOL = {
    key: (_int(0 if key == "warmup" else 1, 10**7), "an integer")
    for key in ("threads", "warmup", "reps", "rounds")
}
_TIMED = {
    "family": (_string, "a string"),
    "model": (lambda v: isinstance(v, dict), "an object"),
    "params": (_int(0, MAX_PARAMS), "a parameter count"),
    "median_ms": (_between(0, MAX_WALL_MS), "milliseconds"),
    # quartiles interpolated from a few passes may fall below 0: finite is what the tables need
    **{key: (_between(-MAX_WALL_MS, MAX_WALL_MS), "milliseconds") for key in ("p25_ms", "p75_ms")},
}
_RATIO = {
    "baseline": (_string, "a string"),
    "ratio": (_between(0, 10**6), "a ratio"),
    **{key: (_between(-(10**6), 10**6), "a ratio") for key in ("round_ratio_p25", "round_ratio_p75")},
}


def timing_problem(report) -> str:
    """'' when a timing report (`attnlib.lab.timing`, results/timing/PRESET.json) holds what Table 3 and the
    chapters read, with its types and ranges; else what is wrong."""
    wrong = _fields(report, _TIMING, _TIMING)
    for key, fields in (("machine", _TIMING_MACHINE), ("load", _TIMING_LOAD), ("protocol", _TIMING_PROTOCOL)):
        wrong = wrong or _fields(report.get(key), fields, fields, key)
    for key, fields in (("models", _TIMED), ("ratios", _RATIO)):
        wrong = wrong or _fields(report.get(key), {}, (), key)
        if wrong:
            return wrong
        for name, entry in report[key].items():
            wrong = wrong or _fields(entry, fields, fields, f"{key}.{name}")
    return wrong


_OBJECT = (lambda v: isinstance(v, dict), "an object")
_TRAIN_COST_REQUIRED = ("models", "ratios", "machine", "protocol")
_TRAIN_COST = {key: _OBJECT for key in (*_TRAIN_COST_REQUIRED, "load", "git")}
_TRAIN_COST_MODEL = {
    "peak_mib": (_between(0), "a number of MiB"),
    "epoch_s": (_between(0, MAX_SECONDS), "a number of seconds"),
    "batch": (_int(1, MAX_IMAGES), "a batch size"),
}
_TRAIN_COST_RATIO = {key: (_between(0), "a number >= 0") for key in ("time", "memory")}


def train_cost_problem(report) -> str:
    """'' when a train-cost report (`attnlib.lab.train_cost`, results/train_cost/PRESET.json) holds what the
    ledger reads (`attnlib.analysis.costs`): per HA pair (ratios.NAME_ha) the ratios time and memory and both
    its models, every model with its peak_mib, epoch_s and batch, the machine's fields typed; else what is
    wrong."""
    wrong = _fields(report, _TRAIN_COST, _TRAIN_COST_REQUIRED)
    wrong = wrong or _fields(report["machine"], _TIMING_MACHINE, (), "machine")
    for name, ratio in ({} if wrong else report["ratios"]).items():
        wrong = wrong or _fields(ratio, _TRAIN_COST_RATIO, _TRAIN_COST_RATIO, f"ratios.{name}")
        wrong = wrong or _fields(report["models"], {}, (name.removesuffix("_ha"), name), "models")
    for name, model in ({} if wrong else report["models"]).items():
        wrong = wrong or _fields(model, _TRAIN_COST_MODEL, _TRAIN_COST_MODEL, f"models.{name}")
    return wrong
