"""attnlib.results.validate through attnlib.results.load (inspect_run / load_run) and the tables: a results folder is untrusted
input. "files" names only plain files of the run folder and covers the result; reads are bounded and never
block; metrics.json agrees with the checksummed history.csv; every provenance field has its type and range;
a result that fails is *damaged*, shown as such, never as a number."""

from __future__ import annotations

import hashlib
import io
import json
import os
import time
import zipfile
from pathlib import Path

import numpy as np
import pytest

from attnlib.lab.run import run_or_load
from attnlib.results.config import run_dir
from attnlib.results.load import DamagedResult, inspect_run, load_run, read
from attnlib.results.tables import collect, table3
from attnlib.results.validate import files_problem, history_problem, metrics_problem


def _edit(folder, change) -> None:
    metrics = json.loads((folder / "metrics.json").read_text())
    change(metrics)
    (folder / "metrics.json").write_text(json.dumps(metrics))


def _assert_damaged(root, folder, fragment: str) -> None:
    start = time.monotonic()
    status, detail = inspect_run(folder)
    assert status == "damaged" and fragment in detail and "\n" not in detail, detail
    row = table3(root, "smoke").set_index("experiment").loc["vit"]  # shown as damaged, never as a number
    assert row["status"] == "damaged" and row[["accuracy", "params", "wall_time_ms"]].isna().all()
    with pytest.raises(DamagedResult):
        run_or_load("vit", "smoke", results_dir=root, train_missing=False)
    assert time.monotonic() - start < 30  # no read of /dev/zero, no wait on a FIFO


@pytest.mark.parametrize(
    ("name", "fragment"),
    [
        ("/dev/zero", "names '/dev/zero', not a result file"),
        ("../../outside.json", "names '../../outside.json'"),
        ("checkpoints", "names 'checkpoints'"),
        ("metrics.json", "names 'metrics.json'"),
        (".hidden", "names '.hidden'"),
    ],
)
def test_files_may_name_only_result_files_of_the_run_folder(copy, name, fragment):
    folder = run_dir(copy, "vit", "smoke")
    _edit(folder, lambda m: m["files"].__setitem__(name, "0" * 64))
    _assert_damaged(copy, folder, fragment)


@pytest.mark.parametrize("dropped", ["config.json", "history.csv", "attention.npz", "all"])
def test_files_must_cover_every_result_file(copy, dropped):
    folder = run_dir(copy, "vit", "smoke")
    _edit(folder, lambda m: m["files"].clear() if dropped == "all" else m["files"].pop(dropped))
    _assert_damaged(copy, folder, "lacks " + ("config.json" if dropped == "all" else dropped))


def test_files_must_cover_an_optional_file_present_in_the_folder(copy):
    """probe.npz (or centers.npz) in the folder but not vouched for: damaged (coordinated by name only)."""
    folder = run_dir(copy, "vit", "smoke")
    metrics = json.loads((folder / "metrics.json").read_text())
    if "probe.npz" in metrics["files"]:
        _edit(folder, lambda m: m["files"].pop("probe.npz"))
    else:
        (folder / "probe.npz").write_bytes(b"not vouched for")
    _assert_damaged(copy, folder, "lacks probe.npz")


@pytest.mark.parametrize("name", ["metrics.json", "history.csv"])
def test_a_result_file_that_is_a_folder_is_damaged_naming_its_path(copy, name):
    """Not "3 is unreadable (Is a directory)": the line names the path, not the descriptor it was read by."""
    folder = run_dir(copy, "vit", "smoke")
    (folder / name).unlink()
    (folder / name).mkdir()
    _assert_damaged(copy, folder, f"{folder / name} is unreadable (is a folder, not a file)")
    assert read("vit", "smoke", results_dir=copy).detail.startswith(str(folder / name))


