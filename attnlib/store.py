"""Files on disk: a folder that must be writable, npz files written atomically. The atomic write itself is
`attnlib.util.atomic_write` (temporary file, fsync, rename), the one JSON writer `attnlib.util.write_json`. The
lock of a run folder is `attnlib.lab.run`'s (RunLock, on filelock); the readers (read_regular, read_json,
sha256, check_no_links, open_nofollow) are `attnlib.results.store`'s (issue 32).
"""

from __future__ import annotations

import errno
import io
import os
import stat
from pathlib import Path

import numpy as np

from attnlib.util import write_bytes


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
