"""The uint8 cache of a decoded folder source: one ``.pt`` file per source in the cache directory (never
inside the source), keyed by a cheap fingerprint of the source files and validated (shapes, dtypes, key,
CRC-32) on every load. An invalid cache is rebuilt, one that cannot be written costs a one-line warning;
loads started together decode once (the builder holds a lock on the cache folder); temporary files of
killed writers are swept."""

from __future__ import annotations

import contextlib
import hashlib
import io
import logging
import os
import threading
import warnings
import zlib
from collections.abc import Iterator
from pathlib import Path

import torch
from filelock import lock_descriptor

from attnlib.data.cifar10 import (
    CACHE_TMP_SUFFIX,
    CACHE_VERSION,
    CLASSES,
    DOWNLOAD_HINT,
    LAYOUTS,
    CIFAR10Data,
    DataFormatError,
    DataNotFoundError,
    Split,
    no_cifar10,
)
from attnlib.data.sources import _decode_imagefolder, _decode_pickles, _detect
from attnlib.env import CACHE_ENV, DATA_ENV
from attnlib.errors import ConfigError
from attnlib.util import atomic_write

log = logging.getLogger("attnlib.data")


def cache_directory(cache_dir=None) -> Path:
    """The cache folder: ``cache_dir``, else ``$ATTNLIB_CACHE``, else ``$XDG_CACHE_HOME/attnlib`` (~/.cache)."""
    if cache_dir is None:
        cache_dir = os.environ.get(CACHE_ENV) or None
    if cache_dir is None:
        cache_dir = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "attnlib"
    return Path(cache_dir).expanduser()


def _load_folder(root: Path, cache: Path, parameter: str) -> CIFAR10Data:
    if not root.is_dir():
        where = f" (from {DATA_ENV})" if parameter == DATA_ENV else ""
        raise DataNotFoundError(
            parameter,
            str(root),
            f"{root}{where} is not an existing folder; it should hold {LAYOUTS}. {DOWNLOAD_HINT}",
        )
    try:
        src = _detect(root, parameter)
        key = None if src is None else src.fingerprint()
    except OSError as err:  # a symlink loop, a file we may not read, an I/O error
        raise _unreadable(parameter, root, err) from None
    if src is None:
        raise no_cifar10(root, parameter)
    cache_resolved = cache.resolve()
    if cache_resolved == src.path or src.path in cache_resolved.parents:
        raise ConfigError("cache_dir", str(cache), f"a folder outside the data source {src.path}")
    path = cache / f"cifar10-{src.kind}-{hashlib.sha256(str(src.path).encode()).hexdigest()[:16]}.pt"
    _sweep_stale(cache)
    data, reason = _read_cache(path, key)
    if data is not None:
        return data
    with _building(cache):  # two runs started at once: the second waits, then reads the first one's cache
        data, reason = _read_cache(path, key)
        if data is not None:
            return data
        if reason != "absent":
            warnings.warn(
                f"attnlib: cache {path} is invalid ({reason}); rebuilding it from {src.description}",
                stacklevel=3,
            )
        log.info("decoding %s into %s (once)", src.description, path)
        data = _decode_pickles(src) if src.kind == "pickle" else _decode_imagefolder(src)
        _write_cache(path, key, data)
    return data


@contextlib.contextmanager
def _building(cache: Path) -> Iterator[None]:
    """Hold filelock's exclusive lock on the cache folder itself (no lock file: the folder holds caches only)
    while a cache is decoded and written, so that concurrent loads decode once; a load that has to wait says
    so in one line. Where the folder cannot be made or locked, go on unlocked (the cache is optional)."""
    with contextlib.ExitStack() as stack:
        try:
            cache.mkdir(parents=True, exist_ok=True)
            fd = os.open(cache, os.O_RDONLY | os.O_DIRECTORY)
            stack.callback(os.close, fd)  # closing releases the lock
            if not lock_descriptor(fd, blocking=False):
                log.info("waiting for another load decoding CIFAR-10 into %s", cache)
                lock_descriptor(fd)
        except OSError:
            pass
        yield


