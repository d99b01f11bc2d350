"""Files on disk: a folder that must be writable, JSON / npz files written atomically, and the lock of a run
folder. The atomic write itself is `attnlib.util.atomic_write` (temporary file, fsync, rename). The readers
(read_regular, read_json, sha256, check_no_links, open_nofollow) moved to `attnlib.results.store` (issue 32) and
are re-exported here for their callers.
"""

from __future__ import annotations

import errno
import fcntl
import io
import json
import logging
import os
import socket
import stat
import time
from pathlib import Path

import numpy as np

from attnlib.results.store import (  # noqa: F401 -- re-exported for the callers of attnlib.store
    MAX_JSON_BYTES,
    MAX_JSON_DEPTH,
    MAX_RESULT_BYTES,
    UnsafeFolder,
    check_no_links,
    open_nofollow,
    read_json,
    read_regular,
    sha256,
)
from attnlib.util import write_bytes

log = logging.getLogger("attnlib")


class RunLocked(RuntimeError):
    """Another process is training this experiment and preset right now."""


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
            fd = open_nofollow(self.path, os.O_RDWR | os.O_CREAT)  # a linked run.lock is refused
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
            info = json.loads(read_regular(self.path, MAX_JSON_BYTES) or b"{}")
            assert isinstance(info, dict)
        except (OSError, ValueError, AssertionError, RecursionError):
            return "unknown owner"
        return f"pid {info['pid']} on {info.get('host', 'an unknown host')}" if "pid" in info else ""

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
