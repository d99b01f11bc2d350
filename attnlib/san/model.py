"""SAN pairwise / patchwise for CIFAR-10 (Zhao, Jia & Koltun 2020) and their Hierarchical Attention variants.

Layout ([Re] ``SAN/models/san_networks.py``, i.e. the official ``model/san.py`` with four stages for 32x32):
1x1 conv stem (3 -> stem_width) + BN + ReLU at 32x32; then per stage: 2x2 max-pool, 1x1 conv to the stage
width, ``layers[i]`` self-attention bottleneck blocks, BN + ReLU (16x16, 8x8, 4x4, 2x2); global average
pool; linear classifier.

A bottleneck block is x + conv1x1(relu(bn(SA(relu(bn(x)))))), where the self-attention layer (SA) computes
    y_i = Σ_{j ∈ R(i)} α(x_R(i))_j ⊙ β(x_j)          (SAN eq. 2 / 4, R(i) the K x K footprint of pixel i)
with β = 1x1 conv, weights α shared by groups of ``share_planes`` channels (Cw = mid / share_planes groups):
- pairwise: α(x_i, x_j) = softmax_j γ([φ(x_i) − ψ(x_j), p_i − p_j])   (subtraction relation, position encoding)
- patchwise: α(x_R(i)) = γ([φ(x_i), ψ(x_j) for j ∈ R(i)])              (concatenation; no softmax, as official)
φ, ψ: 1x1 convs to ``width // rel_reduction`` channels; γ: BN-ReLU-1x1-BN-ReLU-1x1; p: a learned 1x1 conv of
the (x, y) ∈ [-1, 1]² pixel grid. Padding is reflection, K // 2, stride 1.

Per-stage weight sharing (``hierarchical=True``): each stage holds one block, applied ``layers[i]`` times with
shared weights; its keys ψ(x) are computed from the stage's first input and kept for the later applications,
while queries φ and values β are recomputed from the current features. This was this library's first
reading of SAN + HA; the [Re] report's SAN + HA is another network (``attnlib.san.hierarchical``), and no
experiment uses this option any more.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn as nn
import torch.nn.functional as F

from attnlib.errors import ConfigError
from attnlib.san import ops
from attnlib.san.reference import unfold

SA_TYPES = ("pairwise", "patchwise")


@dataclass
class SANConfig:
    """SAN for 32x32 inputs; defaults are the [Re] / official configuration (SAN-10-like, four stages)."""

    sa_type: str = "pairwise"  # "pairwise" | "patchwise"
    layers: tuple[int, ...] = (2, 2, 2, 2)  # SA bottleneck blocks (applications, if hierarchical) per stage
    kernels: tuple[int, ...] = (3, 3, 3, 3)  # footprint K per stage (odd)
    widths: tuple[int, ...] = (64, 256, 512, 1024)  # stage widths
    stem_width: int = 64
    rel_reduction: int = 16  # relation channels φ, ψ = width // rel_reduction
    mid_reduction: int = 4  # SA channels (β) = width // mid_reduction
    share_planes: int = 8  # channels sharing one aggregation weight: Cw = mid // share_planes
    hierarchical: bool = False
    patchwise_softmax: bool = False  # official patchwise SAN does not normalise its weights
    num_classes: int = 10

    def __post_init__(self):
        for name in ("layers", "kernels", "widths"):
            setattr(self, name, tuple(getattr(self, name)))  # JSON/YAML round trips give lists
        if self.sa_type not in SA_TYPES:
            raise ConfigError("sa_type", self.sa_type, " | ".join(map(repr, SA_TYPES)))
        n = len(self.widths)
        if n == 0 or len(self.layers) != n or len(self.kernels) != n:
            raise ConfigError(
                "layers/kernels/widths",
                (self.layers, self.kernels, self.widths),
                "tuples of one equal, non-zero length",
            )
        if any(not isinstance(k, int) or k < 1 or k % 2 == 0 for k in self.kernels):
            raise ConfigError("kernels", self.kernels, "odd positive ints")
        if any(not isinstance(b, int) or b < 1 for b in self.layers):
            raise ConfigError("layers", self.layers, "positive ints")
        for name in ("stem_width", "rel_reduction", "mid_reduction", "share_planes", "num_classes"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ConfigError(name, value, "a positive int")
        step = self.mid_reduction * self.share_planes
        for w in self.widths:
            if not isinstance(w, int) or w < 1 or w % step or w % self.rel_reduction:
                raise ConfigError(
                    "widths",
                    self.widths,
                    f"positive multiples of mid_reduction*share_planes = {step} and of rel_reduction = {self.rel_reduction}",
                )


def position_grid(height: int, width: int, like: torch.Tensor) -> torch.Tensor:
    """(1, 2, H, W): channel 0 the column (x) coordinate, channel 1 the row (y), each evenly spaced in [-1, 1]."""
    ys = torch.linspace(-1.0, 1.0, height, device=like.device, dtype=like.dtype)
    xs = torch.linspace(-1.0, 1.0, width, device=like.device, dtype=like.dtype)
    y, x = torch.meshgrid(ys, xs, indexing="ij")
    return torch.stack([x, y]).unsqueeze(0)


def conv1x1(cin: int, cout: int, bias: bool = False) -> nn.Conv2d:
    return nn.Conv2d(cin, cout, kernel_size=1, bias=bias)


class SelfAttention(nn.Module):
    """SAN's self-attention layer: (B, in, H, W) -> (B, out, H, W), footprint K x K, stride 1."""

    def __init__(
        self, sa_type, in_planes, rel_planes, out_planes, share_planes, kernel_size, patchwise_softmax=False
    ):
        super().__init__()
        self.sa_type, self.kernel_size, self.padding = sa_type, kernel_size, kernel_size // 2
        self.normalise = sa_type == "pairwise" or patchwise_softmax
        self.groups = out_planes // share_planes  # Cw
        kk = kernel_size * kernel_size
        self.query = conv1x1(in_planes, rel_planes)  # φ
        self.key = conv1x1(in_planes, rel_planes)  # ψ
        self.value = conv1x1(in_planes, out_planes)  # β
        if sa_type == "pairwise":
            self.position = nn.Conv2d(2, 2, kernel_size=1)  # p = learned map of the (x, y) grid
            relation, hidden = rel_planes + 2, rel_planes
            out = self.groups
        else:
            relation, hidden = rel_planes * (kk + 1), self.groups
            out = kk * self.groups
        self.gamma = nn.Sequential(  # γ: relation -> aggregation weights
            nn.BatchNorm2d(relation),
            nn.ReLU(inplace=True),
            conv1x1(relation, hidden),
            nn.BatchNorm2d(hidden),
            nn.ReLU(inplace=True),
            conv1x1(hidden, out, bias=True),
        )

    def forward(self, x, keys=None):
        """x (B, in, H, W), keys ψ(x) (B, rel, H, W) or None -> (y (B, out, H, W), α (B, Cw, K·K, H, W), keys)."""
        B, _, H, W = x.shape
        K = self.kernel_size
        window = dict(kernel_size=K, padding=self.padding, pad_mode="reflect")  # official: reflect, K // 2
        q, v = self.query(x), self.value(x)
        k = self.key(x) if keys is None else keys
        if self.sa_type == "pairwise":
            # δ = [φ(x_i) − ψ(x_j), p_i − p_j]: (B, rel + 2, K·K, H, W)
            p = self.position(position_grid(H, W, q))
            relation = torch.cat(
                [ops.subtraction2(q, k, **window), ops.subtraction(p, **window).expand(B, -1, -1, -1, -1)], 1
            )
            logits = self.gamma(relation.flatten(3)).view(B, self.groups, K * K, H, W)
        else:
            # δ = [φ(x_i), ψ(x_j) for j in R(i)]: (B, rel·(K·K + 1), 1, H·W)
            patch = unfold(k, **window).flatten(1, 2).flatten(2).unsqueeze(2)
            relation = torch.cat([q.flatten(2).unsqueeze(2), patch], 1)
            logits = self.gamma(relation).view(B, self.groups, K * K, H, W)
        alpha = logits.softmax(dim=2) if self.normalise else logits
        return ops.aggregation(v, alpha, **window), alpha, k


