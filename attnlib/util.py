"""Small tools the package shares: the atomic file write (and the one JSON writer on it), the wall-clock timer
of one call, and the package class that keeps a split module's old names patchable."""

from __future__ import annotations

import contextlib
import importlib
import json
import os
import sys
import time
import types
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import BinaryIO

import torch

from attnlib.errors import with_path


# ------------------------------------------------------------------------------------------ atomic writes
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


def write_json(path: str | Path, obj, *, sort_keys: bool = True, default: Callable | None = str) -> Path:
    """`obj` as JSON (indented by 2, a final newline) written atomically to `path` (`write_bytes`); `default`
    turns what JSON lacks into something it has (str: numpy numbers, paths). Returns the path."""
    text = json.dumps(obj, indent=2, sort_keys=sort_keys, default=default) + "\n"
    write_bytes(path, text.encode())
    return Path(path)


# ------------------------------------------------------------------------------------------------ timing
def sync(device: torch.device) -> None:
    """Wait for the work queued on `device` (a no-op on the CPU), so that a clock read after it counts it."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def timed_ms(fn: Callable[[], object], device: torch.device) -> float:
    """Wall-clock milliseconds of one call of `fn`, synchronising with `device` after it."""
    start = time.perf_counter()
    fn()
    sync(device)
    return (time.perf_counter() - start) * 1e3


# ----------------------------------------------------------------------------------- packages of old modules
_UNSET = object()


class Package(types.ModuleType):
    """A package whose ``__init__`` re-exports the names of the module it was split from (issue 32, while the
    old import paths are kept): `reexport`. Setting a name on it (a test's ``monkeypatch.setattr(attnlib.train,
    "evaluate", ...)``) sets it too in each of its modules that holds the same object, so that the code that
    uses it sees the patch as it did in the single module."""

    def __setattr__(self, name: str, value) -> None:
        old = self.__dict__.get(name, _UNSET)
        if old is not _UNSET and not isinstance(old, types.ModuleType):
            prefix = f"{self.__name__}."
            for module in list(sys.modules.values()):
                if (
                    getattr(module, "__name__", "").startswith(prefix)
                    and vars(module).get(name, _UNSET) is old
                ):
                    setattr(module, name, value)
        super().__setattr__(name, value)


def reexport(package: str, homes: dict[str, tuple[str, ...]]) -> None:
    """Make the package `package` (``reexport(__name__, HOMES)`` in its ``__init__``) a `Package` whose names
    are those of `homes` (module -> names), each imported from its home on first use and kept (PEP 562), so
    that importing one of its modules loads no other."""
    module = sys.modules[package]
    home_of = {name: home for home, names in homes.items() for name in names}

    def __getattr__(name: str):
        if name not in home_of:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(home_of[name]), name)
        module.__dict__[name] = value  # kept: a later monkeypatch of it reaches its home too
        return value

    module.__getattr__ = __getattr__
    module.__dir__ = lambda: sorted({*module.__dict__, *home_of})
    module.__all__ = sorted(n for n in home_of if not n.startswith("_"))
    module.__class__ = Package
