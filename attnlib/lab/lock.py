"""The lock of a run folder: `RunLock` (`run.lock`, holding the owner's pid and host), so that two processes
never train one experiment and preset into the same folder; `RunLocked` when another one holds it."""

from __future__ import annotations

import errno
import json
import logging
import os
import socket
import time
from pathlib import Path

import filelock

from attnlib.results.store import MAX_JSON_BYTES, read_regular, unsafe

log = logging.getLogger("attnlib")


class RunLocked(RuntimeError):
    """Another process is training this experiment and preset right now."""


class RunLock:
    """An exclusive lock on one run folder: `run.lock`, holding the owner's pid and host.

    `filelock.FileLock` (flock(2), never through a symbolic link), which the kernel releases when the owner
    dies (even by SIGKILL), so a lock file left by a killed run never blocks: the next run takes it over and
    says so. This wrapper adds the one-line message: a live owner makes `acquire` raise RunLocked naming it."""

    def __init__(self, folder: str | Path):
        self.path, self._held = Path(folder) / "run.lock", None
        self._lock = filelock.FileLock(self.path, timeout=0, thread_local=False, on_acquired=self._claim)

    def acquire(self) -> RunLock:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        try:
            self._lock.acquire()
        except filelock.Timeout:
            raise RunLocked(
                f"{self.path.parent} is being trained by another process ({_owner(self.path)}); wait for it to "
                "finish or stop it (a killed run's lock is taken over automatically)"
            ) from None
        except OSError as err:
            if err.errno == errno.ELOOP:  # a linked run.lock is refused (UnsafeFolder, as every write)
                raise unsafe(self.path, "is a symbolic link") from None
            raise
        return self

    def _claim(self, fd: int) -> None:
        """Under the lock: check that it is the lock of `run.lock` as it is now, name the previous owner a
        record is left of (a killed run's), then write ours. A lock taken on a file its owner has just
        removed (`release` unlinks it: a process that opened it before and locked it after) guards nothing:
        a third process may hold the new run.lock; refused (RunLocked) rather than training beside it."""
        held, now = os.fstat(fd), _stat(self.path)
        self._held = (held.st_dev, held.st_ino)  # the file `release` may remove: ours, not a later run.lock
        if now is None or self._held != (now.st_dev, now.st_ino):
            raise RunLocked(
                f"{self.path.parent} was being trained by another process, which has just released it; "
                "rerun to take it over"
            )
        if previous := _owner_of(os.pread(fd, MAX_JSON_BYTES, 0)):
            log.warning(
                "taking over the lock of a run that no longer runs (%s) in %s", previous, self.path.parent
            )
        os.ftruncate(fd, 0)
        record = {"pid": os.getpid(), "host": socket.gethostname(), "since": time.time()}
        os.pwrite(fd, json.dumps(record).encode(), 0)
        os.fsync(fd)

    def release(self) -> None:
        if self._lock.is_locked:
            if (now := _stat(self.path)) is not None and (now.st_dev, now.st_ino) == self._held:
                self.path.unlink()  # never another process's run.lock made after ours was removed by hand
            self._lock.release()

    def __enter__(self) -> RunLock:
        return self.acquire()

    def __exit__(self, *exc) -> None:
        self.release()


def _stat(path: Path) -> os.stat_result | None:
    try:
        return os.stat(path, follow_symlinks=False)
    except FileNotFoundError:
        return None


def _owner(path: Path) -> str:
    """Who holds the lock at `path`: its record (`_owner_of`), or 'unknown owner' when it cannot be read."""
    try:
        return _owner_of(read_regular(path, MAX_JSON_BYTES)) or "unknown owner"
    except OSError:
        return "unknown owner"


def _owner_of(data: bytes) -> str:
    """'pid N on HOST' from a lock file's record; '' when it holds none (a fresh file), 'unknown owner' when
    it holds something else."""
    try:
        info = json.loads(data or b"{}")
        assert isinstance(info, dict)
    except (ValueError, AssertionError, RecursionError):
        return "unknown owner"
    return f"pid {info['pid']} on {info.get('host', 'an unknown host')}" if "pid" in info else ""
