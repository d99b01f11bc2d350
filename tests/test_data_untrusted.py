"""attnlib.data on damaged copies (issue 33): pickles whose labels do not match their images, whose
label_names is not a list, or whose test batch is empty are refused in one line naming the file; 16-bit
PNGs are scaled to 8 bits by rounding, never wrapped."""

from __future__ import annotations

import pickle
import struct
import zlib
from pathlib import Path

import numpy as np
import pytest
import torch
from test_data import random_images, write_pickles

from attnlib import data as D
from attnlib.data import cifar10
from attnlib.errors import ConfigError


@pytest.fixture
def pickles(tmp_path):
    root = tmp_path / "cifar-pk"
    train, test = random_images(20, seed=2), random_images(10, seed=3)
    labels = torch.arange(20) % 10
    write_pickles(root, train, labels, test, labels[:10], bytes_keys=False)
    return root


def _rewrite(path: Path, change) -> None:
    with open(path, "rb") as f:
        batch = pickle.load(f)
    change(batch)
    with open(path, "wb") as f:
        pickle.dump(batch, f, protocol=2)


DAMAGES = {
    "labels shorter than data": (cifar10.PICKLE_TEST, lambda b: b.__setitem__("labels", b["labels"][:-1])),
    "labels missing": (cifar10.PICKLE_TEST, lambda b: b.pop("labels")),
    "labels strings": (cifar10.PICKLE_TEST, lambda b: b.__setitem__("labels", ["cat"] * len(b["labels"]))),
    "labels 2**70": (cifar10.PICKLE_TEST, lambda b: b.__setitem__("labels", [2**70] * len(b["labels"]))),
    "labels outside 0..9": (
        cifar10.PICKLE_TRAIN[0],
        lambda b: b.__setitem__("labels", [10] * len(b["labels"])),
    ),
    "label_names an int": (cifar10.PICKLE_META, lambda b: b.__setitem__("label_names", 7)),
    "empty test batch": (
        cifar10.PICKLE_TEST,
        lambda b: b.update(data=np.zeros((0, 3072), dtype=np.uint8), labels=[], filenames=[]),
    ),
}


@pytest.mark.parametrize("damage", list(DAMAGES))
def test_damaged_pickles_are_refused_in_one_line(pickles, tmp_path, damage, cli):
    name, change = DAMAGES[damage]
    _rewrite(pickles / name, change)
    with pytest.raises(ConfigError) as err:
        D.load_cifar10(pickles, cache_dir=tmp_path / "cache")
    message = str(err.value)
    assert "\n" not in message and name in message, message
    code, _, stderr = cli(
        ["train", "vit", "--preset", "smoke", "--data", str(pickles), "--results-dir", str(tmp_path / "r")]
    )
    assert code == 2 and stderr.count("\n") == 1 and name in stderr, stderr
    assert not (tmp_path / "r").exists()


def _png16(path: Path, samples: np.ndarray) -> None:
    """A 16-bit PNG (grey (H, W) or RGB (H, W, 3)) written by hand: big-endian samples, filter 0 rows."""
    height, width = samples.shape[:2]
    colour = 2 if samples.ndim == 3 else 0
    rows = samples.astype(">u2").reshape(height, -1).tobytes()
    stride = len(rows) // height
    raw = b"".join(b"\x00" + rows[r * stride : (r + 1) * stride] for r in range(height))

    def chunk(kind: bytes, body: bytes) -> bytes:
        return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body))

    header = struct.pack(">IIBBBBB", width, height, 16, colour, 0, 0, 0)
    path.write_bytes(
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", header)
        + chunk(b"IDAT", zlib.compress(raw))
        + chunk(b"IEND", b"")
    )


@pytest.mark.parametrize("colour", ["rgb", "grey"])
def test_16_bit_png_is_scaled_by_rounding(tmp_path, colour):
    rng = np.random.default_rng(0)
    shape = (32, 32, 3) if colour == "rgb" else (32, 32)
    samples = rng.integers(0, 65536, size=shape)
    samples.flat[0] = 4660  # the reviewer's sample: 18, not 52 (4660 mod 256)
    samples.flat[1], samples.flat[2] = 65535, 0
    path = tmp_path / "x.png"
    _png16(path, samples)
    decoded = D.decode_images([path])[0]
    expected = np.rint(samples * 255 / 65535).astype(np.uint8)  # an independent derivation, in float
    expected = expected if colour == "rgb" else np.stack([expected] * 3, axis=-1)
    assert np.array_equal(decoded.permute(1, 2, 0).numpy(), expected)
    assert decoded.reshape(3, -1)[:, 0].tolist()[0] == 18


def test_to_uint8_refuses_what_no_png_holds():
    with pytest.raises(ValueError, match="outside 0..65535"):
        D.to_uint8(torch.full((3, 2, 2), 70000, dtype=torch.int32))
    with pytest.raises(ValueError, match="neither 8 nor 16 bits"):
        D.to_uint8(torch.zeros(3, 2, 2))
