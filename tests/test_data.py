"""attnlib.data: both folder formats, the errors, the synthetic set and the batches.

Every test builds its own tiny data in tmp_path; none touches the network. The one test on the real copy
is skipped where it is absent. Its reliability test (issue 9): a bad image folder through the command line.
"""

import hashlib
import os
import pickle
import re
import shutil
from pathlib import Path

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from helpers import image_folder
from PIL import Image

from attnlib import data as D
from attnlib.data import cifar10
from attnlib.env import DATA_ENV
from attnlib.errors import ConfigError

TORCHVISION_CLASSES = (
    "airplane",
    "automobile",
    "bird",
    "cat",
    "deer",
    "dog",
    "frog",
    "horse",
    "ship",
    "truck",
)


def random_images(n: int, seed: int) -> torch.Tensor:
    return torch.randint(
        0, 256, (n, 3, 32, 32), generator=torch.Generator().manual_seed(seed), dtype=torch.uint8
    )


def save_image(x: torch.Tensor, path: Path, **kw) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    Image.fromarray(x.permute(1, 2, 0).numpy()).save(path, **kw)


def pil_decode(path: Path) -> torch.Tensor:
    return torch.from_numpy(np.asarray(Image.open(path).convert("RGB")).copy()).permute(2, 0, 1)


@pytest.fixture
def imagefolder(tmp_path):
    """train/<class>/{0,1}.png (lossless) and test/<class>/0.jpg; returns (root, train images, test paths)."""
    root = tmp_path / "cifar-if"
    train = random_images(20, seed=1)
    test_paths = []
    for c, name in enumerate(D.CLASSES):
        # written in reverse name order: the loader must sort by file name, as torchvision's ImageFolder
        save_image(train[2 * c + 1], root / "train" / name / "1.png")
        save_image(train[2 * c], root / "train" / name / "0.png")
        test_paths.append(root / "test" / name / "0.jpg")
        save_image(random_images(1, seed=100 + c)[0], test_paths[-1], quality=90)
    return root, train, test_paths


def write_download(root: Path, train, train_labels, test, test_labels, monkeypatch) -> None:
    """torchvision's download in miniature: root/cifar-10-batches-py with 5 train batches, test_batch and
    batches.meta as the originals hold them (protocol-2 pickles of dicts with str keys), taken by torchvision
    for the originals (their md5s patched into its CIFAR10 class)."""
    from torchvision.datasets import CIFAR10

    folder = root / cifar10.PICKLE_DIR
    folder.mkdir(parents=True)
    chunks = [*zip(train.chunk(5), train_labels.chunk(5), strict=True), (test, test_labels)]
    for (name, _), (x, y) in zip(CIFAR10.train_list + CIFAR10.test_list, chunks, strict=True):
        batch = {"batch_label": name, "labels": y.tolist(), "data": x.reshape(len(x), 3072).numpy()}
        (folder / name).write_bytes(pickle.dumps(batch, protocol=2))
    (folder / "batches.meta").write_bytes(pickle.dumps({"label_names": list(D.CLASSES)}, protocol=2))

    def md5(name: str) -> str:
        return hashlib.md5((folder / name).read_bytes()).hexdigest()

    monkeypatch.setattr(CIFAR10, "train_list", [[n, md5(n)] for n, _ in CIFAR10.train_list])
    monkeypatch.setattr(CIFAR10, "test_list", [[n, md5(n)] for n, _ in CIFAR10.test_list])
    monkeypatch.setattr(CIFAR10, "meta", {**CIFAR10.meta, "md5": md5("batches.meta")})


@pytest.fixture
def pickled(tmp_path, monkeypatch):
    """A miniature torchvision download in root/cifar-10-batches-py (`write_download`)."""
    root = tmp_path / "cifar-pk"
    train, test = random_images(20, seed=2), random_images(10, seed=3)
    g = torch.Generator().manual_seed(4)
    train_labels, test_labels = (
        torch.randint(0, 10, (20,), generator=g),
        torch.randint(0, 10, (10,), generator=g),
    )
    write_download(root, train, train_labels, test, test_labels, monkeypatch)
    return root, (train, train_labels, test, test_labels)


