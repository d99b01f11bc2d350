"""Augmented mini-batches on the model's device: the uint8 images stay there and each batch is made there
(random crop with 4-pixel zero padding, horizontal flip, per-channel normalisation), drawn from a generator
seeded by ``(seed, epoch)``."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import torch
import torch.nn.functional as F

from attnlib.checks import check_positive_int
from attnlib.data.cifar10 import Split
from attnlib.errors import ConfigError

MEAN = (0.4914, 0.4822, 0.4465)  # per-channel mean of the training images (the papers' code)
STD = (0.2023, 0.1994, 0.2010)  # per-channel std used by the papers' code
PAD = 4  # zero padding of the random crop


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
        self.device = torch.device(device)
        self.images = split.images.to(self.device)  # uint8, moved once
        self.labels = split.labels.to(self.device)
        self.mean = torch.tensor(MEAN, device=self.device).view(1, 3, 1, 1) * 255
        self.std = torch.tensor(STD, device=self.device).view(1, 3, 1, 1) * 255
        n = len(split)
        self.steps = n // batch_size if train else -(-n // batch_size)  # training drops a last partial one
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