@pytest.mark.parametrize("kind", ["fifo", "link", "dev"])
def test_a_result_file_that_is_no_regular_file_is_damaged_without_blocking(copy, kind, tmp_path):
    folder = run_dir(copy, "vit", "smoke")
    (folder / "history.csv").unlink()
    if kind == "fifo":
        os.mkfifo(folder / "history.csv")
    elif kind == "link":
        (folder / "history.csv").symlink_to(tmp_path / "elsewhere.csv")
        (tmp_path / "elsewhere.csv").write_text("epoch,test_acc\n1,0.5\n")
    else:
        (folder / "history.csv").symlink_to("/dev/zero")
    _assert_damaged(copy, folder, "history.csv is unreadable")


def _forge(folder, name: str, data: bytes) -> None:
    """Replace a result file and forge its checksum in metrics.json (what a hostile copy can do)."""
    (folder / name).write_bytes(data)
    _edit(folder, lambda m: m["files"].__setitem__(name, hashlib.sha256(data).hexdigest()))


def test_test_accuracy_must_equal_the_last_row_of_the_history(copy):
    folder = run_dir(copy, "vit", "smoke")
    _edit(folder, lambda m: m.__setitem__("test_accuracy", 0.999))
    _assert_damaged(copy, folder, "metrics.json test_accuracy is 0.999, but the last row of")


def test_a_history_whose_last_test_loss_is_not_finite_is_damaged(copy):
    folder = run_dir(copy, "vit", "smoke")
    lines = (folder / "history.csv").read_text().splitlines()
    header = lines[0].split(",")
    last = lines[-1].split(",")
    last[header.index("test_loss")] = "nan"
    _forge(folder, "history.csv", "\n".join([*lines[:-1], ",".join(last)]).encode() + b"\n")
    _assert_damaged(copy, folder, "its last test_loss is nan (the run diverged)")


@pytest.mark.parametrize(
    ("name", "data", "fragment"),
    [
        ("attention.npz", b"garbage, not a zip", "attention.npz is not an npz of numeric arrays"),
        ("config.json", b"[1, 2]", "config.json does not name its experiment"),
        ("config.json", b"{not json", "config.json is not JSON"),
        (
            "config.json",
            b'{"experiment": "vit", "preset": "smoke", "family": "vit", "fingerprint": "0", "model_resolved": 3}',
            "config.json holds model_resolved 3, not an object",
        ),
        # a field over the csv module's size limit: csv.Error, which no reader caught before
        ("history.csv", b'epoch,test_acc\n1,"' + b"x" * 200_000 + b'"\n', "history.csv is not a CSV table"),
    ],
)
def test_a_forged_result_file_is_damaged(copy, name, data, fragment):
    """A garbage file with a forged checksum: damaged (inspect_run parses what readers parse)."""
    folder = run_dir(copy, "vit", "smoke")
    _forge(folder, name, data)
    _assert_damaged(copy, folder, fragment)


def _npz(arrays: dict) -> bytes:
    buf = io.BytesIO()
    np.savez_compressed(buf, **arrays)
    return buf.getvalue()


def _arrays(folder, name: str) -> dict:
    with np.load(folder / name) as z:
        return dict(z)


def _not_finite(arrays: dict, key: str | None, value: float) -> dict:
    """`arrays` with every float member (or only `key`) filled with `value`."""
    out = {k: a.copy() for k, a in arrays.items()}
    for k, a in out.items():
        if a.dtype.kind == "f" and key in (None, k):
            a[...] = value
    return out


@pytest.mark.parametrize(
    ("name", "key", "value", "fragment"),
    [
        (
            "probe.npz",
            None,
            float("nan"),
            "probe.npz holds pixels_per_token with 1 of 1 values not finite (the first: nan)",
        ),
        ("attention.npz", None, float("inf"), "values not finite (the first: inf)"),
        ("probe.npz", "end_peak", float("-inf"), "holds end_peak with"),
        ("probe.npz", "init_similarity", float("nan"), "holds init_similarity with"),  # NaN past layer 0
    ],
)
def test_non_finite_arrays_are_damaged(copy, name, key, value, fragment):
    """NaN or inf in a result's arrays is refused, as in history.csv or metrics.json."""
    folder = run_dir(copy, "vit", "smoke")
    _forge(folder, name, _npz(_not_finite(_arrays(folder, name), key, value)))
    _assert_damaged(copy, folder, fragment)