# ----------------------------------------------------------------------------------------------------------
# Formats and class order


def test_classes_are_torchvision_order():
    assert D.CLASSES == TORCHVISION_CLASSES
    assert D.MEAN == (0.4914, 0.4822, 0.4465) and D.STD == (0.2023, 0.1994, 0.2010)


def test_imagefolder_png_and_jpeg(imagefolder):
    root, train, test_paths = imagefolder
    d = D.load_cifar10(root)
    assert d.classes == TORCHVISION_CLASSES
    assert d.source == f"imagefolder-jpeg+png:{root.resolve()}"
    assert d.train.images.dtype == torch.uint8 and d.train.images.shape == (20, 3, 32, 32)
    assert d.train.labels.dtype == torch.int64
    assert torch.equal(d.train.images, train)  # PNG is lossless; class-major, then file-name order
    assert torch.equal(d.train.labels, torch.arange(10).repeat_interleave(2))
    expected_test = torch.stack([pil_decode(p) for p in test_paths])
    assert (d.test.images.int() - expected_test.int()).abs().max() <= 1  # same JPEG, another decoder
    assert torch.equal(d.test.labels, torch.arange(10))


def test_imagefolder_matches_torchvision(imagefolder):
    torchvision = pytest.importorskip("torchvision")
    root, _, _ = imagefolder
    ref = torchvision.datasets.ImageFolder(root / "train", transform=torchvision.transforms.PILToTensor())
    assert tuple(ref.classes) == D.CLASSES
    d = D.load_cifar10(root)
    assert torch.equal(d.train.labels, torch.tensor(ref.targets))
    assert torch.equal(d.train.images, torch.stack([ref[i][0] for i in range(len(ref))]))


def test_pickles(pickled):
    root, (train, train_labels, test, test_labels) = pickled
    d = D.load_cifar10(root)
    assert d.source == f"torchvision-pickle:{(root / cifar10.PICKLE_DIR).resolve()}"
    assert d.classes == TORCHVISION_CLASSES
    assert torch.equal(d.train.images, train) and torch.equal(d.train.labels, train_labels)
    assert torch.equal(d.test.images, test) and torch.equal(d.test.labels, test_labels)


class RunsACommand:
    """What a hostile `data_batch_1` holds: unpickling it calls os.system (or builtins.exec)."""

    def __init__(self, how: str, marker: Path):
        self.how, self.marker = how, marker

    def __reduce__(self):
        if self.how == "os.system":
            return os.system, (f"touch {self.marker}",)
        return exec, (f"open({str(self.marker)!r}, 'w').close()",)


@pytest.mark.parametrize("how", ["os.system", "exec"])
@pytest.mark.parametrize("where", ["data", "whole file"])
def test_malicious_pickle_is_refused_without_running(pickled, tmp_path, how, where):
    """A CIFAR-10 download whose data_batch_1 would run a command when unpickled: refused with one line
    naming the file (its md5 is not the original's); the command never runs."""
    root, _ = pickled
    path = root / cifar10.PICKLE_DIR / "data_batch_1"
    marker = tmp_path / "ran"
    payload = RunsACommand(how, marker)
    path.write_bytes(
        pickle.dumps({"data": payload, "labels": [0]} if where == "data" else payload, protocol=2)
    )
    with pytest.raises(D.DataFormatError) as err:
        D.load_cifar10(root)
    message = str(err.value)
    assert (
        message
        == f"root: {path} is not the original file (another md5): only torchvision's CIFAR-10 files are read"
    )
    assert not marker.exists(), "the pickle ran its command"


def test_environment_variables(imagefolder, monkeypatch):
    root, train, _ = imagefolder
    monkeypatch.setenv(DATA_ENV, str(root))
    assert torch.equal(D.load_cifar10().train.images, train)


