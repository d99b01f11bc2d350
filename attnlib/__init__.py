"""attnlib: can self-attention do what convolution does? (Cordonnier et al., ICLR 2020, and the [Re] report).

Public names are imported on first use, so `import attnlib` stays cheap:

    load_cifar10        attnlib.data        CIFAR-10 (torchvision pickle or ImageFolder copy) as uint8 tensors
    build_model         attnlib.experiments a model of the registry by experiment name and preset
    run_or_load         attnlib.lab.run     a saved result, or train it
    attention_from_conv attnlib.theory      the paper's construction: a convolution as multi-head attention
    ConfigError         attnlib.errors      the one exception type for bad user input
"""

from __future__ import annotations

import importlib

__version__ = "0.1.0"

_LAZY = {
    "load_cifar10": "attnlib.data",
    "build_model": "attnlib.experiments",
    "run_or_load": "attnlib.lab.run",
    "attention_from_conv": "attnlib.theory",
    "ConfigError": "attnlib.errors",
}

__all__ = sorted(_LAZY)


def __getattr__(name: str):
    if name in _LAZY:
        value = getattr(importlib.import_module(_LAZY[name]), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'attnlib' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))
