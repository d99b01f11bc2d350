"""Reading the files of a results folder safely: never through a symbolic link (check_no_links,
open_nofollow), reads bounded to regular files (read_regular, read_json), checksums (sha256). A results folder
is untrusted input. The writers are attnlib.util's.
"""

from __future__ import annotations

import errno
import hashlib
import json
import os
import stat
from pathlib import Path


class UnsafeFolder(OSError):
    """A results folder holds a symbolic link (or another non-regular file) where a run writes or reads:
    writing through it could overwrite a file outside the results, reading it could hang or exhaust memory.
    An OSError (errno ELOOP), so the command line reports it in one line (exit 5)."""


def unsafe(path: Path, what: str) -> UnsafeFolder:
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
            raise unsafe(p, "is a symbolic link")
    for sub in (folder, folder / "checkpoints"):
        try:
            entries = list(os.scandir(sub))
        except (FileNotFoundError, NotADirectoryError):
            continue
        for entry in entries:
            if entry.is_symlink():
                raise unsafe(Path(entry.path), "is a symbolic link")


def open_nofollow(path: str | Path, flags: int, mode: int = 0o644) -> int:
    """os.open that never follows a symbolic link at `path` (UnsafeFolder, errno ELOOP, if one is there)."""
    try:
        return os.open(path, flags | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0), mode)
    except OSError as err:
        if err.errno == errno.ELOOP:
            raise unsafe(Path(path), "is a symbolic link") from None
        raise


# the largest file a reader takes in (metrics.json, config.json, timing files, history.csv, attention.npz):
# the project's largest result file is 0.2 MB; a bigger one is refused rather than read into memory
MAX_JSON_BYTES = 4 << 20
MAX_RESULT_BYTES = 256 << 20
MAX_JSON_DEPTH = 32  # what a results file nests (metrics.json: 3 levels); deeper is refused


def read_regular(path: str | Path, limit: int = MAX_RESULT_BYTES) -> bytes:
    """The bytes of `path`, a regular file of at most `limit` bytes, read without following a symbolic link
    and without blocking on a FIFO; else an OSError naming the path (UnsafeFolder for a link, a FIFO or a
    device; IsADirectoryError for a folder; EFBIG for a larger file)."""
    fd = open_nofollow(path, os.O_RDONLY | os.O_NONBLOCK)
    try:  # the type is checked on the descriptor: open() of a folder's one raises an error naming "3", not `path`
        st = os.fstat(fd)
        if stat.S_ISDIR(st.st_mode):
            raise IsADirectoryError(errno.EISDIR, "is a folder, not a file", str(path))
        if not stat.S_ISREG(st.st_mode):
            raise unsafe(Path(path), "is not a regular file")
    except OSError:
        os.close(fd)
        raise
    with open(fd, "rb") as f:
        data = b"" if st.st_size > limit else f.read(limit + 1)  # one byte more: a file that grew while read
        if st.st_size > limit or len(data) > limit:
            raise OSError(errno.EFBIG, f"is larger than {limit} bytes, more than any result file", str(path))
        return data


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


def sha256(path: str | Path, limit: int = MAX_RESULT_BYTES) -> str:
    """The sha256 of a regular file of at most `limit` bytes (`read_regular`)."""
    return hashlib.sha256(read_regular(path, limit)).hexdigest()