# ----------------------------------------------------------------------------------------------------------
# Errors


def test_missing_data_error(tmp_path, monkeypatch):
    monkeypatch.delenv(DATA_ENV, raising=False)
    with pytest.raises(D.DataNotFoundError) as err:
        D.load_cifar10()
    assert isinstance(err.value, FileNotFoundError) and isinstance(err.value, ConfigError)
    msg = str(err.value)
    for part in (DATA_ENV, "cifar-10-batches-py", "train/<class>", "test/<class>", "download=True"):
        assert part in msg, part

    empty = tmp_path / "empty"
    empty.mkdir()
    monkeypatch.setenv(DATA_ENV, str(empty))
    with pytest.raises(FileNotFoundError) as err:
        D.load_cifar10()
    msg = str(err.value)
    assert str(empty) in msg and DATA_ENV in msg and "cifar-10-batches-py" in msg and "download=True" in msg

    with pytest.raises(FileNotFoundError, match="not an existing folder"):
        D.load_cifar10(tmp_path / "nowhere")


def test_torchvisions_own_download_is_read_as_it_is(tmp_path, monkeypatch):
    """What the error's hint says: torchvision.datasets.CIFAR10(folder, download=True) (its download faked
    here: no network in tests) leaves a folder that load_cifar10 reads."""
    from torchvision.datasets import CIFAR10

    x_train, x_test = random_images(20, seed=7), random_images(10, seed=8)

    def fake_download(self):
        write_download(Path(self.root), x_train, torch.arange(20) % 10, x_test, torch.arange(10), monkeypatch)

    monkeypatch.setattr(CIFAR10, "download", fake_download)
    CIFAR10(str(tmp_path / "dl"), download=True)
    d = D.load_cifar10(tmp_path / "dl")
    assert torch.equal(d.train.images, x_train) and torch.equal(d.test.images, x_test)


def test_missing_class_folder(imagefolder, tmp_path):
    root, _, _ = imagefolder
    for f in (root / "test" / "dog").iterdir():
        f.unlink()
    (root / "test" / "dog").rmdir()
    with pytest.raises(D.DataFormatError, match="dog"):
        D.load_cifar10(root)


def test_unexpected_class_folder(imagefolder, tmp_path):
    root, _, _ = imagefolder
    (root / "train" / "zebra").mkdir()
    with pytest.raises(D.DataFormatError, match="zebra"):
        D.load_cifar10(root)


def test_missing_split(imagefolder, tmp_path):
    root, _, _ = imagefolder
    (root / "test").rename(root / "val")
    with pytest.raises(D.DataFormatError, match="no test/"):
        D.load_cifar10(root)


def test_non_image_file(imagefolder, tmp_path):
    root, _, _ = imagefolder
    (root / "train" / "cat" / "notes.txt").write_text("not an image")
    with pytest.raises(D.DataFormatError, match="notes.txt"):
        D.load_cifar10(root)


@pytest.mark.parametrize("bad", ["garbage", "size"])
def test_undecodable_or_wrong_size_image(imagefolder, tmp_path, bad):
    root, _, _ = imagefolder
    path = root / "test" / "frog" / "0.jpg"
    if bad == "garbage":
        path.write_bytes(b"\xff\xd8 this is not a JPEG")
    else:
        Image.new("RGB", (16, 16)).save(path)
    with pytest.raises(D.DataFormatError, match=re.escape(str(path))):
        D.load_cifar10(root)


@pytest.mark.parametrize("where", ["image", "class folder"])
def test_symlink_loop_is_an_unreadable_file(imagefolder, tmp_path, where):
    """A symlink loop in an image folder is reported like any unreadable file: one line naming it."""
    root, _, _ = imagefolder
    if where == "image":
        loop = root / "train" / "cat" / "loop.png"
    else:
        for f in (root / "test" / "dog").iterdir():
            f.unlink()
        (root / "test" / "dog").rmdir()
        loop = root / "test" / "dog"
    loop.symlink_to(loop.name)
    with pytest.raises(D.DataFormatError) as err:
        D.load_cifar10(root)
    assert str(loop) in str(err.value) and "cannot be read (Too many levels of symbolic links)" in str(
        err.value
    )


