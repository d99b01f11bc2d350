"""The registry of experiments × presets, as data; `build_model` builds one by name.

An experiment is a model family, the model's config fields at the published settings, and a training
*protocol*. A preset (`paper`, `budget`, `smoke`) fixes, per protocol, the training configuration and
model overrides; a model and its Hierarchical-Attention (HA) variant share their protocol, so every preset
trains both the same way. `resolve(name, preset)` gives the one `RunConfig` a run records.

    >>> from attnlib.experiments import resolve, build_model
    >>> resolve("learned_content_9h_ha", "budget").model["hierarchical"]
    True
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

from attnlib.errors import ConfigError
from attnlib.train import TrainConfig

PRESETS = ("paper", "budget", "smoke")
CIFAR10_TRAIN, CIFAR10_TEST = 50_000, 10_000


@dataclass(frozen=True)
class Experiment:
    """One row of Table 1 / Table 3: `family` (attnlib.models.FAMILIES) and its config at paper settings."""

    name: str
    family: str
    model: dict
    protocol: str  # training protocol: experiments sharing it train alike at every preset
    title: str  # how tables and figures name it
    baseline: str | None = None  # for an HA variant: the normal model it is compared with (Table 3)
    source: str = ""  # where the paper settings come from


@dataclass(frozen=True)
class Preset:
    """What a preset fixes for one protocol.

    model: overrides of the experiment's model fields (e.g. narrower widths for `budget`).
    data: dataset spec when none is given (attnlib.data.load_dataset; None = $ATTNLIB_DATA, CIFAR-10).
    attention_images / attention_mean_images: test images whose attention maps are saved / averaged.
    timing_reps / timing_warmup: single-image forward passes timed / discarded (Table 3's protocol).
    images_per_s: measured (train, eval) throughput on the reference machine, for time estimates.
    reason: why these settings (shown by `python -m attnlib list`).
    """

    train: TrainConfig
    model: dict = field(default_factory=dict)
    data: str | None = None
    attention_images: int = 3
    attention_mean_images: int = 100
    timing_reps: int = 300
    timing_warmup: int = 10
    images_per_s: dict | None = None  # experiment name -> (train images/s, eval images/s)
    reason: str = ""


@dataclass(frozen=True)
class RunConfig:
    """One experiment at one preset, fully resolved: what `config.json` records."""

    experiment: str
    preset: str
    family: str
    model: dict
    train: TrainConfig
    data: str | None
    attention_images: int
    attention_mean_images: int
    timing_reps: int
    timing_warmup: int
    reason: str

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)


# ------------------------------------------------------------------------------------------ experiments
_PAPER_A = "Cordonnier et al. (2020), official code epfml/attention-cnn run scripts"
_RE = "[Re] (Varma & Prabhu), configs in NishantPrabhu/Self-Attention-and-Convolutions"


def _paper(encoding: str, heads: int, content: bool = False, hierarchical: bool = False, **wider) -> dict:
    return dict(encoding=encoding, heads=heads, content=content, hierarchical=hierarchical, **wider)


def _registry() -> dict[str, Experiment]:
    heads16 = dict(hidden=256, mlp=400)  # [Re] learned2d_*_16heads.yaml
    rows = [
        Experiment("resnet18", "resnet", {}, "resnet", "ResNet18", source=_PAPER_A + " (runs/resnet)"),
        Experiment(
            "quadratic_iso_9h",
            "paper",
            _paper("quadratic_iso", 9),
            "attention",
            "SA quadratic (isotropic), 9 heads",
            source=_PAPER_A + " (runs/quadratic)",
        ),
        Experiment(
            "quadratic_aniso_9h",
            "paper",
            _paper("quadratic_aniso", 9),
            "attention",
            "SA quadratic (non-isotropic), 9 heads",
            source=_PAPER_A + " (runs/quadratic-generalized)",
        ),
        Experiment(
            "quadratic_aniso_16h",
            "paper",
            _paper("quadratic_aniso", 16),
            "attention",
            "SA quadratic (non-isotropic), 16 heads",
            source=_PAPER_A + " (runs/many-heads, hidden 400)",
        ),
        Experiment(
            "learned_9h",
            "paper",
            _paper("learned", 9),
            "attention",
            "SA learned 2D, 9 heads",
            source=_PAPER_A + " (runs/learned)",
        ),
        Experiment(
            "learned_16h",
            "paper",
            _paper("learned", 16, **heads16),
            "attention",
            "SA learned 2D, 16 heads",
            source=_RE + " (learned2d_nocontent_16heads.yaml)",
        ),
    ]
    for heads in (9, 16):
        wider = heads16 if heads == 16 else {}
        base = f"learned_content_{heads}h"
        cfg = f"learned2d_withcontent_{heads}heads"
        rows += [
            Experiment(
                base,
                "paper",
                _paper("learned", heads, True, **wider),
                "attention",
                f"SA learned 2D + content, {heads} heads",
                source=f"{_RE} ({cfg}.yaml)",
            ),
            Experiment(
                base + "_ha",
                "paper",
                _paper("learned", heads, True, True, **wider),
                "attention",
                f"SA learned 2D + content, {heads} heads, HA",
                base,
                f"{_RE} ({cfg}_hier.yaml)",
            ),
        ]
    for kind in ("pairwise", "patchwise"):
        for ha in (False, True):
            name = f"san_{kind}" + ("_ha" if ha else "")
            rows.append(
                Experiment(
                    name,
                    "san",
                    {"sa_type": kind, "hierarchical": ha},
                    f"san_{kind}",
                    f"SAN {kind}" + (", HA" if ha else ""),
                    f"san_{kind}" if ha else None,
                    f"{_RE} (SAN/configs/san_{kind}{'_hier' if ha else ''}.yaml)",
                )
            )
    for ha in (False, True):
        rows.append(
            Experiment(
                "vit_ha" if ha else "vit",
                "vit",
                {"hierarchical": ha},
                "vit",
                "ViT" + (", HA" if ha else ""),
                "vit" if ha else None,
                f"{_RE} (ViT/configs/vit{'_hier' if ha else ''}.yaml)",
            )
        )
    return {e.name: e for e in rows}


EXPERIMENTS: dict[str, Experiment] = _registry()


# ---------------------------------------------------------------------------------------------- presets
def _paper_presets() -> dict[str, Preset]:
    sgd = dict(lr=0.1, momentum=0.9, weight_decay=1e-4)
    return {
        "attention": Preset(
            TrainConfig(epochs=300, batch_size=100, warmup=0.05, schedule="cosine", **sgd),
            reason="Paper A official runs: SGD 0.1, momentum 0.9, wd 1e-4 (none on centres/spreads), "
            "batch 100, 300 epochs, cosine with 5% linear warm-up per step",
        ),
        "resnet": Preset(
            TrainConfig(
                epochs=300,
                batch_size=100,
                warmup=0.0,
                schedule="multistep",
                milestones=(80 / 300, 150 / 300, 250 / 300),
                **sgd,
            ),
            reason="Paper A runs/resnet: SGD 0.1, momentum 0.9, wd 1e-4, batch 100, 300 epochs, lr ÷10 at "
            "epochs 80, 150, 250 (no cosine flag)",
        ),
        "san_pairwise": Preset(
            TrainConfig(
                epochs=300, batch_size=40, warmup=10 / 300, nesterov=True, label_smoothing=0.1, **sgd
            ),
            reason="[Re] san_pairwise.yaml: SGD 0.1 Nesterov, wd 1e-4, batch 40, 300 epochs, 10 warm-up "
            "epochs then cosine, label smoothing 0.1",
        ),
        "san_patchwise": Preset(
            TrainConfig(
                epochs=300,
                batch_size=40,
                warmup=10 / 300,
                nesterov=True,
                label_smoothing=0.1,
                **{**sgd, "lr": 0.01},
            ),
            reason="[Re] san_patchwise.yaml: as pairwise but lr 0.01",
        ),
        "vit": Preset(
            TrainConfig(epochs=100, batch_size=32, warmup=0.05, nesterov=True, **{**sgd, "lr": 0.01}),
            reason="[Re] vit.yaml: SGD 0.01 Nesterov, wd 1e-4, batch 32, 100 epochs, 5 warm-up epochs then cosine",
        ),
    }


# Budget: the whole 16-run grid on 2 CPU cores in <= 2 h (estimates: `python -m attnlib list --preset budget`).
# Measured throughput (train, eval images/s, bf16 autocast, batch as below) on the reference machine
# (2 cores of an AMD EPYC with AVX512-BF16, shared), filled in by the measurement noted in each reason.
_BUDGET_IPS: dict[str, tuple[float, float]] = {}


def _budget_presets() -> dict[str, Preset]:
    common = dict(momentum=0.9, weight_decay=1e-4, schedule="cosine", warmup=0.05)
    return {
        "attention": Preset(
            TrainConfig(epochs=4, batch_size=100, lr=0.1, **common),
            model=dict(layers=4, hidden=128, mlp=256, downsample=4),
            images_per_s=_BUDGET_IPS,
            reason="TBD",
        ),
        "resnet": Preset(
            TrainConfig(epochs=4, batch_size=100, lr=0.1, **common),
            model=dict(width=16),
            images_per_s=_BUDGET_IPS,
            reason="TBD",
        ),
        "san_pairwise": Preset(
            TrainConfig(epochs=4, batch_size=100, lr=0.1, nesterov=True, label_smoothing=0.1, **common),
            model={},
            images_per_s=_BUDGET_IPS,
            reason="TBD",
        ),
        "san_patchwise": Preset(
            TrainConfig(epochs=4, batch_size=100, lr=0.01, nesterov=True, label_smoothing=0.1, **common),
            model={},
            images_per_s=_BUDGET_IPS,
            reason="TBD",
        ),
        "vit": Preset(
            TrainConfig(epochs=4, batch_size=100, lr=0.01, nesterov=True, **common),
            model=dict(layers=4, hidden=128, mlp=256, patch=4),
            images_per_s=_BUDGET_IPS,
            reason="TBD",
        ),
    }


def _smoke_presets() -> dict[str, Preset]:
    tiny = dict(epochs=1, batch_size=16, lr=0.05, warmup=0.1, bf16=False)
    small = dict(
        data="synthetic:64:32",
        attention_images=2,
        attention_mean_images=4,
        timing_reps=3,
        timing_warmup=1,
        reason="tests and CI: tiny model, 1 epoch on 64 synthetic images, a few seconds",
    )
    san_tiny = dict(widths=(32, 32, 32, 32), stem_width=8)
    return {
        "attention": Preset(
            TrainConfig(**tiny), model=dict(layers=2, hidden=16, mlp=16, downsample=4), **small
        ),
        "resnet": Preset(TrainConfig(**tiny), model=dict(width=4, blocks=(1, 1)), **small),
        "san_pairwise": Preset(TrainConfig(**tiny, label_smoothing=0.1), model=san_tiny, **small),
        "san_patchwise": Preset(TrainConfig(**tiny, label_smoothing=0.1), model=san_tiny, **small),
        "vit": Preset(
            TrainConfig(**tiny),
            model=dict(layers=2, hidden=16, mlp=16, patch=8, stem="none"),
            **small,
        ),
    }


PRESET_TABLE: dict[str, dict[str, Preset]] = {
    "paper": _paper_presets(),
    "budget": _budget_presets(),
    "smoke": _smoke_presets(),
}


# ------------------------------------------------------------------------------------------------ lookups
def names() -> list[str]:
    return list(EXPERIMENTS)


def get(name: str) -> Experiment:
    if name not in EXPERIMENTS:
        raise ConfigError("experiment", name, ", ".join(EXPERIMENTS))
    return EXPERIMENTS[name]


def check_preset(preset: str) -> str:
    if preset not in PRESETS:
        raise ConfigError("preset", preset, ", ".join(PRESETS))
    return preset


def preset_for(name: str, preset: str = "paper") -> Preset:
    return PRESET_TABLE[check_preset(preset)][get(name).protocol]


def resolve(name: str, preset: str = "paper", *, epochs: int | None = None) -> RunConfig:
    """The full configuration of experiment `name` at `preset` (optionally with another epoch count)."""
    exp, p = get(name), preset_for(name, preset)
    train = p.train if epochs is None else p.train.replace(epochs=epochs)
    return RunConfig(
        experiment=name,
        preset=preset,
        family=exp.family,
        model={**exp.model, **p.model},
        train=train,
        data=p.data,
        attention_images=p.attention_images,
        attention_mean_images=p.attention_mean_images,
        timing_reps=p.timing_reps,
        timing_warmup=p.timing_warmup,
        reason=p.reason,
    )


def build_model(name: str, preset: str = "paper"):
    """The model of experiment `name` at `preset` (fresh weights; seed the global RNG first)."""
    from attnlib.models import make

    rc = resolve(name, preset)
    return make(rc.family, **rc.model)


def count_parameters(name: str, preset: str = "paper") -> int:
    """Trainable parameters of `name` at `preset` (built on the meta device: no memory, no init cost)."""
    import torch

    try:
        with torch.device("meta"):
            model = build_model(name, preset)
    except (NotImplementedError, RuntimeError):
        model = build_model(name, preset)
    return sum(p.numel() for p in model.parameters() if p.requires_grad)


def estimate_seconds(name: str, preset: str = "budget", epochs: int | None = None) -> float | None:
    """Estimated wall time of one run on the reference machine (full CIFAR-10), or None if unmeasured:
    epochs · (50 000 / train images/s + 10 000 / eval images/s) + attention maps and timing."""
    p = preset_for(name, preset)
    ips = (p.images_per_s or {}).get(name)
    if ips is None:
        return None
    train_ips, eval_ips = ips
    epochs = p.train.epochs if epochs is None else epochs
    extra = (p.timing_reps + p.timing_warmup) / eval_ips * 4 + p.attention_mean_images / eval_ips * 4
    return epochs * (CIFAR10_TRAIN / train_ips + CIFAR10_TEST / eval_ips) + extra