def _unreadable(parameter: str, root, err: OSError) -> DataFormatError:
    """An unreadable file or folder in a data source, named with the reason, as one line."""
    where = err.filename if err.filename is not None else root
    return DataFormatError(parameter, str(where), f"{where} cannot be read ({err.strerror or err})")


def _checksum(data: CIFAR10Data) -> int:
    """CRC-32 of all images and labels (about 0.05 s for the full set)."""
    crc = 0
    for t in (data.train.images, data.train.labels, data.test.images, data.test.labels):
        crc = zlib.crc32(memoryview(t.contiguous().numpy()).cast("B"), crc)
    return crc


def _write_cache(path: Path, key: str, data: CIFAR10Data) -> None:
    """Atomic write: a temporary file in the same folder, then os.replace.

    The cache is an optimisation: any failure (a full disk, a read-only folder...) removes the temporary
    file, logs one line and returns, and the run goes on with the data in memory. The writer holds an
    flock on its temporary file, so that `_sweep_stale` can tell a killed writer's leftover from a live
    writer's file."""
    blob = {
        "version": CACHE_VERSION,
        "key": key,
        "source": data.source,
        "classes": list(data.classes),
        "train_images": data.train.images,
        "train_labels": data.train.labels,
        "test_images": data.test.images,
        "test_labels": data.test.labels,
        "crc32": _checksum(data),
    }
    tmp = path.with_name(f"{path.name}.{os.getpid()}-{threading.get_ident()}{CACHE_TMP_SUFFIX}")
    try:
        buf = io.BytesIO()
        torch.save(blob, buf)  # serialised in memory: a failed write is a plain OSError (ENOSPC...)
        with atomic_write(path, tmp=tmp) as f:
            lock_descriptor(f.fileno())  # held until the rename: `_sweep_stale` leaves a live writer's file
            f.write(buf.getbuffer())
            os.fchmod(f.fileno(), 0o644)  # the cache may be shared
    except Exception as err:  # noqa: BLE001 -- whatever failed, the data in memory is good
        # atomic_write names `path` in every OSError (`attnlib.errors.with_path`): its reason is enough
        reason = err.strerror if isinstance(err, OSError) and err.strerror else f"{type(err).__name__}: {err}"
        log.warning("could not write the data cache %s: %s; training from memory", path, reason)


def _sweep_stale(folder: Path) -> None:
    """Remove temporary cache files left by killed writers (a live writer holds an flock on its file)."""
    try:
        candidates = list(folder.glob(f"cifar10-*.pt.*{CACHE_TMP_SUFFIX}"))
    except OSError:
        return
    for tmp in candidates:
        try:
            fd = os.open(tmp, os.O_RDONLY)
        except OSError:
            continue
        try:
            if lock_descriptor(fd, blocking=False):  # no live writer holds it
                with contextlib.suppress(OSError):
                    os.remove(tmp)
                    log.info("removed %s, a temporary cache file left by a stopped run", tmp)
        except OSError:
            pass  # not lockable here: left alone, as a live writer's would be
        finally:
            os.close(fd)


def _read_cache(path: Path, key: str) -> tuple[CIFAR10Data | None, str]:
    """(data, "") for a valid cache with this key, else (None, reason)."""
    if not path.is_file():
        return None, "absent"
    try:
        blob = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as err:
        return None, f"unreadable: {type(err).__name__}"
    if not isinstance(blob, dict) or blob.get("version") != CACHE_VERSION:
        return None, "unknown format"
    if blob.get("key") != key:
        return None, "the source files changed"
    try:
        data = CIFAR10Data(
            Split(blob["train_images"], blob["train_labels"]),
            Split(blob["test_images"], blob["test_labels"]),
            tuple(blob["classes"]),
            blob["source"],
        )
    except (KeyError, ValueError, TypeError) as err:
        return None, f"bad contents: {err}"
    if data.classes != CLASSES:
        return None, f"class names {data.classes}"
    if _checksum(data) != blob.get("crc32"):
        return None, "checksum mismatch"
    return data, ""