def test_missing_pickle_file(pickled):
    root, _ = pickled
    path = root / cifar10.PICKLE_DIR / "data_batch_3"
    path.unlink()
    with pytest.raises(D.DataFormatError, match=f"{re.escape(str(path))} is missing"):
        D.load_cifar10(root)


def test_load_dataset(imagefolder, tmp_path):
    root, train, _ = imagefolder
    assert torch.equal(D.load_dataset(str(root)).train.images, train)
    s = D.load_dataset("synthetic")
    assert (len(s.train), len(s.test)) == (512, 256) and s.source.startswith("synthetic(seed=0")
    s = D.load_dataset("synthetic:30:20")
    assert (len(s.train), len(s.test)) == (30, 20)
    for bad in ("synthetic:x", "synthetic:1", "synthetic:0:5", str(tmp_path / "missing"), 3):
        with pytest.raises(ConfigError) as err:
            D.load_dataset(bad)
        assert err.value.parameter == "data"
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(ConfigError) as err:
        D.load_dataset(str(empty))
    assert err.value.parameter == "data" and "train/<class>" in str(err.value)


# ----------------------------------------------------------------------------------------------------------
# Synthetic data


def test_synthetic_is_deterministic_and_balanced():
    a, b, c = (
        D.synthetic_cifar10(100, 50, seed=0),
        D.synthetic_cifar10(100, 50, seed=0),
        D.synthetic_cifar10(100, 50, 1),
    )
    assert a.train.images.shape == (100, 3, 32, 32) and a.train.images.dtype == torch.uint8
    assert a.test.labels.shape == (50,) and a.test.labels.dtype == torch.int64
    assert torch.equal(a.train.images, b.train.images) and torch.equal(a.test.labels, b.test.labels)
    assert not torch.equal(a.train.images, c.train.images)
    assert torch.bincount(a.train.labels, minlength=10).tolist() == [10] * 10
    assert a.classes == TORCHVISION_CLASSES and a.source == "synthetic(seed=0,n=100+50)"
    with pytest.raises(ConfigError):
        D.synthetic_cifar10(0, 10)


def test_synthetic_is_learnable():
    """A tiny conv net on augmented batches: the loss halves in 24 steps and test accuracy is far above 10%."""
    torch.manual_seed(0)
    d = D.synthetic_cifar10(256, 256, seed=0)
    model = torch.nn.Sequential(
        torch.nn.Conv2d(3, 8, 3, padding=1), torch.nn.ReLU(), torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten(),
        torch.nn.Linear(8, 10),
    )  # fmt: skip
    opt = torch.optim.Adam(model.parameters(), lr=2e-2)
    losses = []
    batches = D.Batches(d.train, 32, train=True, seed=0)
    for e in range(3):
        for x, y in batches.epoch(e):
            loss = F.cross_entropy(model(x), y)
            opt.zero_grad()
            loss.backward()
            opt.step()
            losses.append(loss.item())
    assert losses[0] > 2.0 and np.mean(losses[-4:]) < 0.5 * losses[0], losses
    with torch.no_grad():
        x, y = next(D.Batches(d.test, 256, train=False).epoch(0))
        assert (model(x).argmax(1) == y).float().mean() > 0.5


# ----------------------------------------------------------------------------------------------------------
# Batches


def normalise(x: torch.Tensor) -> torch.Tensor:
    mean, std = torch.tensor(D.MEAN).view(1, 3, 1, 1), torch.tensor(D.STD).view(1, 3, 1, 1)
    return (x.float() / 255 - mean) / std


@pytest.fixture(scope="module")
def small():
    return D.synthetic_cifar10(40, 25, seed=3)


