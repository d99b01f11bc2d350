"""Training and inference throughput of `fit`'s step on random batches (images/s), the number behind the
registry's CPU-hour estimates (`attnlib.lab.plan.estimate_seconds`)."""

from __future__ import annotations

import torch
from torch import nn

from attnlib.config import TrainConfig
from attnlib.lab.measure import mean_seconds
from attnlib.train.device import autocast, resolve_device, use_bf16
from attnlib.train.loop import train_step
from attnlib.train.schedule import make_optimizer


def measure_throughput(
    model: nn.Module, cfg: TrainConfig, device="cpu", steps: int = 3, warmup: int = 2
) -> tuple[float, float]:
    """(train, eval) images/s of `fit`'s step and of evaluation, on random batches of `cfg.batch_size`.

    On the CPU: per core, i.e. one thread, timed by this process's CPU time, which other processes sharing
    the machine barely disturb (multi-threaded CPU time is not: waiting threads spin).
    `attnlib.lab.plan.CPU_PARALLEL_EFFICIENCY` turns it into a multi-core estimate. On CUDA: wall time after
    synchronising. `warmup` untimed calls first, then `steps` timed ones (`attnlib.lab.measure.mean_seconds`).
    Updates the model's weights."""
    device = resolve_device(device)
    bf16 = use_bf16(cfg.bf16, device)
    model = model.to(device)
    optimizer = make_optimizer(model, cfg)
    x = torch.randn(cfg.batch_size, 3, 32, 32, device=device)
    y = torch.randint(0, 10, (cfg.batch_size,), device=device)
    cpu = device.type == "cpu"

    def rate(fn) -> float:
        return cfg.batch_size / mean_seconds(fn, steps, warmup=warmup, cpu_time=cpu)

    model.train()
    train_ips = rate(lambda: train_step(model, optimizer, x, y, cfg.label_smoothing, bf16, cfg.grad_clip))
    model.eval()
    with torch.no_grad(), autocast(device, bf16):
        eval_ips = rate(lambda: model(x))
    return train_ips, eval_ips
