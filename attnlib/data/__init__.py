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
one check of a data spec), `load` (the public loaders), `batches`. The names of the former module
attnlib/data.py are all here, each imported from its home on first use.
"""

from attnlib.util import reexport

HOMES = {
    "attnlib.checks": ("SYNTHETIC_SIZES", "is_synthetic", "synthetic_sizes"),
    "attnlib.env": ("CACHE_ENV", "DATA_ENV"),
    "attnlib.data.batches": ("MEAN", "PAD", "STD", "Batches", "crop_flip", "epoch_seed"),
    "attnlib.data.cache": (
        "cache_directory", "log", "_building", "_checksum", "_load_folder", "_read_cache", "_sweep_stale",
        "_unreadable", "_write_cache",
    ),
    "attnlib.data.cifar10": (
        "CACHE_TMP_SUFFIX", "CACHE_VERSION", "CLASSES", "DOWNLOAD_HINT", "IMAGE_SUFFIXES", "LAYOUTS", "PICKLE_DIR",
        "PICKLE_META", "PICKLE_TEST", "PICKLE_TRAIN", "CIFAR10Data", "DataError", "DataFormatError",
        "DataNotFoundError", "Split", "no_cifar10",
    ),
    "attnlib.data.load": ("load_cifar10", "load_dataset"),
    "attnlib.data.sources": (
        "RefusedPickle", "decode_images", "looks_like_cifar10", "synthetic_cifar10", "to_uint8",
        "_CIFARUnpickler", "_Source", "_decode_imagefolder", "_decode_pickles", "_decoders", "_detect",
        "_download", "_latin1_encode", "_numpy_globals", "_read_bytes", "_read_pickle_split", "_scan_split",
        "_unpickle",
    ),
    "attnlib.data.spec": ("check_data",),
}  # fmt: skip

reexport(__name__, HOMES)  # monkeypatch.setattr(attnlib.data, "decode_images", ...) reaches the sources
