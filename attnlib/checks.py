"""The argument checks every module uses, the one parser of data specs and the one reading of a device name
(`resolve_device`): each raises attnlib.errors.ConfigError naming the parameter, the value and what is
allowed."""

from __future__ import annotations

import math
import os
from collections.abc import Callable
from typing import TYPE_CHECKING

from attnlib.errors import ConfigError

if TYPE_CHECKING:
    import torch

SYNTHETIC = "synthetic"
SYNTHETIC_SIZES = (512, 256)  # (N_TRAIN, N_TEST) of a bare "synthetic" (attnlib.data.synthetic_cifar10)
MAX_SYNTHETIC = 200_000  # images per split of a synthetic set: 0.6 GB of uint8, 4x CIFAR-10's training set
MAX_SECONDS = 10**8  # three years of training: the most seconds a run or checkpoint may record
MAX_SEED = 2**32 - 1  # what every generator a run seeds accepts (numpy's legacy seeding: 32 bits)


def max_threads() -> int:
    """The most CPU threads a command accepts: 4 per core of this machine, at most 1024 (libgomp aborts and
    torch crashes far beyond it)."""
    return max(1, min(1024, 4 * (os.cpu_count() or 1)))


def check(ok: bool, name: str, value, allowed) -> None:
    """Raise ConfigError(name, value, allowed) unless ``ok`` (a condition the caller computed)."""
    if not ok:
        raise ConfigError(name, value, allowed)


def check_divisor(name: str, factor: int, size) -> None:
    """Raise ConfigError unless ``factor`` divides every side of ``size`` (an image's (H, W)): a space-to-depth
    input (``F.pixel_unshuffle``) by that factor."""
    check(
        all(side % factor == 0 for side in size), name, factor, f"a divisor of the image size {tuple(size)}"
    )


def check_positive_int(name: str, value, minimum: int = 1, allowed: str | None = None) -> None:
    """Raise ConfigError unless ``value`` is an int (not a bool) >= ``minimum``. ``allowed`` replaces the
    message's "an integer >= MINIMUM" where a caller says more (what 0 means, for instance)."""
    if not isinstance(value, int) or isinstance(value, bool) or value < minimum:
        raise ConfigError(name, value, allowed or f"an integer >= {minimum}")


def check_choice(name: str, value, allowed) -> None:
    """Raise ConfigError unless ``value`` is one of ``allowed`` (listed in the message)."""
    if value not in allowed:
        raise ConfigError(name, value, list(allowed))


def check_probability(name: str, value) -> None:
    """Raise ConfigError unless ``value`` is a number in [0, 1) (a dropout rate)."""
    if not isinstance(value, int | float) or isinstance(value, bool) or not 0.0 <= value < 1.0:
        raise ConfigError(name, value, "a float in [0, 1)")


def check_fraction(name: str, value) -> None:
    """Raise ConfigError unless ``value`` is a number strictly between 0 and 1 (a confidence level)."""
    if not isinstance(value, int | float) or isinstance(value, bool) or not 0 < value < 1:
        raise ConfigError(name, value, "a number strictly between 0 and 1")


def resolve_device(device: str | torch.device | None = None) -> torch.device:
    """Which device a name means: None or "auto" -> CUDA when available, else CPU. Unknown or unavailable
    devices -> ConfigError. (torch imported on first use: the results side imports these checks, not torch.)"""
    import torch

    if isinstance(device, torch.device):
        return device
    if device in (None, "auto"):
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        dev = torch.device(device)
    except (RuntimeError, TypeError):
        raise ConfigError("device", device, "auto, cpu, cuda, cuda:N") from None
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise ConfigError("device", device, "cpu (no CUDA device is available here)")
    if dev.type == "cuda" and dev.index is not None and dev.index >= torch.cuda.device_count():
        raise ConfigError("device", device, [f"cuda:{i}" for i in range(torch.cuda.device_count())])
    if dev.type not in ("cpu", "cuda"):
        raise ConfigError("device", device, "auto, cpu, cuda, cuda:N")
    return dev


# ------------------------------------------------------------------------------------------ data specs
def is_synthetic(spec) -> bool:
    """Whether ``spec`` names the synthetic data set: "synthetic" or "synthetic:N_TRAIN:N_TEST"."""
    return isinstance(spec, str) and spec.split(":")[0] == SYNTHETIC


def synthetic_sizes(
    spec: str, allowed: str = "'synthetic' or 'synthetic:N_TRAIN:N_TEST'", parameter: str = "data"
) -> tuple[int, int]:
    """(N_TRAIN, N_TEST) of a synthetic spec: "synthetic" (the default sizes) or "synthetic:N_TRAIN:N_TEST"
    with positive integers. Raises ConfigError(parameter, spec, allowed) for anything else."""
    if not is_synthetic(spec):
        raise ConfigError(parameter, spec, allowed)
    parts = spec.split(":")[1:]
    if not parts:
        return SYNTHETIC_SIZES
    try:
        n_train, n_test = (int(p) for p in parts)
    except ValueError:
        raise ConfigError(parameter, spec, allowed) from None
    if not (1 <= n_train <= MAX_SYNTHETIC and 1 <= n_test <= MAX_SYNTHETIC):
        raise ConfigError(parameter, spec, f"'synthetic:N_TRAIN:N_TEST' with sizes in [1, {MAX_SYNTHETIC}]")
    return n_train, n_test


# Predicates of untrusted values (saved results, checkpoints): True/False, never raising.
def is_number(v, low: float = -math.inf, high: float = math.inf) -> bool:
    """A finite int or float (not a bool) in [low, high]. An int is finite however large: math.isfinite would
    raise OverflowError on one past a float's range (a 4,200-digit `params`), so it is never asked."""
    if not isinstance(v, int | float) or isinstance(v, bool):
        return False
    return (isinstance(v, int) or math.isfinite(v)) and low <= v <= high


def in_range(low: int, high: int) -> Callable[[object], bool]:
    """A predicate: an int (not a bool) in [low, high]."""
    return lambda v: isinstance(v, int) and not isinstance(v, bool) and low <= v <= high


def shown(v) -> str:
    """A value as a message shows it: its repr, cut to 80 characters."""
    text = repr(v)
    return text if len(text) <= 80 else text[:77] + "..."
