"""What data a spec names: `check_data`, the one check of a data spec wherever `data` is given (load_dataset,
the command line, the book, a registry preset; cheap: nothing read but a folder's listing, so that it runs
before anything is written), and the public loaders of CIFAR-10 from a folder (or $ATTNLIB_DATA) and of a spec.

Every load reads the files: nothing is cached. Decoding the 60,000 JPEGs of the ImageFolder copy takes about
20 s on one or two shared cores (torchvision's C++ decoders on a thread pool), under 1% of a budget run;
torchvision's download reads in about a second.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path

from attnlib.checks import is_synthetic, synthetic_sizes
from attnlib.data.cifar10 import (
    DOWNLOAD_HINT,
    LAYOUTS,
    CIFAR10Data,
    DataFormatError,
    DataNotFoundError,
    no_cifar10,
)
from attnlib.data.sources import _detect, synthetic_cifar10
from attnlib.env import DATA_ENV
from attnlib.errors import ConfigError

log = logging.getLogger("attnlib.data")

ALLOWED = f"'synthetic', 'synthetic:N_TRAIN:N_TEST', or an existing folder holding {LAYOUTS}"


def check_data(spec, parameter: str = "data") -> str | None:
    """`spec` checked and made plain: None (CIFAR-10 from $ATTNLIB_DATA, checked when it is read) as it is; a
    synthetic spec ("synthetic" or "synthetic:N_TRAIN:N_TEST", sizes in [1, MAX_SYNTHETIC]) as given; a
    folder (str or path) holding one of CIFAR-10's layouts (cifar-10-batches-py/, or train/ and test/: not
    read) as its resolved path. Anything else raises ConfigError naming `parameter`, a DataNotFoundError (also a
    FileNotFoundError) for a folder that does not exist or holds no CIFAR-10."""
    if spec is None:
        return None
    if is_synthetic(spec):
        synthetic_sizes(spec, ALLOWED, parameter)
        return spec
    if not isinstance(spec, str | os.PathLike):
        raise ConfigError(parameter, spec, ALLOWED)
    path = Path(spec).expanduser()
    if not path.is_dir():
        raise DataNotFoundError(
            parameter, spec, f"got {str(spec)!r}, which is not an existing folder; allowed: {ALLOWED}"
        )
    if _detect(path, parameter) is None:  # a partial layout (train/ without test/) is named precisely
        raise no_cifar10(path, parameter)
    return str(path.resolve())


def load_cifar10(root=None) -> CIFAR10Data:
    """CIFAR-10 from ``root`` (else ``$ATTNLIB_DATA``) as uint8 tensors (torchvision's own
    ``CIFAR10(root, download=True)`` downloads the original files where none are: `DOWNLOAD_HINT`)."""
    parameter = "root"
    if root is None and os.environ.get(DATA_ENV):
        root, parameter = os.environ[DATA_ENV], DATA_ENV
    if root is None:
        raise DataNotFoundError(
            "root",
            None,
            f"no CIFAR-10 folder given (root=None) and {DATA_ENV} is not set. Pass root=<folder> or "
            f"set {DATA_ENV}=<folder>, where <folder> holds {LAYOUTS}. {DOWNLOAD_HINT}",
        )
    return _load_folder(Path(root).expanduser(), parameter)


def load_dataset(spec) -> CIFAR10Data:
    """``spec``: "synthetic", "synthetic:N_TRAIN:N_TEST", a CIFAR-10 folder, or None ($ATTNLIB_DATA)."""
    if check_data(spec) is None:  # the one check of a spec (above)
        return load_cifar10(None)
    if is_synthetic(spec):
        return synthetic_cifar10(*synthetic_sizes(spec))
    return _load_folder(Path(spec).expanduser(), "data")


def _load_folder(root: Path, parameter: str) -> CIFAR10Data:
    try:
        read = _detect(root, parameter)  # None where root is no folder or holds no layout
        if read is not None:
            log.info("reading CIFAR-10 in %s", root)
            return read()
    except OSError as err:  # a symlink loop, a file we may not read, an I/O error: one line naming it
        where = err.filename if err.filename is not None else root
        raise DataFormatError(
            parameter, str(where), f"{where} cannot be read ({err.strerror or err})"
        ) from None
    raise no_cifar10(root, parameter)
