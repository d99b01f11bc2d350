"""What CIFAR-10 is to attnlib: its classes, the layouts a copy may have, the containers every source gives
(`Split`, `CIFAR10Data`) and the errors of an unusable copy."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import torch

from attnlib.env import DATA_ENV
from attnlib.errors import ConfigError

CLASSES = ("airplane", "automobile", "bird", "cat", "deer", "dog", "frog", "horse", "ship", "truck")

PICKLE_DIR = "cifar-10-batches-py"  # torchvision's download, as its archive unpacks
IMAGE_SUFFIXES = {".png": "png", ".jpg": "jpeg", ".jpeg": "jpeg"}

LAYOUTS = (
    f"either torchvision's download ({PICKLE_DIR}/ under the folder, its files as downloaded) "
    "or an ImageFolder tree train/<class>/*.png|jpg and test/<class>/*.png|jpg with the ten classes "
    f"{' '.join(CLASSES)}"
)
DOWNLOAD_HINT = (
    "Where the network allows, torchvision.datasets.CIFAR10(<folder>, download=True) downloads the original "
    f"files into <folder>/{PICKLE_DIR}, which load_cifar10(<folder>) reads."
)


class DataError(ConfigError):
    """Unusable data source; the message names the parameter, and the file or class at fault."""

    def __init__(self, parameter: str, value, message: str):
        self.parameter, self.value, self.allowed = parameter, value, LAYOUTS
        Exception.__init__(self, f"{parameter}: {message}")


class DataNotFoundError(DataError, FileNotFoundError):
    """No CIFAR-10 where we looked (also a FileNotFoundError)."""


def no_cifar10(root, parameter: str) -> DataNotFoundError:
    """The error of a folder that is missing or holds none of CIFAR-10's layouts, naming where it looked."""
    root = Path(root)
    where = f" (from {DATA_ENV})" if parameter == DATA_ENV else ""
    if not root.is_dir():
        what = f"{root}{where} is not an existing folder; it should hold {LAYOUTS}."
    else:
        what = (
            f"no CIFAR-10 in {root}{where}: looked for {root / PICKLE_DIR}/ and {root / 'train'}/ + "
            f"{root / 'test'}/. Expected {LAYOUTS}."
        )
    return DataNotFoundError(parameter, str(root), f"{what} {DOWNLOAD_HINT}")


class DataFormatError(DataError):
    """A CIFAR-10 folder that is malformed: missing class folder or file, non-image file, wrong size."""


# ----------------------------------------------------------------------------------------------------------
# Containers


@dataclass(frozen=True)
class Split:
    """One split: ``images`` uint8 (N, 3, 32, 32), ``labels`` int64 (N,) with values in 0..9."""

    images: torch.Tensor = field(repr=False)
    labels: torch.Tensor = field(repr=False)

    def __post_init__(self):
        x, y = self.images, self.labels
        if x.dtype != torch.uint8 or x.dim() != 4 or tuple(x.shape[1:]) != (3, 32, 32):
            raise ValueError(f"images must be uint8 (N, 3, 32, 32); got {x.dtype} {tuple(x.shape)}")
        if y.dtype != torch.int64 or tuple(y.shape) != (x.shape[0],):
            raise ValueError(f"labels must be int64 ({x.shape[0]},); got {y.dtype} {tuple(y.shape)}")

    def __len__(self) -> int:
        return self.images.shape[0]

    def __repr__(self) -> str:
        return f"Split(n={len(self)})"


@dataclass(frozen=True)
class CIFAR10Data:
    """Train and test splits, the class names (label order) and ``source``, a short provenance string."""

    train: Split
    test: Split
    classes: tuple[str, ...] = CLASSES
    source: str = ""
