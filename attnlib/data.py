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
"""

from __future__ import annotations

import codecs
import contextlib
import fcntl
import hashlib
import io
import logging
import os
import pickle
import threading
import warnings
import zlib
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

from attnlib.checks import SYNTHETIC_SIZES, check_positive_int, is_synthetic, synthetic_sizes
from attnlib.env import CACHE_ENV, DATA_ENV
from attnlib.errors import ConfigError
from attnlib.util import atomic_write

log = logging.getLogger(__name__)

CLASSES = ("airplane", "automobile", "bird", "cat", "deer", "dog", "frog", "horse", "ship", "truck")
MEAN = (0.4914, 0.4822, 0.4465)  # per-channel mean of the training images (the papers' code)
STD = (0.2023, 0.1994, 0.2010)  # per-channel std used by the papers' code
PAD = 4  # zero padding of the random crop

PICKLE_DIR = "cifar-10-batches-py"
PICKLE_TRAIN = tuple(f"data_batch_{i}" for i in range(1, 6))
PICKLE_TEST = "test_batch"
PICKLE_META = "batches.meta"
IMAGE_SUFFIXES = {".png": "png", ".jpg": "jpeg", ".jpeg": "jpeg"}
CACHE_VERSION = 1
CACHE_TMP_SUFFIX = ".tmp"

LAYOUTS = (
    f"either torchvision's pickled files ({PICKLE_DIR}/ with {', '.join(PICKLE_TRAIN[:1])}..5, "
    f"{PICKLE_TEST}, {PICKLE_META}; directly in the folder or in {PICKLE_DIR}/ under it) "
    "or an ImageFolder tree train/<class>/*.png|jpg and test/<class>/*.png|jpg with the ten classes "
    f"{' '.join(CLASSES)}"
)
DOWNLOAD_HINT = (
    "Where the network allows, load_cifar10(root, download=True) lets torchvision download the original "
    "files into root."
)


# ----------------------------------------------------------------------------------------------------------
# Errors


class DataError(ConfigError):
    """Unusable data source; the message names the parameter, and the file or class at fault."""

    def __init__(self, parameter: str, value, message: str):
        self.parameter, self.value, self.allowed = parameter, value, LAYOUTS
        Exception.__init__(self, f"{parameter}: {message}")


class DataNotFoundError(DataError, FileNotFoundError):
    """No CIFAR-10 where we looked (also a FileNotFoundError)."""


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


# ----------------------------------------------------------------------------------------------------------
# Public loaders


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


def synthetic_cifar10(
    n_train: int = SYNTHETIC_SIZES[0], n_test: int = SYNTHETIC_SIZES[1], seed: int = 0
) -> CIFAR10Data:
    """A deterministic stand-in for CIFAR-10 with the same shapes and dtypes, and learnable classes.

    Class c has a mean colour mu_c and stripes at angle theta_c = pi c / 10; each image is
    x = mu_c + 48 sin(k (cos theta_c i + sin theta_c j) + phase) + noise, with a random phase per image.
    """
    for name, n in (("n_train", n_train), ("n_test", n_test)):
        check_positive_int(name, n, allowed="a positive integer")
    g = torch.Generator().manual_seed(seed)
    colours = 40 + 175 * torch.rand(len(CLASSES), 3, generator=g)  # mu_c, (10, 3)
    theta = torch.arange(len(CLASSES)) * torch.pi / len(CLASSES)
    i, j = torch.meshgrid(torch.arange(32.0), torch.arange(32.0), indexing="ij")
    k = 2 * torch.pi / 6  # stripe period of 6 pixels

    def split(n: int) -> Split:
        labels = torch.randperm(n, generator=g) % len(CLASSES)  # balanced, shuffled
        phase = 2 * torch.pi * torch.rand(n, 1, 1, generator=g)
        t = theta[labels].view(n, 1, 1)
        stripes = torch.sin(k * (torch.cos(t) * i + torch.sin(t) * j) + phase)  # (n, 32, 32)
        noise = 24 * torch.randn(n, 3, 32, 32, generator=g)
        x = colours[labels].view(n, 3, 1, 1) + 48 * stripes.unsqueeze(1) + noise
        return Split(x.round().clamp(0, 255).to(torch.uint8), labels.to(torch.int64))

    return CIFAR10Data(split(n_train), split(n_test), CLASSES, f"synthetic(seed={seed},n={n_train}+{n_test})")


def load_dataset(spec, cache_dir=None) -> CIFAR10Data:
    """``spec``: "synthetic", "synthetic:N_TRAIN:N_TEST", a CIFAR-10 folder, or None ($ATTNLIB_DATA)."""
    allowed = f"'synthetic', 'synthetic:N_TRAIN:N_TEST', or an existing folder holding {LAYOUTS}"
    if spec is None:
        return load_cifar10(None, cache_dir)
    if is_synthetic(spec):
        return synthetic_cifar10(*synthetic_sizes(spec, allowed))
    if not isinstance(spec, str | os.PathLike):
        raise ConfigError("data", spec, allowed)
    path = Path(spec).expanduser()
    if not path.is_dir():
        raise DataNotFoundError(
            "data", spec, f"got {str(spec)!r}, which is not an existing folder; allowed: {allowed}"
        )
    return _load_folder(path, cache_directory(cache_dir), "data")


def cache_directory(cache_dir=None) -> Path:
    """The cache folder: ``cache_dir``, else ``$ATTNLIB_CACHE``, else ``$XDG_CACHE_HOME/attnlib`` (~/.cache)."""
    if cache_dir is None:
        cache_dir = os.environ.get(CACHE_ENV) or None
    if cache_dir is None:
        cache_dir = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "attnlib"
    return Path(cache_dir).expanduser()


# ----------------------------------------------------------------------------------------------------------
# Folder sources: detection, fingerprint, decoding


@dataclass
class _Source:
    """A folder source: its format, resolved folder, files (relative paths) and a provenance string."""

    kind: str  # "pickle" or "imagefolder"
    path: Path
    files: list[str]  # paths relative to `path`; imagefolder: "train/cat/0001.jpg"
    labels: list[int]  # imagefolder: class index of each file; pickle: empty
    parameter: str  # the user-facing parameter that named this folder (for error messages)

    @property
    def description(self) -> str:
        if self.kind == "pickle":
            return f"torchvision-pickle:{self.path}"
        formats = sorted({IMAGE_SUFFIXES[os.path.splitext(f)[1].lower()] for f in self.files})
        return f"imagefolder-{'+'.join(formats)}:{self.path}"

    def fingerprint(self) -> str:
        """sha256 of (format, resolved path, file names and each file's size).

        Sizes, not modification times: a copy of the same files elsewhere in time (a data folder that is
        re-materialised for every session, ``cp -r`` without ``-p``) keeps its key and its cache, while an
        added, removed, renamed or resized file changes it. Stat-ing 60,000 files takes about 0.4 s. A file
        rewritten in place at the same size is not noticed (delete the cache file).
        """
        h = hashlib.sha256(f"{CACHE_VERSION}|{self.kind}|{self.path}".encode())
        h.update("\0".join(self.files).encode())
        for rel in self.files:
            h.update(f"|{os.stat(self.path / rel).st_size}".encode())
        return h.hexdigest()


def looks_like_cifar10(root: Path) -> bool:
    """Whether `root` holds one of the layouts `load_cifar10` reads (pickles, or train/ and test/ folders),
    without reading them: a cheap check of a parameter (``data=/etc`` is refused at once)."""
    root = Path(root)
    pickles = any((f / n).is_file() for f in (root / PICKLE_DIR, root) for n in (*PICKLE_TRAIN, PICKLE_TEST))
    return pickles or ((root / "train").is_dir() and (root / "test").is_dir())


def _detect(root: Path, parameter: str) -> _Source | None:
    """The layout found in ``root`` (pickles first, then ImageFolder), or None."""
    for folder in (root / PICKLE_DIR, root):
        if any((folder / name).is_file() for name in (*PICKLE_TRAIN, PICKLE_TEST)):
            missing = [n for n in (*PICKLE_TRAIN, PICKLE_TEST) if not (folder / n).is_file()]
            if missing:
                raise DataFormatError(parameter, str(root), f"{folder} lacks {', '.join(missing)}")
            files = [n for n in (*PICKLE_TRAIN, PICKLE_TEST, PICKLE_META) if (folder / n).is_file()]
            return _Source("pickle", folder.resolve(), files, [], parameter)
    splits = [s for s in ("train", "test") if (root / s).is_dir()]
    if not splits:
        return None
    if len(splits) == 1:
        other = "test" if splits == ["train"] else "train"
        raise DataFormatError(parameter, str(root), f"{root} has {splits[0]}/ but no {other}/ folder")
    src = _Source("imagefolder", root.resolve(), [], [], parameter)
    for split in ("train", "test"):
        for rel, label in _scan_split(src.path, split, parameter):
            src.files.append(rel)
            src.labels.append(label)
    return src


def _scan_split(root: Path, split: str, parameter: str) -> list[tuple[str, int]]:
    """("split/class/name", label) in class order, then file-name order, as torchvision's ImageFolder."""
    folder = root / split
    with os.scandir(folder) as it:
        classes = {e.name for e in it if e.is_dir() and not e.name.startswith(".")}
    expected = f"expected the class folders {' '.join(CLASSES)}"
    missing = [c for c in CLASSES if c not in classes]
    if missing:
        raise DataFormatError(
            parameter, str(folder), f"{folder} has no class folder {', '.join(missing)}; {expected}"
        )
    extra = sorted(classes - set(CLASSES))
    if extra:
        raise DataFormatError(
            parameter, str(folder), f"{folder} has unexpected folder(s) {', '.join(extra)}; {expected}"
        )
    out = []
    for label, name in enumerate(CLASSES):
        with os.scandir(folder / name) as it:
            entries = sorted((e for e in it if not e.name.startswith(".")), key=lambda e: e.name)
        if not entries:
            raise DataFormatError(
                parameter, str(folder / name), f"class folder {folder / name} has no images"
            )
        for e in entries:
            if os.path.splitext(e.name)[1].lower() not in IMAGE_SUFFIXES or not e.is_file():
                raise DataFormatError(
                    parameter, e.path, f"{e.path} is not an image file (expected *.png, *.jpg or *.jpeg)"
                )
            out.append((f"{split}/{name}/{e.name}", label))
    return out


def _read_pickle_split(paths: list[Path], parameter: str) -> Split:
    """Concatenate pickled batches: "data" uint8 (N, 3072) in channel-major RGB rows, "labels" N ints."""
    images, labels = [], []
    for path in paths:
        batch = _unpickle(path, parameter)
        data = np.asarray(batch.get("data"))
        if data.dtype != np.uint8 or data.ndim != 2 or data.shape[1] != 3 * 32 * 32:
            raise DataFormatError(parameter, str(path), f"{path}: 'data' is not a uint8 (N, 3072) array")
        if data.shape[0] < 1:
            raise DataFormatError(parameter, str(path), f"{path}: 'data' holds no images")
        try:  # N integers in 0..9: not missing, shorter, strings, or beyond int64 (2**70: dtype object)
            y = np.asarray(batch.get("labels"))
            ok = y.ndim == 1 and y.dtype.kind in "iu" and len(y) == len(data)
            ok = ok and bool(((y >= 0) & (y < len(CLASSES))).all())
        except (TypeError, ValueError, OverflowError):
            ok = False
        if not ok:
            raise DataFormatError(
                parameter, str(path), f"{path}: 'labels' is not {len(data)} integers in 0..{len(CLASSES) - 1}"
            )
        images.append(torch.from_numpy(data.reshape(-1, 3, 32, 32).copy()))
        labels.append(torch.as_tensor(y.astype(np.int64)))
    return Split(torch.cat(images), torch.cat(labels))


def _latin1_encode(text: str, encoding: str = "utf-8") -> bytes:
    """``_codecs.encode`` as pickles of bytes use it (protocol 2 written by Python 3), latin-1 only."""
    if codecs.lookup(encoding).name != "iso8859-1":
        raise pickle.UnpicklingError(f"_codecs.encode with encoding {encoding!r}")
    return codecs.encode(text, "latin1")


def _numpy_globals() -> dict[tuple[str, str], object]:
    """The only globals a CIFAR-10 pickle refers to: numpy's array and dtype reconstructors."""
    import importlib

    try:  # numpy >= 2
        multiarray, numeric = (importlib.import_module(f"numpy._core.{m}") for m in ("multiarray", "numeric"))
    except ImportError:  # numpy 1.x
        multiarray, numeric = (importlib.import_module(f"numpy.core.{m}") for m in ("multiarray", "numeric"))
    allowed = {
        ("numpy", "ndarray"): np.ndarray,
        ("numpy", "dtype"): np.dtype,
        ("_codecs", "encode"): _latin1_encode,  # bytes in protocol 2 pickles written by Python 3
    }
    for module in ("numpy.core", "numpy._core"):  # numpy 1.x wrote numpy.core, numpy 2 writes numpy._core
        allowed[(f"{module}.multiarray", "_reconstruct")] = multiarray._reconstruct
        allowed[(f"{module}.numeric", "_frombuffer")] = numeric._frombuffer  # protocol 5
    return allowed


class RefusedPickle(pickle.UnpicklingError):
    """A pickle that refers to something a CIFAR-10 file never holds (a function, a class...)."""


class _CIFARUnpickler(pickle.Unpickler):
    """Admits only what torchvision's CIFAR-10 files contain: dicts, lists, bytes, str, int and numpy
    arrays and dtypes. Any other global (``os.system``, ``builtins.eval``...) is refused before it is
    looked up, so that a malicious file cannot run code; persistent ids are refused by the base class."""

    _allowed = _numpy_globals()

    def find_class(self, module: str, name: str):
        try:
            return self._allowed[(module, name)]
        except KeyError:
            raise RefusedPickle(f"{module}.{name}") from None


def _unpickle(path: Path, parameter: str) -> dict:
    """A CIFAR-10 pickle as a dict with str keys (Python 2 originals and bytes-keyed copies alike), read by
    the restricted `_CIFARUnpickler`: a file that refers to anything else is refused, naming it."""
    try:
        with open(path, "rb") as f:
            d = _CIFARUnpickler(f, encoding="latin1").load()
        if not isinstance(d, dict):
            raise TypeError(f"holds a {type(d).__name__}, not a dict")
        return {k.decode() if isinstance(k, bytes) else k: v for k, v in d.items()}
    except RefusedPickle as err:
        raise DataFormatError(
            parameter,
            str(path),
            f"{path} refers to {err}, which a CIFAR-10 file never holds; refused without running it "
            "(only numpy arrays and dtypes, lists, dicts, bytes, str and int are read)",
        ) from None
    except Exception as err:
        raise DataFormatError(
            parameter, str(path), f"{path} is not a readable CIFAR-10 pickle ({type(err).__name__}: {err})"
        ) from None


def _decode_pickles(src: _Source) -> CIFAR10Data:
    train = _read_pickle_split([src.path / n for n in PICKLE_TRAIN], src.parameter)
    test = _read_pickle_split([src.path / PICKLE_TEST], src.parameter)
    if PICKLE_META in src.files:
        names = _unpickle(src.path / PICKLE_META, src.parameter).get("label_names", [])
        if not isinstance(names, list | tuple):  # an int, a dict...
            raise DataFormatError(
                src.parameter, str(src.path), f"{PICKLE_META} label_names is {names!r:.60}, not a list of names"
            )
        names = tuple(n.decode() if isinstance(n, bytes) else n for n in names)
        if names != CLASSES:
            raise DataFormatError(
                src.parameter, str(src.path), f"{PICKLE_META} label_names {names} are not {CLASSES}"
            )
    for name, split in (("train", train), ("test", test)):
        if len(split) and not 0 <= int(split.labels.min()) <= int(split.labels.max()) < len(CLASSES):
            raise DataFormatError(
                src.parameter, str(src.path), f"{name} labels outside 0..{len(CLASSES) - 1}"
            )
    return CIFAR10Data(train, test, CLASSES, src.description)


def _decode_imagefolder(src: _Source) -> CIFAR10Data:
    paths = [src.path / f for f in src.files]
    images = decode_images(paths, src.parameter)
    labels = torch.tensor(src.labels, dtype=torch.int64)
    is_train = torch.tensor([f.startswith("train/") for f in src.files])
    train, test = Split(images[is_train], labels[is_train]), Split(images[~is_train], labels[~is_train])
    return CIFAR10Data(train, test, CLASSES, src.description)


def decode_images(paths: list[Path], parameter: str = "root", threads: int | None = None) -> torch.Tensor:
    """Decode 32x32 PNG/JPEG files to uint8 (N, 3, 32, 32) RGB, in chunks on a thread pool.

    torchvision.io's decoders (C++, they release the GIL) where available, else PIL. An undecodable file or
    one of another size raises DataFormatError naming it.
    """
    decode_jpegs, decode_one = _decoders()
    out = torch.empty(len(paths), 3, 32, 32, dtype=torch.uint8)
    chunk = 1024

    def fail(i: int, why: str):
        return DataFormatError(parameter, str(paths[i]), f"{paths[i]} {why}")

    def work(start: int) -> None:
        ids = range(start, min(start + chunk, len(paths)))
        blobs = []
        for i in ids:
            try:
                blobs.append(_read_bytes(paths[i]))
            except OSError as err:
                raise fail(i, f"cannot be read ({err.strerror or err})") from None
        images = None
        if all(IMAGE_SUFFIXES[Path(paths[i]).suffix.lower()] == "jpeg" for i in ids):
            try:
                images = decode_jpegs(blobs)  # one call for the chunk
            except RuntimeError:
                images = None  # decode one by one below, to name the bad file
        for k, i in enumerate(ids):
            try:
                img = images[k] if images is not None else decode_one(blobs[k])
            except Exception as err:
                raise fail(i, f"could not be decoded as PNG or JPEG ({err})") from None
            try:
                img = to_uint8(img)
            except ValueError as err:
                raise fail(i, str(err)) from None
            if tuple(img.shape) != (3, 32, 32):
                raise fail(i, f"is {tuple(img.shape)} (C, H, W), not (3, 32, 32)")
            out[i] = img

    # torchvision >= 0.29 warns on every call that image decoding is moving to TorchCodec
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*decoding and encoding capabilities of TorchVision.*")
        with ThreadPoolExecutor(threads or min(8, os.cpu_count() or 1)) as pool:
            list(pool.map(work, range(0, len(paths), chunk)))  # list() re-raises the first error
    return out


def to_uint8(img: torch.Tensor) -> torch.Tensor:
    """A decoded image's samples as uint8: 8-bit as they are, 16-bit (a 16-bit PNG: torchvision gives
    uint16) scaled to 0..255 by rounding, round(v · 255 / 65535) (never wrapped: 4660 -> 18, not 52);
    ValueError for anything else."""
    if img.dtype == torch.uint8:
        return img
    if img.dtype in (torch.uint16, torch.int32, torch.int64) and not img.is_floating_point():
        v = img.to(torch.int64)
        if v.numel() and (int(v.min()) < 0 or int(v.max()) > 65535):
            raise ValueError("has samples outside 0..65535, not a PNG's")
        return ((v * 255 + 32767) // 65535).to(torch.uint8)  # round(v * 255 / 65535): no ties occur
    raise ValueError(f"has samples of type {img.dtype}, neither 8 nor 16 bits")


def _read_bytes(path) -> torch.Tensor:
    """A file's bytes as a uint8 tensor (one read into a writable buffer)."""
    with open(path, "rb", buffering=0) as f:
        buf = bytearray(os.fstat(f.fileno()).st_size)
        f.readinto(buf)
    return torch.frombuffer(buf, dtype=torch.uint8) if buf else torch.empty(0, dtype=torch.uint8)


def _decoders():
    """(decode a list of JPEG byte tensors, decode one PNG or JPEG byte tensor) -> uint8 (3, H, W) RGB."""
    try:
        from torchvision.io import ImageReadMode, decode_image, decode_jpeg
    except ImportError:  # a torchvision without image decoders: PIL
        import io

        from PIL import Image

        def decode_pil(blob: torch.Tensor) -> torch.Tensor:
            image = Image.open(io.BytesIO(blob.numpy().tobytes()))
            if image.mode.startswith("I"):  # 16-bit grey: PIL's convert would clip it, to_uint8 scales it
                grey = torch.from_numpy(np.asarray(image).astype(np.int64))
                return grey.unsqueeze(0).expand(3, -1, -1)
            rgb = np.asarray(image.convert("RGB"))
            return torch.from_numpy(rgb.copy()).permute(2, 0, 1)

        return (lambda blobs: [decode_pil(b) for b in blobs]), decode_pil
    rgb = ImageReadMode.RGB
    return (lambda blobs: decode_jpeg(blobs, mode=rgb)), (lambda blob: decode_image(blob, mode=rgb))


def _download(root: Path, parameter: str) -> None:
    import torchvision

    try:
        torchvision.datasets.CIFAR10(str(root), train=True, download=True)
    except Exception as err:
        raise DataNotFoundError(
            parameter,
            str(root),
            f"download=True: torchvision could not download CIFAR-10 into {root} ({err}). Without network "
            f"access, point root or {DATA_ENV} at a local copy holding {LAYOUTS}.",
        ) from err


# ----------------------------------------------------------------------------------------------------------
# Cache


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
        where = f" (from {DATA_ENV})" if parameter == DATA_ENV else ""
        raise DataNotFoundError(
            parameter,
            str(root),
            f"no CIFAR-10 in {root}{where}: looked for {root / PICKLE_DIR}/, pickles directly in {root}, and "
            f"{root / 'train'}/ + {root / 'test'}/. Expected {LAYOUTS}. {DOWNLOAD_HINT}",
        )
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
    """Hold an exclusive flock on the cache folder while a cache is decoded and written, so that concurrent
    loads decode once. Where the folder cannot be made or locked, go on unlocked (the cache is optional)."""
    with contextlib.ExitStack() as stack:
        try:
            cache.mkdir(parents=True, exist_ok=True)
            fd = os.open(cache, os.O_RDONLY | os.O_DIRECTORY)
            stack.callback(os.close, fd)  # closing releases the lock
            fcntl.flock(fd, fcntl.LOCK_EX)
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
            fcntl.flock(f.fileno(), fcntl.LOCK_EX)
            f.write(buf.getbuffer())
            os.fchmod(f.fileno(), 0o644)  # the cache may be shared
    except Exception as err:  # noqa: BLE001 -- whatever failed, the data in memory is good
        if isinstance(err, OSError) and err.strerror:
            named = err.filename and err.filename != str(path)  # another file than the cache named above
            reason = err.strerror + (f" ({err.filename})" if named else "")
        else:
            reason = f"{type(err).__name__}: {err}"
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
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            continue  # a live writer
        else:
            with contextlib.suppress(OSError):
                os.remove(tmp)
                log.info("removed %s, a temporary cache file left by a stopped run", tmp)
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


# ----------------------------------------------------------------------------------------------------------
# Batches


def epoch_seed(seed: int, epoch: int) -> int:
    """A well-mixed 63-bit seed for epoch ``epoch`` of run ``seed`` (numpy SeedSequence)."""
    return int(np.random.SeedSequence([seed, epoch]).generate_state(1, dtype=np.uint64)[0] >> 1)


def crop_flip(x: torch.Tensor, offsets: torch.Tensor, flips: torch.Tensor) -> torch.Tensor:
    """Random crop with zero padding, then horizontal flip, for a whole batch in one gather.

    x uint8 (B, C, H, W); offsets int64 (B, 2) = (dy, dx) in 0..2*PAD; flips bool (B,).
    out[b, c, i, j] = pad(x)[b, c, dy + i, dx + (W - 1 - j if flip else j)].
    """
    B, C, H, W = x.shape
    Wp = W + 2 * PAD
    xp = F.pad(x, (PAD, PAD, PAD, PAD)).reshape(B, C, -1)  # zeros around, (B, C, (H + 8) * (W + 8))
    i = torch.arange(H, device=x.device)
    j = torch.arange(W, device=x.device)
    rows = offsets[:, 0, None] + i  # (B, H)
    cols = offsets[:, 1, None] + torch.where(flips[:, None], W - 1 - j, j)  # (B, W)
    flat = (rows[:, :, None] * Wp + cols[:, None, :]).view(B, 1, H * W)  # index into the padded image
    return xp.gather(2, flat.expand(B, C, H * W)).view(B, C, H, W)


class Batches:
    """Mini-batches of one split on ``device``: ``epoch(e)`` yields ``(x, y)``, ``len()`` = steps per epoch.

    x float32 (B, 3, 32, 32) normalised with MEAN/STD, y int64 (B,). With ``train``: shuffled, cropped and
    flipped, all drawn from a CPU generator seeded by (seed, e), so epoch e is the same whatever ran before.
    Without: the split in order, last partial batch kept. ``batch_size`` is the global batch; with
    ``world_size`` > 1 rank r gets rows r::world_size of every global batch (possibly empty in a last
    partial test batch, so that every rank takes the same number of steps).
    """

    def __init__(
        self,
        split: Split,
        batch_size: int,
        train: bool,
        seed: int = 0,
        device="cpu",
        rank: int = 0,
        world_size: int = 1,
        drop_last: bool | None = None,
    ):
        check_positive_int("batch_size", batch_size, allowed="a positive integer")
        check_positive_int("world_size", world_size, allowed="a positive integer")
        if batch_size % world_size:
            raise ConfigError("batch_size", batch_size, f"a multiple of world_size={world_size}")
        if not isinstance(rank, int) or not 0 <= rank < world_size:
            raise ConfigError("rank", rank, f"0..{world_size - 1}")
        if not isinstance(seed, int | np.integer) or seed < 0:
            raise ConfigError("seed", seed, "a non-negative integer (the same on every rank)")
        self.batch_size, self.train, self.seed = batch_size, train, seed
        self.rank, self.world_size = rank, world_size
        self.drop_last = train if drop_last is None else drop_last
        self.device = torch.device(device)
        self.images = split.images.to(self.device)  # uint8, moved once
        self.labels = split.labels.to(self.device)
        self.mean = torch.tensor(MEAN, device=self.device).view(1, 3, 1, 1) * 255
        self.std = torch.tensor(STD, device=self.device).view(1, 3, 1, 1) * 255
        n = len(split)
        self.steps = n // batch_size if self.drop_last else -(-n // batch_size)
        if self.steps == 0:
            raise ConfigError(
                "batch_size", batch_size, f"at most the split size {n} when dropping the last batch"
            )

    def __len__(self) -> int:
        return self.steps

    def draw(self, epoch: int) -> tuple[torch.Tensor, torch.Tensor | None, torch.Tensor | None]:
        """(order (N,), crop offsets (N, 2) or None, flips (N,) or None) for ``epoch``, on the CPU."""
        n = self.images.shape[0]
        if not self.train:
            return torch.arange(n), None, None
        g = torch.Generator().manual_seed(epoch_seed(int(self.seed), int(epoch)))
        order = torch.randperm(n, generator=g)
        offsets = torch.randint(0, 2 * PAD + 1, (n, 2), generator=g)
        flips = torch.rand(n, generator=g) < 0.5
        return order, offsets, flips

    def epoch(self, epoch: int) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
        """The ``len(self)`` batches of epoch ``epoch``: (x float32 (B, 3, 32, 32), y int64 (B,)) on device."""
        if not isinstance(epoch, int | np.integer) or epoch < 0:
            raise ConfigError("epoch", epoch, "a non-negative integer")
        return self._batches(epoch)

    def _batches(self, epoch: int) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
        order, offsets, flips = (t if t is None else t.to(self.device) for t in self.draw(epoch))
        for step in range(self.steps):
            start, stop = step * self.batch_size, min((step + 1) * self.batch_size, order.shape[0])
            # this rank's rows of the global batch: start + rank, start + rank + world_size, ...
            pos = torch.arange(start + self.rank, stop, self.world_size, device=self.device)
            idx = order[pos]
            x = self.images[idx]
            if self.train:
                x = crop_flip(x, offsets[pos], flips[pos])
            yield (x.float() - self.mean) / self.std, self.labels[idx]  # (x/255 - MEAN) / STD

    def __iter__(self):
        raise TypeError("iterate over batches.epoch(e), so that each epoch has its own seed")
