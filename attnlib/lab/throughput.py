"""`fit`'s training step on a random batch (`training_step`, also the step `attnlib.lab.train_cost` times), and
its training and inference throughput (images/s), the number behind the registry's CPU-hour estimates
(`attnlib.lab.plan.estimate_seconds`)."""

from __future__ import annotations

import statistics
from collections.abc import Callable

import torch
from torch import nn

from attnlib.config import TrainConfig
from attnlib.lab.measure import block_times
from attnlib.train.device import autocast, resolve_device, use_bf16
from attnlib.train.loop import train_step
from attnlib.train.schedule import make_optimizer


def training_step(
    model: nn.Module, cfg: TrainConfig, device: torch.device
) -> tuple[Callable, Callable, bool]:
    """(one training step, one evaluation forward pass, bf16) of ``model`` on ``device`` as `fit` takes them:
    `train_step` with the protocol's optimizer (`make_optimizer`), label smoothing, clipping and bf16 policy,
    on a batch of ``cfg.batch_size`` N(0, 1) images with random labels (a step's time and memory do not
    depend on the values); each call sets the model's mode. Updates the model's weights."""
    bf16 = use_bf16(cfg.bf16, device)
    model = model.to(device)
    optimizer = make_optimizer(model, cfg)
    x = torch.randn(cfg.batch_size, 3, 32, 32, device=device)
    y = torch.randint(0, 10, (cfg.batch_size,), device=device)

    def step() -> None:
        train_step(model.train(), optimizer, x, y, cfg.label_smoothing, bf16, cfg.grad_clip)

    def forward() -> None:
        with torch.no_grad(), autocast(device, bf16):
            model.eval()(x)

    return step, forward, bf16


def measure_throughput(model: nn.Module, cfg: TrainConfig, device="cpu") -> tuple[float, float]:
    """(train, eval) images/s of `training_step`'s step and forward pass: the median of their timed blocks
    (`attnlib.lab.measure.block_times`, after the Timer's own warm-up).

    On the CPU: per core, i.e. one thread, timed by this process's CPU time, which other processes sharing
    the machine barely disturb (multi-threaded CPU time is not: waiting threads spin).
    `attnlib.lab.plan.CPU_PARALLEL_EFFICIENCY` turns it into a multi-core estimate. On CUDA: wall time after
    synchronising."""
    device = resolve_device(device)
    step, forward, _ = training_step(model, cfg, device)
    seconds = [statistics.median(block_times(fn, cpu_time=device.type == "cpu")) for fn in (step, forward)]
    return cfg.batch_size / seconds[0], cfg.batch_size / seconds[1]