def test_train_batches_shapes_and_ranges(small):
    b = D.Batches(small.train, 8, train=True, seed=0)
    out = list(b.epoch(0))
    assert len(b) == len(out) == 5
    lo = (0 - torch.tensor(D.MEAN)) / torch.tensor(D.STD)
    hi = (1 - torch.tensor(D.MEAN)) / torch.tensor(D.STD)
    for x, y in out:
        assert (
            x.shape == (8, 3, 32, 32)
            and x.dtype == torch.float32
            and y.shape == (8,)
            and y.dtype == torch.int64
        )
        per_channel = x.transpose(0, 1).reshape(3, -1)
        assert (per_channel.min(1).values >= lo - 1e-5).all() and (
            per_channel.max(1).values <= hi + 1e-5
        ).all()
    order, _, _ = b.draw(0)
    assert sorted(order.tolist()) == list(range(40))  # a permutation
    assert torch.equal(torch.cat([y for _, y in out]), small.train.labels[order])
    assert len(D.Batches(small.train, 16, train=True)) == 2  # last partial batch dropped when training


def test_test_batches_are_the_split_in_order(small):
    b = D.Batches(small.test, 10, train=False, seed=0)
    out = list(b.epoch(7))
    assert len(b) == 3 and [len(y) for _, y in out] == [10, 10, 5]  # last partial batch kept
    assert torch.allclose(torch.cat([x for x, _ in out]), normalise(small.test.images), rtol=0, atol=1e-5)
    assert torch.equal(torch.cat([y for _, y in out]), small.test.labels)


def test_crop_flip_matches_per_image_reference():
    x = random_images(40, seed=5)
    g = torch.Generator().manual_seed(6)
    offsets = torch.randint(0, 2 * D.PAD + 1, (40, 2), generator=g)
    flips = torch.rand(40, generator=g) < 0.5
    out = D.crop_flip(x, offsets, flips)
    for i in range(40):
        dy, dx = offsets[i].tolist()
        ref = F.pad(x[i], (4, 4, 4, 4))[:, dy : dy + 32, dx : dx + 32]  # RandomCrop(32, padding=4)
        ref = ref.flip(-1) if flips[i] else ref  # then RandomHorizontalFlip
        assert torch.equal(out[i], ref), i


def test_augmentation_pads_with_zeros(small):
    white = D.Split(torch.full((40, 3, 32, 32), 255, dtype=torch.uint8), small.train.labels)
    b = D.Batches(white, 40, train=True, seed=1)
    ((x, _),) = b.epoch(0)
    _, offsets, flips = b.draw(0)  # per position in the epoch's order: here, per row of the one batch
    mean, std = torch.tensor(D.MEAN).view(1, 3, 1, 1), torch.tensor(D.STD).view(1, 3, 1, 1)
    pad = torch.isclose(x, (0 - mean) / std)  # zero pixels, normalised
    assert (pad | torch.isclose(x, (1 - mean) / std)).all()
    shift = (offsets - D.PAD).abs()  # a crop shifted by (sy, sx) shows sy rows and sx columns of padding
    expected = 32 * shift[:, 0] + 32 * shift[:, 1] - shift[:, 0] * shift[:, 1]
    assert torch.equal(pad[:, 0].sum((1, 2)), expected) and expected.sum() > 0
    assert 0 < flips.sum() < 40 and len(torch.unique(offsets)) == 2 * D.PAD + 1


def test_batches_are_deterministic_per_epoch(small):
    a = D.Batches(small.train, 8, train=True, seed=1)
    for e in (0, 1):
        list(a.epoch(e))
    after_two = list(a.epoch(2))
    fresh = list(D.Batches(small.train, 8, train=True, seed=1).epoch(2))  # a resumed run starts at epoch 2
    for (x1, y1), (x2, y2) in zip(after_two, fresh, strict=True):
        assert torch.equal(x1, x2) and torch.equal(y1, y2)
    other_epoch = torch.cat([x for x, _ in a.epoch(3)])
    other_seed = torch.cat([x for x, _ in D.Batches(small.train, 8, train=True, seed=2).epoch(2)])
    x2 = torch.cat([x for x, _ in fresh])
    assert not torch.equal(x2, other_epoch) and not torch.equal(x2, other_seed)