class Bottleneck(nn.Module):
    """x + conv1x1(relu(bn(SA(relu(bn(x)))))), width -> width.

    ``raw_input``: SA applied to x instead of relu(bn1(x)), as the [Re] hierarchical code does
    (``attnlib.san.hierarchical``)."""

    def __init__(self, cfg: SANConfig, width: int, kernel_size: int, raw_input: bool = False):
        super().__init__()
        self.raw_input = raw_input
        mid = width // cfg.mid_reduction
        self.bn1 = nn.BatchNorm2d(width)
        self.attention = SelfAttention(
            cfg.sa_type,
            width,
            width // cfg.rel_reduction,
            mid,
            cfg.share_planes,
            kernel_size,
            cfg.patchwise_softmax,
        )
        self.bn2 = nn.BatchNorm2d(mid)
        self.conv = conv1x1(mid, width, bias=True)

    def forward(self, x, keys=None):
        out, alpha, keys = self.attention(x if self.raw_input else F.relu(self.bn1(x)), keys)
        return x + self.conv(F.relu(self.bn2(out))), alpha, keys


class Stage(nn.Module):
    """max-pool 2x2, 1x1 conv to ``width``, ``repeats`` bottleneck applications, BN + ReLU."""

    def __init__(self, cfg: SANConfig, in_planes: int, width: int, repeats: int, kernel_size: int):
        super().__init__()
        self.hierarchical, self.repeats = cfg.hierarchical, repeats
        self.transition = conv1x1(in_planes, width)
        blocks = 1 if cfg.hierarchical else repeats
        self.blocks = nn.ModuleList(Bottleneck(cfg, width, kernel_size) for _ in range(blocks))
        self.bn = nn.BatchNorm2d(width)

    def forward(self, x, maps: list):
        x = self.transition(F.max_pool2d(x, 2))
        keys = None
        for r in range(self.repeats):
            x, alpha, k = self.blocks[r % len(self.blocks)](x, keys)
            keys = k if self.hierarchical else None  # HA: keep the keys of the stage's first input
            maps.append(alpha)
        return F.relu(self.bn(x))


class SAN(nn.Module):
    """SAN classifier for (B, 3, 32, 32) images; see the module docstring."""

    def __init__(self, cfg: SANConfig):
        super().__init__()
        self.cfg = cfg
        self.stem = nn.Sequential(
            conv1x1(3, cfg.stem_width), nn.BatchNorm2d(cfg.stem_width), nn.ReLU(inplace=True)
        )
        ins = (cfg.stem_width, *cfg.widths[:-1])
        self.stages = nn.ModuleList(
            Stage(cfg, *args) for args in zip(ins, cfg.widths, cfg.layers, cfg.kernels, strict=True)
        )
        self.fc = nn.Linear(cfg.widths[-1], cfg.num_classes)

    def forward(self, x, return_attention: bool = False):
        """x (B, 3, 32, 32) -> logits (B, classes) [, list of α (B, Cw, K·K, H, W), one per SA application]."""
        maps: list[torch.Tensor] = []
        x = self.stem(x)
        for stage in self.stages:
            x = stage(x, maps)
        logits = self.fc(x.mean(dim=(2, 3)))
        return (logits, maps) if return_attention else logits
