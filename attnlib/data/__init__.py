"""CIFAR-10 for attnlib: three sources, one uint8 cache, and augmented batches on the model's device.

Sources (all give the same `CIFAR10Data`):
- torchvision's pickled ``cifar-10-batches-py`` (``data_batch_1..5``, ``test_batch``, ``batches.meta``),
  read by a restricted unpickler that admits only what the genuine files hold (numpy arrays and dtypes,
  lists, dicts, bytes, str, int): a downloaded or shared file that would run code is refused, unrun;
- an ImageFolder tree ``train/<class>/*`` and ``test/<class>/*`` of 32x32 PNG or JPEG files;
- ``synthetic_cifar10``: deterministic class-dependent patterns for tests and smoke runs.

A folder source is decoded once into one ``.pt`` file of uint8 tensors in the cache directory (never inside
the source), keyed by a cheap fingerprint of the source files (names and sizes) and validated (shapes, dtypes,
key, CRC-32) on every load; an invalid cache is rebuilt, not trusted, and one that cannot be written (a full
disk) only costs a one-line warning: the run goes on from memory. Loads started together decode once: the
builder holds a lock on the cache folder, and the others wait for it and read its cache.

``Batches`` keeps the uint8 images on the device and makes each batch there: random crop with 4-pixel zero
padding, horizontal flip and per-channel normalisation, drawn from a generator seeded by ``(seed, epoch)``.

The modules: `cifar10` (classes, layouts, containers, errors), `sources`, `cache`, `spec` (check_data: the
one check of a data spec), `load` (the public loaders), `batches`. Their public names are imported here (the
file layouts, PICKLE_* and LAYOUTS, stay in `cifar10`); patch a name in its home module
(``attnlib.data.sources.decode_images``).
"""

from attnlib.data.batches import MEAN, PAD, STD, Batches, crop_flip, epoch_seed
from attnlib.data.cache import cache_directory
from attnlib.data.cifar10 import CLASSES, CIFAR10Data, DataError, DataFormatError, DataNotFoundError, Split
from attnlib.data.load import load_cifar10, load_dataset
from attnlib.data.sources import RefusedPickle, decode_images, looks_like_cifar10, synthetic_cifar10, to_uint8
from attnlib.data.spec import check_data

__all__ = [
    "CLASSES", "MEAN", "PAD", "STD", "Batches", "CIFAR10Data", "DataError", "DataFormatError",
    "DataNotFoundError", "RefusedPickle", "Split", "cache_directory", "check_data", "crop_flip",
    "decode_images", "epoch_seed", "load_cifar10", "load_dataset", "looks_like_cifar10", "synthetic_cifar10",
    "to_uint8",
]  # fmt: skip
