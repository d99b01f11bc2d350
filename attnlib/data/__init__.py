"""CIFAR-10 for attnlib: three sources and augmented batches on the model's device.

Sources (all give the same `CIFAR10Data`):
- torchvision's download (``cifar-10-batches-py/``), read by torchvision, which unpickles a file only once
  its md5 is the original's: a changed file (one that would run code included) is refused unread;
- an ImageFolder tree ``train/<class>/*`` and ``test/<class>/*`` of 32x32 PNG or JPEG files, decoded by
  torchvision on every load (nothing is cached: about 20 s for the 60,000 JPEGs);
- ``synthetic_cifar10``: deterministic class-dependent patterns for tests and smoke runs.

``Batches`` keeps the uint8 images on the device and makes each batch there: random crop with 4-pixel zero
padding, horizontal flip and per-channel normalisation, drawn from a generator seeded by ``(seed, epoch)``.

The modules: `cifar10` (classes, layouts, containers, errors), `sources`, `spec` (check_data: the one check
of a data spec), `load` (the public loaders), `batches`. Their public names are imported here; patch a name
in its home module (``attnlib.data.sources.decode_images``).
"""

from attnlib.data.batches import MEAN, PAD, STD, Batches, crop_flip, epoch_seed
from attnlib.data.cifar10 import CLASSES, CIFAR10Data, DataError, DataFormatError, DataNotFoundError, Split
from attnlib.data.load import load_cifar10, load_dataset
from attnlib.data.sources import decode_images, synthetic_cifar10, to_uint8
from attnlib.data.spec import check_data

__all__ = [
    "CLASSES", "MEAN", "PAD", "STD", "Batches", "CIFAR10Data", "DataError", "DataFormatError",
    "DataNotFoundError", "Split", "check_data", "crop_flip",
    "decode_images", "epoch_seed", "load_cifar10", "load_dataset", "synthetic_cifar10",
    "to_uint8",
]  # fmt: skip