def test_the_first_layers_similarity_is_nan_by_design(copy):
    """The one NaN runs save (the probe's σ of layer 0, which has no layer before it): complete with it, not
    with an inf there."""
    folder = run_dir(copy, "vit", "smoke")
    arrays = _arrays(folder, "probe.npz")
    assert np.isnan(arrays["init_similarity"][0]) and np.isnan(arrays["end_similarity"][0])
    assert np.isfinite(arrays["init_similarity"][1:]).all()
    assert inspect_run(folder) == ("complete", "")
    arrays["end_similarity"][0] = np.inf
    _forge(folder, "probe.npz", _npz(arrays))
    _assert_damaged(copy, folder, "holds end_similarity whose first value is inf")


def _npz_of_headers(headers: dict, extra: dict | None = None) -> bytes:
    """An npz whose members hold only an .npy header ({key: header dict}), and `extra` members as given."""
    from numpy.lib import format as npy

    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as archive:
        for key, header in headers.items():
            member = io.BytesIO()
            npy.write_array_header_1_0(member, header)
            archive.writestr(f"{key}.npy", member.getvalue() + b"\0" * 64)
        for name, data in (extra or {}).items():
            archive.writestr(name, data)
    return buf.getvalue()


@pytest.mark.parametrize(
    ("header", "extra", "fragment"),
    [  # 8 GiB declared in a file of a few hundred bytes
        (
            {"descr": "<f8", "fortran_order": False, "shape": (2**30,)},
            None,
            "declares (1073741824,) of float64",
        ),
        ({"descr": "|O", "fortran_order": False, "shape": (3,)}, None, "is of dtype object, not numbers"),
        (
            {"descr": "<f8", "fortran_order": False, "shape": (2,)},
            {"notes.txt": b"x"},
            "'notes.txt' is not an .npy",
        ),
    ],
)
def test_npz_members_are_bounded_before_they_are_read(copy, monkeypatch, header, extra, fragment):
    """Each member's declared shape and dtype are checked against what it holds before np.load allocates:
    without a memory limit a forged 8 GiB header is refused, never allocated (numpy's read_array not called)."""
    from numpy.lib import format as npy

    calls = []
    real = npy.read_array
    monkeypatch.setattr(npy, "read_array", lambda *a, **k: calls.append(1) or real(*a, **k))
    folder = run_dir(copy, "vit", "smoke")
    _forge(folder, "attention.npz", _npz_of_headers({"maps": header}, extra))
    status, detail = inspect_run(folder)
    assert status == "damaged" and fragment in detail and "\n" not in detail, detail
    assert calls == []  # refused from its header alone
    _assert_damaged(copy, folder, "attention.npz is not an npz of numeric arrays")


def test_load_run_reports_a_checked_file_that_does_not_parse_as_damaged(copy, monkeypatch):
    """The backstop: a checked file that does not parse (a check missed it: here the content check is
    switched off and the file forged with its checksum) raises DamagedResult in one line, not the reader's
    traceback."""
    from attnlib.results import validate

    monkeypatch.setattr(validate, "_content_problem", lambda name, data: "")
    folder = run_dir(copy, "vit", "smoke")
    _forge(folder, "attention.npz", b"garbage, not a zip")
    assert inspect_run(folder)[0] == "damaged"
    with pytest.raises(DamagedResult) as err:
        load_run(folder)
    assert "does not parse" in str(err.value) and "\n" not in str(err.value)


