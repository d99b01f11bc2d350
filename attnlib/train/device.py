"""The one dtype policy: where bf16 autocast pays (`fast_bf16`, `use_bf16`, `autocast`), and the one reader of
the CPU's model name and flags (`cpu_info`). Which device a name means is the core's
(`attnlib.checks.resolve_device`)."""

from __future__ import annotations

import functools
import platform

import torch


def fast_bf16(device: torch.device) -> bool:
    """The one dtype policy: bf16 autocast where bf16 matmuls are fast (CUDA with bf16, CPU with AMX or
    AVX512-BF16); fp32 elsewhere. Master weights stay fp32 either way."""
    if device.type == "cuda":
        return torch.cuda.is_bf16_supported()
    if device.type == "cpu":
        cpu = torch.cpu
        return any(
            getattr(cpu, f, lambda: False)() for f in ("_is_amx_tile_supported", "_is_avx512_bf16_supported")
        )
    return False


def use_bf16(setting: bool | None, device: torch.device) -> bool:
    """A run's bf16 setting (`TrainConfig.bf16`) on `device`: True / False as set, None -> `fast_bf16`."""
    return fast_bf16(device) if setting is None else bool(setting)


def autocast(device: torch.device, enabled: bool):
    """bf16 autocast on `device` where `enabled` (fp32 master weights), a no-op context otherwise."""
    return torch.autocast(device.type, dtype=torch.bfloat16, enabled=enabled)


@functools.cache
def cpu_info() -> tuple[str, frozenset[str]]:
    """(model name, flags) of this machine's CPU from /proc/cpuinfo (its first processor); where it cannot be
    read (not Linux), the platform's processor name and no flags."""
    name, flags = "", frozenset()
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                key, _, value = line.partition(":")
                if key.strip() == "model name" and not name:
                    name = value.strip()
                elif key.strip() == "flags":
                    flags = frozenset(value.split())
                    break
    except OSError:
        pass
    return name or platform.processor() or platform.machine(), flags
