"""The public loaders: CIFAR-10 from a folder (or $ATTNLIB_DATA), and a data spec (a folder or "synthetic")."""

from __future__ import annotations

import os
from pathlib import Path

from attnlib.checks import is_synthetic, synthetic_sizes
from attnlib.data.cache import _load_folder, cache_directory
from attnlib.data.cifar10 import DOWNLOAD_HINT, LAYOUTS, CIFAR10Data, DataNotFoundError
from attnlib.data.sources import _detect, _download, synthetic_cifar10
from attnlib.data.spec import check_data
from attnlib.env import DATA_ENV


def load_cifar10(root=None, cache_dir=None, download: bool = False) -> CIFAR10Data:
    """CIFAR-10 from ``root`` (else ``$ATTNLIB_DATA``), decoded once and cached as uint8 tensors.

    ``cache_dir`` defaults to ``$ATTNLIB_CACHE``, else ``~/.cache/attnlib``. With ``download=True`` and no
    usable copy, torchvision downloads the original pickles into ``root`` (or into the cache directory).
    """
    parameter = "root"
    if root is None and os.environ.get(DATA_ENV):
        root, parameter = os.environ[DATA_ENV], DATA_ENV
    cache = cache_directory(cache_dir)
    if root is None:
        if not download:
            raise DataNotFoundError(
                "root",
                None,
                f"no CIFAR-10 folder given (root=None) and {DATA_ENV} is not set. Pass root=<folder> or "
                f"set {DATA_ENV}=<folder>, where <folder> holds {LAYOUTS}. {DOWNLOAD_HINT}",
            )
        root = cache / "cifar10"
    root = Path(root).expanduser()
    if download and (not root.is_dir() or _detect(root, parameter) is None):
        _download(root, parameter)
    return _load_folder(root, cache, parameter)


def load_dataset(spec, cache_dir=None) -> CIFAR10Data:
    """``spec``: "synthetic", "synthetic:N_TRAIN:N_TEST", a CIFAR-10 folder, or None ($ATTNLIB_DATA)."""
    if check_data(spec) is None:  # the one check of a spec (attnlib.data.spec)
        return load_cifar10(None, cache_dir)
    if is_synthetic(spec):
        return synthetic_cifar10(*synthetic_sizes(spec))
    return _load_folder(Path(spec).expanduser(), cache_directory(cache_dir), "data")
