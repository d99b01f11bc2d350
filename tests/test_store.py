"""attnlib.util's writers on hostile results folders: writes never follow a symbolic link out of the results folder
(run.lock, checkpoints/, the queue's logs, every atomic write), reads are bounded and refuse what is not a
regular file (a FIFO, a device), and JSON nested too deeply is refused in one line."""

from __future__ import annotations

import errno
import json
import os
import sys
from pathlib import Path

import pytest
import torch

from attnlib.lab.lock import RunLock
from attnlib.lab.queue import Job, Queue
from attnlib.lab.run import train_run
from attnlib.results.config import run_dir
from attnlib.results.store import (
    MAX_JSON_DEPTH,
    UnsafeFolder,
    check_no_links,
    read_json,
    read_npz,
    read_regular,
    sha256,
)
from attnlib.util import atomic_write, temp_name, write_json, write_npz


@pytest.fixture
def outside(tmp_path):
    """A file outside the results folder that a link points at, and its content (must stay unchanged)."""
    target = tmp_path / "outside" / "precious.txt"
    target.parent.mkdir()
    target.write_text("precious\n")
    return target


# ------------------------------------------------------------------------------------ writes: no links
def test_linked_run_lock_is_refused_and_its_target_untouched(tmp_path, outside):
    folder = tmp_path / "run"
    folder.mkdir()
    (folder / "run.lock").symlink_to(outside)
    with pytest.raises(UnsafeFolder) as err:
        RunLock(folder).acquire()
    assert err.value.errno == errno.ELOOP and err.value.filename == str(folder / "run.lock")
    assert outside.read_text() == "precious\n"


@pytest.mark.parametrize("link", ["run.lock", "checkpoints", "checkpoints/last.pt", "history.csv", "folder"])
def test_train_refuses_a_run_folder_holding_a_link(tmp_path, outside, link, cli):
    """Before the data is read or anything written: one line naming the link, exit 5 (a file-system error)."""
    results = tmp_path / "results"
    folder = run_dir(results, "resnet18", "smoke")
    if link == "folder":  # the run folder itself a link to a folder outside
        folder.parent.mkdir(parents=True)
        folder.symlink_to(outside.parent, target_is_directory=True)
    else:
        (folder / "checkpoints").mkdir(parents=True)
        if link == "checkpoints":
            (folder / "checkpoints").rmdir()
            folder.joinpath(link).symlink_to(outside.parent, target_is_directory=True)
        else:
            folder.joinpath(link).symlink_to(outside)
    before = sorted(p.name for p in outside.parent.iterdir())
    with pytest.raises(UnsafeFolder, match="is a symbolic link; refused"):
        train_run("resnet18", "smoke", results_dir=results, progress=False)
    code, _, err = cli(["train", "resnet18", "--preset", "smoke", "--results-dir", str(results)])
    assert code == 5 and err.count("\n") == 1 and "is a symbolic link" in err, err
    assert outside.read_text() == "precious\n"
    assert sorted(p.name for p in outside.parent.iterdir()) == before  # no last.pt landed outside


def _swap_for_link(folder: Path, target: Path) -> Path:
    """`folder` moved aside (to FOLDER.moved) and a link to `target` put in its place, as a hostile process
    sharing the results would while a run writes. Returns where the folder went."""
    moved = folder.with_name(folder.name + ".moved")
    folder.rename(moved)
    folder.symlink_to(target, target_is_directory=True)
    return moved


@pytest.mark.parametrize("swapped", ["checkpoints", "run folder"])
def test_a_link_swapped_in_while_a_run_trains_is_refused_not_written_through(tmp_path, outside, swapped):
    """The run folder or its checkpoints/ replaced by a link after the first step: the next checkpoint is
    refused in one line (UnsafeFolder naming the link), nothing lands in the folder the link names."""
    results = tmp_path / "results"
    folder = run_dir(results, "resnet18", "smoke")
    (outside.parent / "checkpoints").mkdir()  # where a link to the outside would take the checkpoints
    link = folder / "checkpoints" if swapped == "checkpoints" else folder
    target = outside.parent / "checkpoints" if swapped == "checkpoints" else outside.parent

    def swap(epoch, step, x, y):
        if link.is_dir() and not link.is_symlink():  # once it exists (checkpoints/: after the first save)
            _swap_for_link(link, target)

    before = sorted(str(p.relative_to(outside.parent)) for p in outside.parent.rglob("*"))
    with pytest.raises(UnsafeFolder, match="is a symbolic link; refused") as err:
        train_run("resnet18", "smoke", results_dir=results, progress=False, on_step=swap, checkpoint_every=0)
    assert err.value.filename == str(link) and "\n" not in str(err.value)
    assert sorted(str(p.relative_to(outside.parent)) for p in outside.parent.rglob("*")) == before
    assert outside.read_text() == "precious\n"


