"""ResNet18 for CIFAR-10: 3x3 stem, no max-pool, four stages of torchvision ``BasicBlock``; optionally on the
space-to-depth input of the attention models (``downsample``: 4 gives their 8x8 grid of 48 channels)."""

from __future__ import annotations

from dataclasses import dataclass, field

import torch.nn.functional as F
from torch import Tensor, nn
from torchvision.models.resnet import BasicBlock, conv1x1

from attnlib.checks import check_divisor, check_positive_int
from attnlib.errors import ConfigError


@dataclass
class ResNetConfig:
    width: int = 64  # channels of the first stage; stages use width · (1, 2, 4, 8)
    blocks: tuple[int, ...] = (2, 2, 2, 2)
    num_classes: int = 10
    # space-to-depth factor of the input, as the attention models' (1: the 32x32 image itself); a field added
    # after runs were saved, which all had 1
    downsample: int = field(default=1, metadata={"before": 1})

    def __post_init__(self):
        self.blocks = tuple(self.blocks)  # accept a list (e.g. from JSON / YAML)
        check_positive_int("width", self.width)
        if len(self.blocks) < 1 or any(not isinstance(b, int) or b < 1 for b in self.blocks):
            raise ConfigError("blocks", self.blocks, "a non-empty tuple of integers >= 1")
        check_positive_int("num_classes", self.num_classes, 2)
        check_positive_int("downsample", self.downsample)


def _stage(in_ch: int, out_ch: int, blocks: int, stride: int) -> nn.Sequential:
    down = None
    if stride != 1 or in_ch != out_ch:
        down = nn.Sequential(conv1x1(in_ch, out_ch, stride), nn.BatchNorm2d(out_ch))
    layers = [BasicBlock(in_ch, out_ch, stride, down)]
    layers += [BasicBlock(out_ch, out_ch) for _ in range(blocks - 1)]
    return nn.Sequential(*layers)


class ResNet(nn.Module):
    """x (B, 3, 32, 32) -> logits (B, classes); ``return_attention=True`` gives (logits, []). With
    ``cfg.downsample`` r > 1 the image is first rearranged to (B, 3r², 32/r, 32/r), the attention models'
    invertible down-sampling, so the network sees their token grid."""

    def __init__(self, cfg: ResNetConfig):
        super().__init__()
        self.cfg = cfg
        w = cfg.width
        self.stem = nn.Sequential(
            nn.Conv2d(3 * cfg.downsample**2, w, 3, 1, 1, bias=False), nn.BatchNorm2d(w), nn.ReLU(inplace=True)
        )
        stages, in_ch = [], w
        for i, n in enumerate(cfg.blocks):
            out_ch = w * 2**i
            stages.append(_stage(in_ch, out_ch, n, 1 if i == 0 else 2))
            in_ch = out_ch
        self.stages = nn.Sequential(*stages)
        self.fc = nn.Linear(in_ch, cfg.num_classes)
        for m in self.modules():  # torchvision's ResNet init
            if isinstance(m, nn.Conv2d):
                nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")

    def forward(self, x: Tensor, return_attention: bool = False):
        if self.cfg.downsample > 1:  # r = 1: the image itself, untouched
            check_divisor("downsample", self.cfg.downsample, x.shape[-2:])
            x = F.pixel_unshuffle(x, self.cfg.downsample)
        x = self.stages(self.stem(x))
        logits = self.fc(x.mean(dim=(2, 3)))
        return (logits, []) if return_attention else logits


ResNet18 = ResNet
