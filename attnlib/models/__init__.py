"""Model families: name -> (Config dataclass, model class), imported on first use.

>>> from attnlib.models import FAMILIES, make
>>> Config, Model = FAMILIES["paper"]
>>> model = make("vit", layers=2, hierarchical=True)

A model's quirks are declared by its modules, not guessed by the trainer: a module's `no_weight_decay()`
names its own parameters that take no weight decay (timm's method), and its `logged_state()` gives the
tensors that training logs after every epoch (the quadratic encodings: centres and inverse covariances).
`no_weight_decay(model)` and `logged_state(model)` collect them over the whole model.
"""

from __future__ import annotations

import dataclasses
import importlib
import json
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING

from attnlib.errors import ConfigError

if TYPE_CHECKING:
    import torch
    from torch import nn

# family -> (module, config class name, model class name)
_SOURCES = {
    "paper": ("attnlib.models.paper", "PaperConfig", "AttentionClassifier"),
    "resnet": ("attnlib.models.resnet", "ResNetConfig", "ResNet"),
    "vit": ("attnlib.models.vit", "ViTConfig", "ViT"),
    "san": ("attnlib.san.model", "SANConfig", "SAN"),
    "san_hier": ("attnlib.san.hierarchical", "HierarchicalSANConfig", "HierarchicalSAN"),
}


class _Families(Mapping):
    """Read-only mapping that imports a family's module when it is first looked up."""

    def __getitem__(self, family: str) -> tuple[type, type]:
        if family not in _SOURCES:
            raise ConfigError("family", family, sorted(_SOURCES))
        module, config, model = _SOURCES[family]
        mod = importlib.import_module(module)
        return getattr(mod, config), getattr(mod, model)

    def __iter__(self) -> Iterator[str]:
        return iter(_SOURCES)

    def __len__(self) -> int:
        return len(_SOURCES)


FAMILIES: Mapping[str, tuple[type, type]] = _Families()


def make_config(family: str, **cfg):
    """The family's config dataclass built from keyword fields; unknown fields raise ConfigError."""
    config_cls, _ = FAMILIES[family]
    fields = [f.name for f in dataclasses.fields(config_cls)]
    for name, value in cfg.items():
        if name not in fields:
            raise ConfigError(f"{family}.{name}", value, fields)
    return config_cls(**cfg)


def config_record(config) -> dict:
    """Every field of a model config dataclass, JSON-ready (tuples as lists): what a run records as
    ``model_resolved`` (config.json, checkpoints), so that a changed default shows."""
    return json.loads(json.dumps(dataclasses.asdict(config), default=list))


def resolved_config(family: str, **cfg) -> dict:
    """`config_record` of the family's config dataclass built from `cfg`, defaults included."""
    return config_record(make_config(family, **cfg))


def resolved_difference(saved: dict, now: dict, config_cls: type) -> list[str]:
    """['pass_statistics: False saved, True now', ...]: the fields of two records of `config_cls`
    (`config_record`) that differ. A field missing from `saved` (added to the dataclass after it was
    recorded) is compared at the value its declaration says the network had before it existed,
    ``field(default=..., metadata={"before": value})``; without that declaration it differs, since a new
    field's default may change the network (as ``HierarchicalSANConfig.pass_statistics`` did)."""
    before = {
        f.name: json.loads(json.dumps(f.metadata["before"], default=list))
        for f in dataclasses.fields(config_cls)
        if "before" in f.metadata
    }
    diffs = []
    for key in sorted(saved.keys() | now.keys()):
        old, new = saved.get(key, before.get(key, "-")), now.get(key, "-")
        if old != new:
            diffs.append(f"{key}: {old} saved, {new} now")
    return diffs


def make(family: str, **cfg):
    """Build a model: ``make("paper", encoding="learned", content=True)``."""
    config = make_config(family, **cfg)
    return FAMILIES[family][1](config)


def no_weight_decay(model: nn.Module) -> set[str]:
    """Full names of the parameters of `model` that take no weight decay: what each of its modules declares
    with `no_weight_decay()` (names relative to that module)."""
    return {
        f"{prefix}.{name}" if prefix else name
        for prefix, module in model.named_modules()
        if callable(getattr(module, "no_weight_decay", None))
        for name in module.no_weight_decay()
    }


def logged_state(model: nn.Module) -> dict[str, torch.Tensor] | None:
    """The state that the modules of `model` log (`logged_state()`), each entry stacked over those modules
    in module order, detached, float32 on the CPU: for the quadratic encodings centers (layers, heads, 2)
    and inverse_covariance (layers, heads, 2, 2). None when no module logs anything."""
    states = [
        state
        for module in model.modules()
        if callable(getattr(module, "logged_state", None))
        for state in [module.logged_state()]
        if state
    ]
    if not states:
        return None
    import torch

    with torch.no_grad():
        return {key: torch.stack([s[key].detach().float().cpu() for s in states]) for key in states[0]}


__all__ = [
    "FAMILIES",
    "logged_state",
    "make",
    "make_config",
    "no_weight_decay",
    "config_record",
    "resolved_config",
    "resolved_difference",
]