def test_a_link_swapped_in_during_a_checkpoint_write_is_never_written_through(tmp_path, outside):
    """The swap at a known point inside the write (after the new checkpoint's bytes, before previous.pt and
    the rename): the write finishes in the folder it began in, by its descriptor; the link's target is
    untouched."""
    from attnlib.train import Checkpoints

    folder = tmp_path / "results" / "vit" / "smoke" / "checkpoints"
    target = outside.parent / "checkpoints"
    target.mkdir()
    (target / "last.pt").write_text("precious\n")
    checkpoints = Checkpoints(folder, "f")
    checkpoints.save({"epoch": 1})
    keep = Checkpoints._keep_previous

    def swap_then_keep(self, *folder_fd):
        _swap_for_link(folder, target)
        keep(self, *folder_fd)

    Checkpoints._keep_previous = swap_then_keep
    try:
        checkpoints.save({"epoch": 2})
    finally:
        Checkpoints._keep_previous = keep
    assert (
        sorted(p.name for p in target.iterdir()) == ["last.pt"]
        and (target / "last.pt").read_text() == "precious\n"
    )
    moved = folder.with_name("checkpoints.moved")  # the original folder, where the write began
    assert torch.load(moved / "last.pt", weights_only=True)["epoch"] == 2
    assert torch.load(moved / "previous.pt", weights_only=True)["epoch"] == 1
    with pytest.raises(UnsafeFolder, match="is a symbolic link") as err:  # the next save: refused
        checkpoints.save({"epoch": 3})
    assert err.value.filename == str(folder)


def test_a_linked_results_folder_itself_is_allowed(tmp_path):
    real = tmp_path / "real"
    real.mkdir()
    (tmp_path / "results").symlink_to(real, target_is_directory=True)
    check_no_links(run_dir(tmp_path / "results", "vit", "smoke"), tmp_path / "results")  # nothing raised


def test_atomic_write_never_writes_through_a_planted_temporary_link(tmp_path, outside):
    target = tmp_path / "metrics.json"
    temp_name(target).symlink_to(outside)
    write_json(target, {"a": 1})
    assert outside.read_text() == "precious\n" and json.loads(target.read_text()) == {"a": 1}
    assert not target.is_symlink()


def test_atomic_write_replaces_a_link_instead_of_its_target(tmp_path, outside):
    target = tmp_path / "config.json"
    target.symlink_to(outside)
    with atomic_write(target) as f:
        f.write(b"new")
    assert outside.read_text() == "precious\n" and not target.is_symlink() and target.read_bytes() == b"new"


def test_queue_refuses_a_linked_log_in_one_line(tmp_path, outside):
    logs = tmp_path / "logs"
    logs.mkdir()
    (logs / "vit-seed0.log").symlink_to(outside)
    queue = Queue([Job("vit", 0)], 1, lambda job: [sys.executable, "-c", "print('ran')"], logs)
    with pytest.raises(UnsafeFolder, match="vit-seed0.log"):
        queue.run()
    assert outside.read_text() == "precious\n"


def test_queue_lane_never_appends_through_a_link_planted_later(tmp_path, outside, monkeypatch):
    logs = tmp_path / "logs"
    # the link comes after the check
    monkeypatch.setattr("attnlib.lab.queue.check_no_links", lambda folder: None)
    logs.mkdir()
    (logs / "vit-seed0.log").symlink_to(outside)
    outcomes = Queue([Job("vit", 0)], 1, lambda job: [sys.executable, "-c", "print('ran')"], logs).run()
    assert outcomes[0].status.startswith("failed (log") and outside.read_text() == "precious\n"