@pytest.mark.parametrize("train, n, bs", [(True, 40, 8), (False, 25, 10)])
def test_rank_shards_make_up_the_global_batch(small, train, n, bs):
    split = small.train if train else small.test
    full = list(D.Batches(split, bs, train=train, seed=4).epoch(5))
    shards = [list(D.Batches(split, bs, train=train, seed=4, rank=r, world_size=2).epoch(5)) for r in (0, 1)]
    assert len(shards[0]) == len(shards[1]) == len(full)
    for step, (x, y) in enumerate(full):
        for r in (0, 1):
            assert torch.equal(shards[r][step][0], x[r::2]) and torch.equal(shards[r][step][1], y[r::2])
    assert sum(len(s[1]) for shard in shards for s in shard) == (n // bs * bs if train else n)


def test_batches_reject_bad_arguments(small):
    for kwargs, parameter in [
        (dict(batch_size=0), "batch_size"),
        (dict(batch_size=9, world_size=2), "batch_size"),
        (dict(batch_size=8, world_size=2, rank=2), "rank"),
        (dict(batch_size=8, world_size=0), "world_size"),
        (dict(batch_size=8, seed=-1), "seed"),
        (dict(batch_size=64), "batch_size"),  # larger than the split, dropping the last batch: no steps
    ]:
        with pytest.raises(ConfigError) as err:
            D.Batches(small.train, train=True, **kwargs)
        assert err.value.parameter == parameter
    with pytest.raises(ConfigError) as err:
        D.Batches(small.train, 8, train=True).epoch(-1)
    assert err.value.parameter == "epoch"
    with pytest.raises(TypeError):  # not iterable: iterate over batches.epoch(e), each epoch its own seed
        iter(D.Batches(small.train, 8, train=True))


# ----------------------------------------------------------------------------------------------------------
# The real copy (optional)


def real_copy() -> Path | None:
    for candidate in (
        os.environ.get(DATA_ENV),
        Path(__file__).resolve().parents[2] / "shared/data/cifar10",
    ):
        if candidate and (Path(candidate) / "train").is_dir():
            return Path(candidate)
    return None


@pytest.mark.slow
@pytest.mark.skipif(real_copy() is None, reason="no local CIFAR-10 ImageFolder copy")
def test_real_cifar10():
    d = D.load_cifar10(real_copy())  # decodes all 60,000 images
    assert (len(d.train), len(d.test)) == (50_000, 10_000)
    assert torch.bincount(d.train.labels).tolist() == [5000] * 10
    assert torch.bincount(d.test.labels).tolist() == [1000] * 10
    total = sum(c.double().sum((0, 2, 3)) for c in d.train.images.split(10_000))
    mean = total / (50_000 * 32 * 32 * 255)
    assert torch.allclose(mean, torch.tensor([0.491, 0.482, 0.447], dtype=torch.float64), atol=1e-3), mean


# --------------------------------------------------- reliability: a bad image folder through the command line
@pytest.mark.parametrize("fault", ["non-image file", "missing class"])
def test_bad_image_folder_through_the_cli(tmp_path, fault, cli, monkeypatch):
    """`train --data FOLDER` with a non-image file or a missing class: one line naming the file or the
    class, exit 2, no results folder written."""
    data = image_folder(tmp_path / "cifar")
    if fault == "non-image file":
        (data / "train" / "cat" / "notes.txt").write_text("not an image")
        named = "notes.txt"
    else:
        shutil.rmtree(data / "test" / "dog")
        named = "dog"
    results = tmp_path / "results"
    code, out, err = cli(
        ["train", "resnet18", "--preset", "smoke", "--data", str(data), "--results-dir", str(results)]
    )
    assert code == 2 and err.count("\n") == 1 and "Traceback" not in err, err
    assert err.startswith("python -m attnlib: error: data: ") and named in err
    assert not results.exists()
