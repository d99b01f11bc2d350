"""The optimisation protocol's pieces: the learning-rate schedule and SGD with the declared weight-decay
exemptions."""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import nn

from attnlib.config import TrainConfig
from attnlib.models import no_weight_decay


@dataclass
class Schedule:
    """Learning-rate factor per optimisation step (a picklable `LambdaLR` lambda).

    cosine: linear warm-up to 1 over `warmup_steps`, then  f(t) = ½(1 + cos(π (t − t_w)/(T − t_w))).
    multistep: warm-up, then f = 0.1^(number of milestones passed), milestones in epochs.
    """

    schedule: str
    total_steps: int
    warmup_steps: int
    steps_per_epoch: int
    milestone_epochs: tuple[int, ...] = ()

    @classmethod
    def from_config(cls, cfg: TrainConfig, steps_per_epoch: int) -> Schedule:
        total = cfg.epochs * steps_per_epoch
        milestones = tuple(round(m * cfg.epochs) for m in cfg.milestones)
        return cls(cfg.schedule, total, int(cfg.warmup * total), steps_per_epoch, milestones)

    def __call__(self, step: int) -> float:
        if step < self.warmup_steps:
            return (step + 1) / self.warmup_steps
        if self.schedule == "cosine":
            progress = (step - self.warmup_steps) / max(1, self.total_steps - self.warmup_steps)
            return 0.5 * (1.0 + math.cos(math.pi * min(1.0, progress)))
        if self.schedule == "multistep":
            epoch = step // self.steps_per_epoch
            return 0.1 ** sum(epoch >= m for m in self.milestone_epochs)
        return 1.0


def make_optimizer(model: nn.Module, cfg: TrainConfig) -> torch.optim.SGD:
    """SGD with two parameter groups: weight decay for all but the parameters that the model's modules
    declare (`attnlib.models.no_weight_decay`: the quadratic encodings' centres and spreads)."""
    exempt = no_weight_decay(model)
    decay, no_decay = [], []
    for name, p in model.named_parameters():
        if p.requires_grad:
            (no_decay if name in exempt else decay).append(p)
    groups = [{"params": decay, "weight_decay": cfg.weight_decay}]
    if no_decay:
        groups.append({"params": no_decay, "weight_decay": 0.0})
    return torch.optim.SGD(groups, lr=cfg.lr, momentum=cfg.momentum, nesterov=cfg.nesterov)