# -------------------------------------------------------------------------------------- bounded reads
def test_read_regular_refuses_a_fifo_without_blocking(tmp_path):
    fifo = tmp_path / "history.csv"
    os.mkfifo(fifo)
    with pytest.raises(UnsafeFolder, match="is not a regular file"):
        read_regular(fifo)
    with pytest.raises(UnsafeFolder):
        sha256(fifo)


def test_read_regular_refuses_a_device_a_link_and_a_large_file(tmp_path, outside):
    with pytest.raises(UnsafeFolder, match="is not a regular file"):
        read_regular("/dev/zero")
    link = tmp_path / "link"
    link.symlink_to(outside)
    with pytest.raises(UnsafeFolder, match="is a symbolic link"):
        read_regular(link)
    big = tmp_path / "big"
    big.write_bytes(b"x" * 101)
    with pytest.raises(OSError, match="larger than 100 bytes") as err:
        read_regular(big, limit=100)
    assert err.value.errno == errno.EFBIG
    assert read_regular(outside) == b"precious\n"


def test_read_regular_names_a_folder_by_its_path(tmp_path):
    (tmp_path / "metrics.json").mkdir()
    with pytest.raises(IsADirectoryError, match="is a folder, not a file") as err:
        read_json(tmp_path / "metrics.json")
    assert err.value.filename == str(tmp_path / "metrics.json")


def test_read_npz_reads_what_write_npz_writes_and_bounds_the_members(tmp_path):
    import numpy as np

    arrays = {"a": np.arange(6.0).reshape(2, 3), "b": np.array(3)}
    write_npz(tmp_path / "x.npz", arrays)
    data = (tmp_path / "x.npz").read_bytes()
    got = read_npz(data)
    assert set(got) == {"a", "b"} and all(np.array_equal(got[k], arrays[k]) for k in arrays)
    with pytest.raises(ValueError, match="declare more than 100 bytes"):
        read_npz(data, limit=100)


def test_read_json_refuses_deep_nesting(tmp_path):
    path = tmp_path / "metrics.json"
    path.write_text("[" * 100_000 + "]" * 100_000)  # a RecursionError in json, were it not caught
    with pytest.raises(ValueError, match="nested"):
        read_json(path)
    path.write_text("[" * (MAX_JSON_DEPTH + 1) + "]" * (MAX_JSON_DEPTH + 1))
    with pytest.raises(ValueError, match=f"deeper than {MAX_JSON_DEPTH}"):
        read_json(path)
    path.write_text('{"a": [1, {"b": 2}]}')
    assert read_json(path) == {"a": [1, {"b": 2}]}


def test_queue_refuses_a_linked_logs_folder_of_the_results(tmp_path, outside, cli):
    results = tmp_path / "results"
    results.mkdir()
    (results / "logs").symlink_to(outside.parent, target_is_directory=True)
    code, _, err = cli(["queue", "--preset", "smoke", "--experiments", "vit", "--results-dir", str(results)])
    assert code == 5 and "logs" in err and "is a symbolic link" in err and err.count("\n") == 1, err
    assert sorted(p.name for p in outside.parent.iterdir()) == ["precious.txt"]


def test_a_read_only_checkpoints_folder_names_last_pt_not_the_temporary_file(tmp_path, mount_namespace):
    import shlex

    results = tmp_path / "results"
    checkpoints = run_dir(results, "vit", "smoke") / "checkpoints"
    checkpoints.mkdir(parents=True)
    argv = [sys.executable, "-m", "attnlib", "train", "vit", "--preset", "smoke", "--no-progress"]
    command = " ".join(shlex.quote(a) for a in [*argv, "--results-dir", str(results)])
    root = Path(__file__).resolve().parent.parent
    out = mount_namespace(
        f"mount -t tmpfs -o size=1m,ro tmpfs {checkpoints}; cd {root}; set +e; {command}; echo EXIT=$?"
    )
    assert "EXIT=5" in out.stdout, out.stdout + out.stderr
    errors = [line for line in out.stderr.splitlines() if line.startswith("python -m attnlib")]
    assert errors == [f"python -m attnlib: error: {checkpoints / 'last.pt'}: Read-only file system"], errors