@pytest.mark.parametrize(
    ("key", "value", "fragment"),
    [
        ("params", 10**40, "params is 10000000000"),
        ("wall_time_ms", 1e308, "wall_time_ms is 1e+308"),
        ("provenance.epochs_trained", "many", "provenance.epochs_trained is 'many'"),
        ("provenance.world_size", "2", "provenance.world_size is '2'"),
        ("provenance.seed", -1, "provenance.seed is -1"),
        ("provenance.bf16", "yes", "provenance.bf16 is 'yes'"),
        ("provenance.git", {"commit": 3}, "provenance.git is {'commit': 3}"),
        ("provenance.dataset", "x" * 5000, "provenance.dataset is 'xxx"),
        ("provenance.train_seconds", float("inf"), "provenance.train_seconds is inf"),
        ("provenance.hostname", ["vm"], "provenance.hostname is ['vm']"),
    ],
)
def test_provenance_types_and_ranges_are_checked(copy, key, value, fragment):
    folder = run_dir(copy, "vit", "smoke")

    def change(m):
        if key.startswith("provenance."):
            m["provenance"][key.split(".")[1]] = value
        else:
            m[key] = value

    _edit(folder, change)
    _assert_damaged(copy, folder, fragment)


def test_a_huge_integer_is_damaged_naming_its_key(copy):
    """A 4,200-digit params (JSON parses it; math.isfinite would raise OverflowError on it): damaged, in one
    line naming params, never an exception out of read or the tables."""
    folder = run_dir(copy, "vit", "smoke")
    text = (folder / "metrics.json").read_text()
    metrics = json.loads(text)
    (folder / "metrics.json").write_text(
        text.replace(f'"params": {metrics["params"]}', '"params": 9' + "0" * 4199)
    )
    assert len(str(json.loads((folder / "metrics.json").read_text())["params"])) == 4200
    _assert_damaged(copy, folder, "params is 9000")
    saved = read("vit", "smoke", results_dir=copy)
    assert saved.status == "damaged" and "params is" in saved.detail and len(saved.detail) < 300


def test_deeply_nested_metrics_are_damaged_in_one_line(copy):
    folder = run_dir(copy, "vit", "smoke")
    (folder / "metrics.json").write_text("[" * 200_000 + "]" * 200_000)
    _assert_damaged(copy, folder, "nested")
    nested: list = []
    for _ in range(40):  # parses, but deeper than any result file
        nested = [nested]
    (folder / "metrics.json").write_text(json.dumps({"files": {"a": nested}}))
    _assert_damaged(copy, folder, "nested deeper")


def test_every_saved_result_of_this_repository_passes(trained):
    """The checks refuse nothing that `train_run` writes: the suite's smoke results pass each of them."""
    for name in ("vit", "vit_ha"):
        folder = run_dir(trained, name, "smoke")
        metrics = json.loads((folder / "metrics.json").read_text())
        assert metrics_problem(metrics) == ""
        blobs: dict[str, bytes] = {}
        assert files_problem(folder, metrics["files"], blobs) == ""
        assert history_problem(folder, metrics, blobs["history.csv"]) == ""


# --------------------------------------------------------------------------- provenance: what it publishes
def test_provenance_names_no_absolute_path_and_no_host_unless_asked(trained, tmp_path, monkeypatch):
    """A new run's provenance: its dataset and command relative to the repository, no host name; with
    ATTNLIB_RECORD_HOST=1 the host is recorded. (The suite's runs are synthetic: a folder copy is shown
    through portable_path below.)"""
    import socket

    from attnlib.lab.run import command_line, train_run
    from attnlib.results.config import portable_path

    prov = json.loads((run_dir(trained, "vit", "smoke") / "metrics.json").read_text())["provenance"]
    assert "hostname" not in prov
    assert not any(part.startswith("/") for part in prov["command"].split()), prov["command"]
    monkeypatch.setenv("ATTNLIB_RECORD_HOST", "1")
    result = train_run("resnet18", "smoke", results_dir=tmp_path, progress=False)
    assert result.metrics["provenance"]["hostname"] == socket.gethostname()
    repo = Path(__file__).resolve().parent.parent
    assert portable_path(f"imagefolder-jpeg:{repo.parent}/shared/data/cifar10") == (
        "imagefolder-jpeg:../shared/data/cifar10"
    )
    assert command_line(
        [str(repo / "attnlib" / "__main__.py"), "train", "vit", "--results-dir", str(repo / "r")]
    ) == ("python -m attnlib train vit --results-dir r")
    monkeypatch.setenv("ATTNLIB_RECORD_HOST", "perhaps")
    with pytest.raises(ValueError, match="ATTNLIB_RECORD_HOST"):
        train_run("resnet18", "smoke", results_dir=tmp_path / "other", progress=False)


