"""attnlib.data on damaged copies (issues 19, 33): a file of torchvision's download that is not the original
(damaged labels, an empty batch, anything changed) is refused unread in one line naming it; 16-bit PNGs are
scaled to 8 bits by rounding, never wrapped."""

from __future__ import annotations

import pickle
import struct
import zlib
from pathlib import Path

import numpy as np
import pytest
import torch
from test_data import random_images, write_download

from attnlib import data as D
from attnlib.data import cifar10
from attnlib.errors import ConfigError


@pytest.mark.parametrize("name", ["test_batch", "batches.meta"])
def test_a_changed_file_of_the_download_is_refused_in_one_line(tmp_path, monkeypatch, name, cli):
    """test_batch with one label fewer than images, batches.meta with label_names an int (issue 33's damaged
    copies): refused before they are unpickled, through the library and the command line (exit 2, nothing
    written)."""
    root = tmp_path / "cifar-pk"
    labels = torch.arange(20) % 10
    write_download(
        root, random_images(20, seed=2), labels, random_images(10, seed=3), labels[:10], monkeypatch
    )
    path = root / cifar10.PICKLE_DIR / name
    batch = pickle.loads(path.read_bytes())
    if name == "test_batch":
        batch["labels"] = batch["labels"][:-1]
    else:
        batch["label_names"] = 7
    path.write_bytes(pickle.dumps(batch, protocol=2))
    with pytest.raises(ConfigError) as err:
        D.load_cifar10(root)
    message = str(err.value)
    assert "\n" not in message and f"{path} is not the original file" in message, message
    code, _, stderr = cli(
        ["train", "vit", "--preset", "smoke", "--data", str(root), "--results-dir", str(tmp_path / "r")]
    )
    assert code == 2 and stderr.count("\n") == 1 and str(path) in stderr, stderr
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
    """torchvision >= 0.21 decodes a 16-bit PNG as uint16; int32 (what older versions gave) is refused."""
    for img in (torch.full((3, 2, 2), 70000, dtype=torch.int32), torch.zeros(3, 2, 2)):
        with pytest.raises(ValueError, match="neither 8 nor 16 bits"):
            D.to_uint8(img)
