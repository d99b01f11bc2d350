"""The sources of CIFAR-10, each giving a `CIFAR10Data`: torchvision's pickles (read by a restricted unpickler
that admits only what the genuine files hold), an ImageFolder tree of 32x32 PNG or JPEG files, and the
deterministic synthetic stand-in."""

from __future__ import annotations

import codecs
import hashlib
import os
import pickle
import warnings
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from attnlib.checks import SYNTHETIC_SIZES, check_positive_int
from attnlib.data.cifar10 import (
    CACHE_VERSION,
    CLASSES,
    IMAGE_SUFFIXES,
    LAYOUTS,
    PICKLE_DIR,
    PICKLE_META,
    PICKLE_TEST,
    PICKLE_TRAIN,
    CIFAR10Data,
    DataFormatError,
    DataNotFoundError,
    Split,
)
from attnlib.env import DATA_ENV


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
                src.parameter,
                str(src.path),
                f"{PICKLE_META} label_names is {names!r:.60}, not a list of names",
            )
        names = tuple(n.decode() if isinstance(n, bytes) else n for n in names)
        if names != CLASSES:
            raise DataFormatError(
                src.parameter, str(src.path), f"{PICKLE_META} label_names {names} are not {CLASSES}"
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
    """Decode 32x32 PNG/JPEG files to uint8 (N, 3, 32, 32) RGB with torchvision.io's decoders (C++: they
    release the GIL) on a thread pool. An unreadable or undecodable file, or one of another size, raises
    DataFormatError naming it."""
    from torchvision.io import ImageReadMode, decode_image

    def decode(path) -> torch.Tensor:
        try:
            blob = torch.from_numpy(np.frombuffer(Path(path).read_bytes(), np.uint8).copy())
        except OSError as err:
            raise DataFormatError(
                parameter, str(path), f"{path} cannot be read ({err.strerror or err})"
            ) from None
        try:
            img = decode_image(blob, mode=ImageReadMode.RGB)
        except Exception as err:
            raise DataFormatError(
                parameter, str(path), f"{path} could not be decoded as PNG or JPEG ({err})"
            ) from None
        try:
            img = to_uint8(img)
        except ValueError as err:
            raise DataFormatError(parameter, str(path), f"{path} {err}") from None
        if tuple(img.shape) != (3, 32, 32):
            raise DataFormatError(
                parameter, str(path), f"{path} is {tuple(img.shape)} (C, H, W), not (3, 32, 32)"
            )
        return img

    # torchvision >= 0.29 warns on every call that image decoding is moving to TorchCodec
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*decoding and encoding capabilities of TorchVision.*")
        with ThreadPoolExecutor(threads or min(8, os.cpu_count() or 1)) as pool:
            images = list(pool.map(decode, paths))  # list() re-raises the first error
    return torch.stack(images) if images else torch.empty(0, 3, 32, 32, dtype=torch.uint8)


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
