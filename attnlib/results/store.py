"""Reading the files of a results folder safely: never through a symbolic link (check_no_links,
open_nofollow), reads bounded to regular files (read_regular, read_json), arrays bounded before they are
allocated (read_npz), checksums (sha256). A results folder is untrusted input. The writers are attnlib.util's.
"""

from __future__ import annotations

import errno
import hashlib
import io
import json
import math
import os
import stat
import zipfile
from pathlib import Path

import numpy as np
from numpy.lib import format as npy

from attnlib.util import UnsafeFolder, unsafe  # noqa: F401 -- UnsafeFolder: imported from here too


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


_NPY_HEADERS = {(1, 0): npy.read_array_header_1_0, (2, 0): npy.read_array_header_2_0}


def read_npz(data: bytes, limit: int = MAX_RESULT_BYTES) -> dict[str, np.ndarray]:
    """The arrays of an npz file's bytes (what `attnlib.util.write_npz` writes: numeric arrays, no pickles),
    each member's .npy header read first: ValueError in one line naming the member for one that is no .npy
    array, of a dtype that is not numbers (object dtypes included), or whose declared shape and dtype take more
    bytes than the member holds, and for members declaring more than `limit` bytes in all; so no forged header
    makes np.load allocate what it claims (8 GiB from a 1 kB file). Zip errors are zipfile's (BadZipFile)."""
    with zipfile.ZipFile(io.BytesIO(data)) as archive:
        members = archive.infolist()
        if sum(m.file_size for m in members) > limit:  # the sizes every read from a member is held to
            raise ValueError(f"its members declare more than {limit} bytes, more than any result file")
        for member in members:
            _npy_member_check(archive, member)
    with np.load(io.BytesIO(data), allow_pickle=False) as z:
        return {key: z[key] for key in z.files}


def _npy_member_check(archive: zipfile.ZipFile, member: zipfile.ZipInfo) -> None:
    """ValueError unless `member` is a .npy array of numbers whose data fits in the member (its header only is
    read)."""
    name = member.filename
    if not name.endswith(".npy") or name.startswith("/") or ".." in name.split("/"):
        raise ValueError(f"{name!r} is not an .npy array")
    with archive.open(member) as f:
        version = npy.read_magic(f)
        if version not in _NPY_HEADERS:
            raise ValueError(f"{name[:-4]} is an .npy of version {version}, not 1.0 or 2.0")
        shape, _, dtype = _NPY_HEADERS[version](f)
    if dtype.hasobject or dtype.kind not in "biuf":
        raise ValueError(f"{name[:-4]} is of dtype {dtype}, not numbers")
    declared = math.prod(shape) * dtype.itemsize
    if min(shape, default=0) < 0 or declared > member.file_size:
        raise ValueError(
            f"{name[:-4]} declares {shape} of {dtype} ({declared} bytes) in a member of {member.file_size} bytes"
        )
