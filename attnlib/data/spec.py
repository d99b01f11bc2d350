"""The one check of a data spec, wherever `data` is given (load_dataset, the command line, the book, a
registry preset): cheap (nothing read but a folder's listing), so that it runs before anything is written."""

from __future__ import annotations

import os
from pathlib import Path

from attnlib.checks import is_synthetic, synthetic_sizes
from attnlib.data.cifar10 import LAYOUTS, DataNotFoundError, no_cifar10
from attnlib.data.sources import _detect
from attnlib.errors import ConfigError

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
