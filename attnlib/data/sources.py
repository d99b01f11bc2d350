"""The sources of CIFAR-10, each giving a `CIFAR10Data`: torchvision's download (read by torchvision, which
unpickles a file only once its md5 is the original's), an ImageFolder tree of 32x32 PNG or JPEG files, and the
deterministic synthetic stand-in."""

from __future__ import annotations

import functools
import os
import warnings
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import torch

from attnlib.checks import SYNTHETIC_SIZES, check_positive_int
from attnlib.data.cifar10 import (
    CLASSES,
    IMAGE_SUFFIXES,
    PICKLE_DIR,
    CIFAR10Data,
    DataFormatError,
    Split,
)


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


def _detect(root: Path, parameter: str) -> Callable[[], CIFAR10Data] | None:
    """The reader of the layout found in ``root`` (torchvision's download first, then ImageFolder), or None;
    nothing but the listing of ``root`` is read before the reader is called."""
    if (root / PICKLE_DIR).is_dir():
        return functools.partial(_read_pickles, (root / PICKLE_DIR).resolve(), parameter)
    splits = [s for s in ("train", "test") if (root / s).is_dir()]
    if not splits:
        return None
    if len(splits) == 1:
        other = "test" if splits == ["train"] else "train"
        raise DataFormatError(parameter, str(root), f"{root} has {splits[0]}/ but no {other}/ folder")
    return functools.partial(_read_imagefolder, root.resolve(), parameter)


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


def _read_pickles(path: Path, parameter: str) -> CIFAR10Data:
    """torchvision's download (the folder ``path``), read by torchvision.datasets.CIFAR10, which unpickles a
    file only once its md5 is the original's: a changed file (one that would run code when unpickled
    included) is refused unread, named here with the first file that fails."""
    from torchvision.datasets import CIFAR10
    from torchvision.datasets.utils import check_integrity

    files = [*CIFAR10.train_list, *CIFAR10.test_list, [CIFAR10.meta["filename"], CIFAR10.meta["md5"]]]
    for name, md5 in files:
        file = path / name
        if not check_integrity(str(file), md5):
            what = "is not the original file (another md5)" if file.exists() else "is missing"
            raise DataFormatError(
                parameter, str(file), f"{file} {what}: only torchvision's CIFAR-10 files are read"
            )
    splits = []
    for train in (True, False):
        ds = CIFAR10(str(path.parent), train=train)
        # torchvision's (N, 32, 32, 3) back to the files' (N, 3, 32, 32)
        images = torch.from_numpy(ds.data).permute(0, 3, 1, 2).contiguous()
        splits.append(Split(images, torch.tensor(ds.targets, dtype=torch.int64)))
    return CIFAR10Data(*splits, CLASSES, f"torchvision-pickle:{path}")


def _read_imagefolder(root: Path, parameter: str) -> CIFAR10Data:
    """The ImageFolder tree in ``root``: both splits' folders checked, then their images decoded."""
    listed = [_scan_split(root, split, parameter) for split in ("train", "test")]
    splits, formats = [], set()
    for files, labels in (zip(*entries, strict=True) for entries in listed):
        formats |= {IMAGE_SUFFIXES[os.path.splitext(f)[1].lower()] for f in files}
        splits.append(Split(decode_images([root / f for f in files], parameter), torch.tensor(labels)))
    return CIFAR10Data(*splits, CLASSES, f"imagefolder-{'+'.join(sorted(formats))}:{root}")


def decode_images(paths: list[Path], parameter: str = "root") -> torch.Tensor:
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
        with ThreadPoolExecutor(min(8, os.cpu_count() or 1)) as pool:
            images = list(pool.map(decode, paths))  # list() re-raises the first error
    return torch.stack(images) if images else torch.empty(0, 3, 32, 32, dtype=torch.uint8)


def to_uint8(img: torch.Tensor) -> torch.Tensor:
    """A decoded image's samples as uint8: 8-bit as they are, 16-bit (a 16-bit PNG: torchvision gives
    uint16) scaled to 0..255 by rounding, round(v · 255 / 65535) (never wrapped: 4660 -> 18, not 52);
    ValueError for anything else."""
    if img.dtype == torch.uint8:
        return img
    if img.dtype == torch.uint16:  # torchvision >= 0.21 (pyproject's minimum): never int32 any more
        v = img.to(torch.int64)
        return ((v * 255 + 32767) // 65535).to(torch.uint8)  # round(v * 255 / 65535): no ties occur
    raise ValueError(f"has samples of type {img.dtype}, neither 8 nor 16 bits")
