"""Files on disk: a folder that must be writable, JSON / npz files and checksums written atomically, and the
lock of a run folder. The atomic write itself is `attnlib.util.atomic_write` (temporary file, fsync, rename).
"""

from __future__ import annotations

import errno
import fcntl
import hashlib
import io
import json
import logging
import os
import socket
import stat
import time
from pathlib import Path

import numpy as np

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


class UnsafeFolder(OSError):
    """A results folder holds a symbolic link (or another non-regular file) where a run writes or reads:
    writing through it could overwrite a file outside the results, reading it could hang or exhaust memory.
    An OSError (errno ELOOP), so the command line reports it in one line (exit 5)."""


def _unsafe(path: Path, what: str) -> UnsafeFolder:
    reason = f"{what}; refused: a results folder holds plain files and folders only"
    return UnsafeFolder(errno.ELOOP, reason, str(path))


def check_no_links(folder: str | Path, root: str | Path | None = None) -> None:
    """Raise UnsafeFolder unless nothing a run writes in `folder` is a symbolic link: `folder` itself and
    every folder between `root` (the results folder, itself allowed to be a link) and it, its entries
    (run.lock, result files), `checkpoints/` and the entries in it. Writes nothing."""
    folder = Path(folder)
    chain = [folder]
    if root is not None and Path(root) in folder.parents:
        chain += [p for p in folder.parents if Path(root) in p.parents]
    for p in chain:
        if p.is_symlink():
            raise _unsafe(p, "is a symbolic link")
    for sub in (folder, folder / "checkpoints"):
        try:
            entries = list(os.scandir(sub))
        except (FileNotFoundError, NotADirectoryError):
            continue
        for entry in entries:
            if entry.is_symlink():
                raise _unsafe(Path(entry.path), "is a symbolic link")


def open_nofollow(path: str | Path, flags: int, mode: int = 0o644) -> int:
    """os.open that never follows a symbolic link at `path` (UnsafeFolder, errno ELOOP, if one is there)."""
    try:
        return os.open(path, flags | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0), mode)
    except OSError as err:
        if err.errno == errno.ELOOP:
            raise _unsafe(Path(path), "is a symbolic link") from None
        raise


# the largest file a reader takes in (metrics.json, config.json, timing files, history.csv, attention.npz):
# the project's largest result file is 0.2 MB; a bigger one is refused rather than read into memory
MAX_JSON_BYTES = 4 << 20
MAX_RESULT_BYTES = 256 << 20
MAX_JSON_DEPTH = 32  # what a results file nests (metrics.json: 3 levels); deeper is refused


def read_regular(path: str | Path, limit: int = MAX_RESULT_BYTES) -> bytes:
    """The bytes of `path`, a regular file of at most `limit` bytes, read without following a symbolic link
    and without blocking on a FIFO; else an OSError naming the path (UnsafeFolder for a link, a FIFO, a
    device or a folder; EFBIG for a larger file)."""
    fd = open_nofollow(path, os.O_RDONLY | os.O_NONBLOCK)
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise _unsafe(Path(path), "is not a regular file")
        if st.st_size > limit:
            raise OSError(errno.EFBIG, f"is larger than {limit} bytes, more than any result file", str(path))
        chunks, left = [], limit + 1
        while left > 0 and (chunk := os.read(fd, min(left, 1 << 20))):
            chunks.append(chunk)
            left -= len(chunk)
        data = b"".join(chunks)
        if len(data) > limit:  # it grew while read
            raise OSError(errno.EFBIG, f"is larger than {limit} bytes, more than any result file", str(path))
        return data
    finally:
        os.close(fd)


def read_json(path: str | Path, limit: int = MAX_JSON_BYTES):
    """The JSON value in `path` (`read_regular`); ValueError when it is not JSON or nests deeper than
    MAX_JSON_DEPTH (a RecursionError in the reader otherwise)."""
    data = read_regular(path, limit)
    try:
        value = json.loads(data)
    except RecursionError:
        raise ValueError(f"{path}: nested too deeply") from None
    depth, stack = 0, [(value, 1)]
    while stack:
        v, d = stack.pop()
        depth = max(depth, d)
        if depth > MAX_JSON_DEPTH:
            raise ValueError(f"{path}: nested deeper than {MAX_JSON_DEPTH} levels")
        if isinstance(v, dict):
            stack += [(x, d + 1) for x in v.values()]
        elif isinstance(v, list):
            stack += [(x, d + 1) for x in v]
    return value


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


def sha256(path: str | Path, limit: int = MAX_RESULT_BYTES) -> str:
    """The sha256 of a regular file of at most `limit` bytes (`read_regular`)."""
    return hashlib.sha256(read_regular(path, limit)).hexdigest()


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
