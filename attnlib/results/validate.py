"""What a saved result may hold: a results folder is untrusted input (people share, commit and pull it), so
every value a reader uses is checked here before `attnlib.results.load.inspect_run` calls the result complete.

- `files_problem`: metrics.json's "files" names only plain files of the run folder (no path, no link, no
  FIFO or device), covers every file the result needs (RESULT_FILES, and each of OPTIONAL_FILES present in
  the folder), and each matches its sha256 (read bounded: `attnlib.results.store.read_regular`).
- `history_problem`: metrics.json's test accuracy (and test loss) is the last row of the checksummed
  history.csv, and its row count the provenance's epochs_trained.
- `schema_problem`: a JSON document against its format in schema.yaml (JSON Schema: the keys, and the type
  and range of every value a reader uses): metrics.json (`metrics_problem` adds that no more epochs were
  trained than planned), a timing report (results/timing/PRESET.json: "timing") and a train-cost report
  (results/train_cost/PRESET.json: `train_cost_problem` adds that both models of each HA pair are there).

Each returns '' when all is well, else one line saying what is wrong (the result is then *damaged*)."""

from __future__ import annotations

import csv
import hashlib
import io
import json
import math
import re
from pathlib import Path

import numpy as np
import yaml
from jsonschema import Draft202012Validator, validators

from attnlib.checks import is_number, shown
from attnlib.results.store import read_npz, read_regular

RESULT_FILES = ("config.json", "history.csv", "attention.npz")  # what every complete result holds
PROBE_FILE = "probe.npz"  # the standard attention probe (attnlib.measures.probe_file)
OPTIONAL_FILES = ("centers.npz", PROBE_FILE)  # listed in "files" whenever present in the folder
NOT_A_RESULT_FILE = ("metrics.json", "run.lock", "checkpoints")

_SHA256 = re.compile(r"[0-9a-f]{64}")
# What a result's arrays may hold that is not finite: the probe's layer similarity σ_l compares layer l with
# layer l − 1, so the first layer's (index 0 of init_similarity / end_similarity) has none and is NaN by design
# (attnlib.measures.probe_heads; every saved probe.npz holds it). Any other NaN or inf makes a result damaged.
NOT_FINITE_BY_DESIGN = {(PROBE_FILE, "init_similarity"), (PROBE_FILE, "end_similarity")}


# the formats of metrics.json and of the timing and train-cost reports, as JSON Schema (schema.yaml); its checker
# takes an integer to be an int (not a bool, not 1.0) and a number to be finite (no NaN, no inf)
SCHEMAS = yaml.safe_load((Path(__file__).parent / "schema.yaml").read_text(encoding="utf-8"))["$defs"]
_TYPES = Draft202012Validator.TYPE_CHECKER.redefine_many(
    {
        "integer": lambda _, v: isinstance(v, int) and not isinstance(v, bool),
        "number": lambda _, v: is_number(v),
    }
)
_Checker = validators.extend(Draft202012Validator, type_checker=_TYPES)


def schema_problem(document, name: str) -> str:
    """'' when `document` (parsed JSON) is what SCHEMAS[name] allows, else its first problem in one line: a
    missing key as "PATH lacks KEY", anything else as "PATH is VALUE, not DESCRIPTION" for the innermost value
    with a description on the way to it (e.g. "provenance.seed is -1, not an integer in [0, 2**32)")."""
    error = next(_Checker(SCHEMAS[name]).iter_errors(document), None)
    if error is None:
        return ""
    node, path, value, said = SCHEMAS[name], [], document, None
    keys = list(error.schema_path)[:-1]  # the last is the keyword that failed
    while True:  # down the schema and the document together
        if "description" in node:
            said = (".".join(path), value, node["description"])
        if not keys:
            break
        key = keys.pop(0)
        step = keys.pop(0) if key == "properties" else error.absolute_path[len(path)]
        node = node[key][step] if key == "properties" else node[key]  # or additionalProperties / items
        path.append(str(step))
        value = value[step]
    if error.validator == "required":
        absent = [k for k in node["required"] if k not in value]
        return f"{'.'.join(path)} lacks {', '.join(absent)}".lstrip()
    if said is None:  # no description on the way (a schema.yaml without one at its root)
        return " ".join(error.message.split())
    where, value, description = said
    return f"{where} is {shown(value)}, not {description}".lstrip()


