"""CIFAR-10 for attnlib: three sources and augmented batches on the model's device.

The modules: `cifar10` (classes, layouts, containers, errors), `sources` (torchvision's download, read only
after its md5 check; an ImageFolder tree of 32x32 PNG or JPEG files; ``synthetic_cifar10`` for tests and
smoke runs: all give the same `CIFAR10Data`), `load` (what data a spec names: ``check_data``, the one check
of a data spec, and the public loaders; nothing cached), `batches` (``Batches``: random crop, flip and
normalisation made on the model's device, deterministic in ``(seed, epoch)``). Their public names are
imported here; patch a name in its home module (``attnlib.data.sources.decode_images``).
"""

from attnlib.data.batches import MEAN, PAD, STD, Batches, crop_flip, epoch_seed
from attnlib.data.cifar10 import CLASSES, CIFAR10Data, DataError, DataFormatError, DataNotFoundError, Split
from attnlib.data.load import check_data, load_cifar10, load_dataset
from attnlib.data.sources import decode_images, synthetic_cifar10, to_uint8

__all__ = [
    "CLASSES", "MEAN", "PAD", "STD", "Batches", "CIFAR10Data", "DataError", "DataFormatError",
    "DataNotFoundError", "Split", "check_data", "crop_flip",
    "decode_images", "epoch_seed", "load_cifar10", "load_dataset", "synthetic_cifar10",
    "to_uint8",
]  # fmt: skip
