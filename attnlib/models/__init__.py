"""Model families: name -> (Config dataclass, model class), imported on first use.

>>> from attnlib.models import FAMILIES, make
>>> Config, Model = FAMILIES["paper"]
>>> model = make("vit", layers=2, hierarchical=True)
"""

from __future__ import annotations

import dataclasses
import importlib
from collections.abc import Iterator, Mapping

from attnlib.errors import ConfigError

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


def make(family: str, **cfg):
    """Build a model: ``make("paper", encoding="learned", content=True)``."""
    config = make_config(family, **cfg)
    return FAMILIES[family][1](config)


__all__ = ["FAMILIES", "make", "make_config"]
