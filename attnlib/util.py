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


class UnsafeFolder(OSError):
    """A results folder holds a symbolic link (or another non-regular file) where a run writes or reads:
    writing through it could overwrite a file outside the results, reading it could hang or exhaust memory.
    An OSError (errno ELOOP), so the command line reports it in one line (exit 5)."""


def unsafe(path: Path, what: str) -> UnsafeFolder:
    reason = f"{what}; refused: a results folder holds plain files and folders only"
    return UnsafeFolder(errno.ELOOP, reason, str(path))


def temp_name(path: str | Path) -> Path:
    """The temporary file of `atomic_write`: ``.NAME.tmpPID`` beside `path`."""
    path = Path(path)
    return path.with_name(f".{path.name}.tmp{os.getpid()}")


_FOLDER = os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC


def open_folder(folder: str | Path, root: str | Path | None = None) -> int:
    """A descriptor of `folder`, created if missing. With `root` (a folder above it: the results folder, which
    may itself be a link), every folder from below `root` down to `folder` is opened through the one above it
    and never followed as a symbolic link (UnsafeFolder naming the link), so a link swapped in for a run
    folder or its checkpoints/ is refused, not written through; without `root`, `folder` as the system
    resolves it. What is written through the descriptor lands in that folder even if its path is swapped
    for a link afterwards."""
    folder = Path(folder)
    if root is None:
        folder.mkdir(parents=True, exist_ok=True)
        return os.open(folder, _FOLDER)
    parts = folder.relative_to(root).parts  # ValueError: not below root (a caller's mistake)
    Path(root).mkdir(parents=True, exist_ok=True)
    fd = os.open(root, _FOLDER)
    try:
        for i, part in enumerate(parts):
            with contextlib.suppress(FileExistsError):
                os.mkdir(part, dir_fd=fd)
            try:
                inner = os.open(part, _FOLDER | os.O_NOFOLLOW, dir_fd=fd)
            except OSError as err:
                if err.errno in (errno.ELOOP, errno.ENOTDIR):  # a link (or a file) where a folder should be
                    where = Path(root).joinpath(*parts[: i + 1])
                    if where.is_symlink():
                        raise unsafe(where, "is a symbolic link") from None
                raise
            os.close(fd)
            fd = inner
    except BaseException:
        os.close(fd)
        raise
    return fd


@contextlib.contextmanager
def atomic_write(
    path: str | Path,
    *,
    root: str | Path | None = None,
    before_replace: Callable[[int], None] | None = None,
) -> Iterator[BinaryIO]:
    """Yield a temporary file beside `path` (`temp_name`), open for binary writing; on success flush and
    fsync it, call ``before_replace`` with the folder's descriptor and rename it onto `path` while it is
    still open (an flock the caller took on it holds until then); on any error delete it. A reader sees the
    old file or the new one, never a part. Every step is taken by name in the folder's descriptor
    (`open_folder`, with `root`: no folder below `root` followed as a link), so a link swapped in for the
    folder while it writes never redirects the write. A failed write (a full disk, a read-only folder) is
    raised as the same OSError naming `path`, the file meant, not the temporary one; a link refused is
    UnsafeFolder naming the link."""
    path = Path(path)
    tmp = temp_name(path).name
    folder = None
    try:
        folder = open_folder(path.parent, root)
        with contextlib.suppress(
            FileNotFoundError
        ):  # a leftover (or a planted link) is never written through
            os.unlink(tmp, dir_fd=folder)
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
        with open(os.open(tmp, flags, 0o644, dir_fd=folder), "wb") as f:
            yield f
            f.flush()
            os.fsync(f.fileno())
            if before_replace is not None:
                before_replace(folder)
            os.replace(tmp, path.name, src_dir_fd=folder, dst_dir_fd=folder)
    except UnsafeFolder:
        raise
    except OSError as err:
        raise with_path(err, path) from err
    finally:  # never an error of its own: on a read-only folder it would replace the one naming `path`
        if folder is not None:
            with contextlib.suppress(OSError):
                os.unlink(tmp, dir_fd=folder)
            os.close(folder)


def write_bytes(path: str | Path, data: bytes, root: str | Path | None = None) -> None:
    """Write `data` to `path` atomically (`atomic_write`; `root`: no folder below it followed as a link)."""
    with atomic_write(path, root=root) as f:
        f.write(data)


def write_json(path: str | Path, obj, root: str | Path | None = None) -> Path:
    """`obj` as JSON (sorted keys, indented by 2, a final newline) written atomically to `path` (`write_bytes`):
    the one JSON writer. numpy numbers are kept numbers, paths written as strings, anything else refused (a
    result's JSON never holds the repr of an object). Returns the path."""
    text = json.dumps(obj, indent=2, sort_keys=True, default=_json_default) + "\n"
    write_bytes(path, text.encode(), root)
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


def write_npz(path: str | Path, arrays: dict[str, np.ndarray], root: str | Path | None = None) -> None:
    """Numeric arrays only (readers use allow_pickle=False)."""
    for name, a in arrays.items():
        if np.asarray(a).dtype.kind not in "biuf":
            raise ValueError(f"{name}: only numeric arrays are saved; got dtype {np.asarray(a).dtype}")
    buf = io.BytesIO()
    np.savez_compressed(buf, **arrays)
    write_bytes(path, buf.getvalue(), root)