def metrics_problem(metrics) -> str:
    """'' when metrics.json (parsed) is what SCHEMAS["metrics"] allows (every required key; the type and range
    of each value and of every provenance field) and its provenance trained no more epochs than it planned,
    else what is wrong (e.g. "test_accuracy is 'abc', not a number in [0, 1]")."""
    wrong = schema_problem(metrics, "metrics")
    if wrong:
        return wrong
    trained, epochs = metrics["provenance"].get("epochs_trained"), metrics["provenance"].get("epochs")
    if isinstance(trained, int) and isinstance(epochs, int) and trained > epochs:
        return f"provenance.epochs_trained is {trained}, more than provenance.epochs ({epochs})"
    return ""


def files_problem(path: str | Path, files: dict, blobs: dict[str, bytes]) -> str:
    """'' or what is wrong with metrics.json's "files" of the run folder `path` (see the module). `blobs`
    receives the bytes of every file read and checked ({name: bytes}), so that a reader parses exactly what
    was checked, without reading a file twice."""
    path = Path(path)
    for name in files:
        plain = name == Path(name).name and name not in ("", ".", "..") and "\x00" not in name
        if not plain or name.startswith(".") or name in NOT_A_RESULT_FILE:
            return f'metrics.json "files" names {shown(name)}, not a result file of the run folder'
    absent = [n for n in RESULT_FILES if n not in files]
    absent += [n for n in OPTIONAL_FILES if n not in files and (path / n).is_file()]
    if absent:
        return f'metrics.json "files" lacks {", ".join(absent)} (it must vouch for every result file)'
    for name, digest in files.items():
        if not isinstance(digest, str) or not _SHA256.fullmatch(digest):
            return f'metrics.json "files" gives {name} the digest {shown(digest)}, not a sha256'
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
    """'' when a result file parses as what readers take it for: an npz of finite numeric arrays (no pickles,
    every member's size bounded before it is read: `read_npz`; NaN only where NOT_FINITE_BY_DESIGN allows), a
    config.json object naming its experiment and preset."""
    if name.endswith(".npz"):
        try:
            arrays = read_npz(data)
        except Exception as err:  # noqa: BLE001 -- zip, format or header errors alike: not an npz of numbers
            said = str(err) if isinstance(err, ValueError) else f"{type(err).__name__}: {err}"
            return f"is not an npz of numeric arrays ({' '.join(said.split())[:160]})"
        return _not_finite(name, arrays)
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
            return f"holds model_resolved {shown(config['model_resolved'])}, not an object"
    return ""


def _not_finite(name: str, arrays: dict[str, np.ndarray]) -> str:
    """'' when every value of a result file's arrays is finite, but for the NaN of NOT_FINITE_BY_DESIGN."""
    for key, a in arrays.items():
        if a.dtype.kind != "f":
            continue
        if (name, key) in NOT_FINITE_BY_DESIGN and a.ndim == 1:  # the first layer's NaN, nothing else
            if np.isinf(a[:1]).any():
                return f"holds {key} whose first value is {a[0]}, not NaN or a finite number"
            a = a[1:]
        bad = ~np.isfinite(a)
        if bad.any():
            return f"holds {key} with {int(bad.sum())} of {a.size} values not finite (the first: {a[bad][0]})"
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
            return f"{path}: its last {column} is {shown(last[column])}, not a number"
        if not math.isfinite(saved):
            return f"{path}: its last {column} is {saved} (the run diverged)"
        if not math.isclose(saved, metrics[key], rel_tol=1e-9, abs_tol=1e-12):
            return f"metrics.json {key} is {metrics[key]!r}, but the last row of {path} says {saved!r}"
    trained = metrics.get("provenance", {}).get("epochs_trained")
    if isinstance(trained, int) and trained != len(rows):
        return f"metrics.json provenance.epochs_trained is {trained}, but {path} has {len(rows)} rows"
    return ""


def train_cost_problem(report) -> str:
    """'' when a train-cost report (`attnlib.lab.train_cost`, results/train_cost/PRESET.json) holds what the
    ledger reads (`attnlib.analysis.costs`): per HA pair (ratios.NAME_ha) the ratios time, memory and step_memory
    and both its models, every model with its memory parts (weights, optimizer, gradients, peak, total), epoch_s
    and batch, the machine's fields typed
    (SCHEMAS["train_cost"]); else what is wrong."""
    wrong = schema_problem(report, "train_cost")
    for name in {} if wrong else report["ratios"]:
        absent = [m for m in (name.removesuffix("_ha"), name) if m not in report["models"]]
        wrong = wrong or (f"models lacks {', '.join(absent)}" if absent else "")
    return wrong
