"""The package's writers: the atomic file write (temporary file, fsync, rename) and on it the one JSON writer and
the npz writer (numeric arrays only); `check_writable`, the check before a run writes anything. The readers of
saved files are `attnlib.results.store`'s; the lock of a run folder is `attnlib.lab.lock.RunLock`."""

from __future__ import annotations

import contextlib
import errno
import io
import json
import os
import stat
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import BinaryIO

import numpy as np

from attnlib.errors import with_path


def temp_name(path: str | Path) -> Path:
    """The default temporary file of `atomic_write`: ``.NAME.tmpPID`` beside `path`."""
    path = Path(path)
    return path.with_name(f".{path.name}.tmp{os.getpid()}")


@contextlib.contextmanager
def atomic_write(
    path: str | Path, *, tmp: str | Path | None = None, before_replace: Callable[[], None] | None = None
) -> Iterator[BinaryIO]:
    """Yield a temporary file beside `path` (``tmp``, else `temp_name`), open for binary writing; on
    success flush and fsync it, call ``before_replace`` and rename it onto `path` while it is still open
    (an flock the caller took on it holds until then); on any error delete it. A reader sees the old file
    or the new one, never a part. A failed write (a full disk, a read-only folder) is raised as the same
    OSError naming `path`, the file meant, not the temporary one."""
    path = Path(path)
    tmp = Path(tmp) if tmp is not None else temp_name(path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp.unlink(missing_ok=True)  # a leftover (or a planted link) is never written through:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
        with open(fd, "wb") as f:
            yield f
            f.flush()
            os.fsync(f.fileno())
            if before_replace is not None:
                before_replace()
            os.replace(tmp, path)
    except OSError as err:
        raise with_path(err, path) from err
    finally:  # never an error of its own: on a read-only folder it would replace the one naming `path`
        with contextlib.suppress(OSError):
            tmp.unlink(missing_ok=True)


def write_bytes(path: str | Path, data: bytes) -> None:
    """Write `data` to `path` atomically (`atomic_write`)."""
    with atomic_write(path) as f:
        f.write(data)


def write_json(path: str | Path, obj) -> Path:
    """`obj` as JSON (sorted keys, indented by 2, a final newline) written atomically to `path` (`write_bytes`):
    the one JSON writer. numpy numbers are kept numbers, paths written as strings, anything else refused (a
    result's JSON never holds the repr of an object). Returns the path."""
    text = json.dumps(obj, indent=2, sort_keys=True, default=_json_default) + "\n"
    write_bytes(path, text.encode())
    return Path(path)


def _json_default(obj):
    if isinstance(obj, np.generic):
        return obj.item()
    if isinstance(obj, Path):
        return str(obj)
    raise TypeError(f"not JSON serialisable: {type(obj).__name__}")


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


def write_npz(path: str | Path, arrays: dict[str, np.ndarray]) -> None:
    """Numeric arrays only (readers use allow_pickle=False)."""
    for name, a in arrays.items():
        if np.asarray(a).dtype.kind not in "biuf":
            raise ValueError(f"{name}: only numeric arrays are saved; got dtype {np.asarray(a).dtype}")
    buf = io.BytesIO()
    np.savez_compressed(buf, **arrays)
    write_bytes(path, buf.getvalue())