def test_older_results_with_absolute_paths_stay_readable_and_are_shown_relative(copy):
    folder = run_dir(copy, "vit", "smoke")
    repo = Path(__file__).resolve().parent.parent
    _edit(folder, lambda m: m["provenance"].update(dataset=f"imagefolder-jpeg:{repo}/data", hostname="vm"))
    assert inspect_run(folder)[0] == "complete"
    row = collect(copy, "smoke", ["vit"]).set_index("experiment").loc["vit"]
    assert row["status"] == "complete" and row["dataset"] == "imagefolder-jpeg:data"


def _undescribed(node, path: str = ""):
    """The paths of the values below `node` that the checker would name by an ancestor's description although
    they are checked one by one: an object whose values have descriptions must give every value one (an
    object none of whose values has one, as git's {commit, dirty}, is described as a whole)."""
    children = {f"{path}.{k}": v for k, v in node.get("properties", {}).items()}
    children |= {
        f"{path}.<{k}>": node[k] for k in ("additionalProperties", "items") if isinstance(node.get(k), dict)
    }
    if any("description" in child for child in children.values()):
        for where, child in children.items():
            if "description" not in child:
                yield where
            yield from _undescribed(child, where)


def test_the_schema_is_json_schema_and_every_value_has_words():
    """schema.yaml is a valid JSON Schema (draft 2020-12), and every value it checks has a description on its
    way, so that a problem is always said as "PATH is VALUE, not DESCRIPTION", never in jsonschema's words."""
    from jsonschema import Draft202012Validator

    from attnlib.results.validate import SCHEMAS

    for name in ("metrics", "timing", "train_cost"):
        Draft202012Validator.check_schema(SCHEMAS[name])
        assert "description" in SCHEMAS[name] and list(_undescribed(SCHEMAS[name], name)) == []


@pytest.mark.parametrize(
    ("key", "value", "message"),
    [
        (
            "provenance.epochs",
            4.0,
            "provenance.epochs is 4.0, not an integer in [1, 100000]",
        ),  # JSON Schema: 4.0
        ("provenance.world_size", True, "provenance.world_size is True, not an integer in [1, 4096]"),
        ("test_loss", float("inf"), "test_loss is inf, not a number >= 0"),
        (
            "provenance.git",
            {"commit": "abc", "at": 1},
            "provenance.git is {'commit': 'abc', 'at': 1}, not an object {\"commit\": string or null, \"dirty\": "
            "bool or null}",
        ),
        ("wall_time_std_ms", None, ""),  # null allowed
        ("provenance.threads", None, ""),
    ],
)
def test_the_schema_checker_takes_integers_and_numbers_strictly(key, value, message):
    """attnlib's checker: an integer is an int (not 1.0, not a bool), a number is finite; a saved run's
    metrics.json passes, and each change is said naming the field (or passes where null is allowed)."""
    from attnlib.results.validate import schema_problem

    metrics = json.loads(Path("results/vit/budget/metrics.json").read_text())
    assert schema_problem(metrics, "metrics") == ""
    where = metrics["provenance"] if key.startswith("provenance.") else metrics
    where[key.removeprefix("provenance.")] = value
    assert schema_problem(metrics, "metrics") == message


def test_saved_reports_pass_their_schemas():
    """The committed timing and train-cost reports are what their schemas allow (else the book would show
    them as not measured)."""
    from attnlib.results.validate import schema_problem, train_cost_problem

    assert schema_problem(json.loads(Path("results/timing/budget.json").read_text()), "timing") == ""
    assert train_cost_problem(json.loads(Path("results/train_cost/budget.json").read_text())) == ""
