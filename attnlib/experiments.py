"""The registry of experiments × presets, as data; `build_model` builds one by name.

An experiment is a model family, the model's config fields at the published settings, and a training
*protocol*. A preset (`paper`, `budget`, `smoke`, `long`) fixes, per protocol, the training configuration and
model overrides; a model and its Hierarchical-Attention (HA) variant share their protocol, so every preset
trains both the same way. `resolve(name, preset)` gives the one `RunConfig` a run records.

This module holds the configurations and the one-line reason of each; the dated history behind them (the
runs and measurements that set a protocol, the per-core throughput table) is data, in
`attnlib/protocol_history.yaml`, joined to the reasons here (`history`); each preset in words (`NOTES`) is
`attnlib/presets.yaml`.

    >>> from attnlib.experiments import resolve, build_model
    >>> resolve("learned_content_9h_ha", "budget").model["hierarchical"]
    True
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, replace
from functools import cache
from importlib import resources

from attnlib.checks import check
from attnlib.config import TrainConfig

PRESETS = ("paper", "budget", "smoke", "long", "budget30", "tokens16")
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
    overrides: dict = field(default_factory=dict)  # preset -> model fields of this experiment only
    # a variant changes one thing of another experiment to test a claim (e.g. the initialisation); it is
    # trained where the claims ledger needs it and stays out of the tables' grid and the timing command
    variant_of: str | None = None


@dataclass(frozen=True)
class Preset:
    """What a preset fixes for one protocol.

    model: overrides of the experiment's model fields (e.g. narrower widths for `budget`).
    data: dataset spec when none is given (attnlib.data.load_dataset; None = $ATTNLIB_DATA, CIFAR-10).
    attention_images / attention_mean_images: test images whose attention maps are saved / averaged; the
        first attention_mean_images test images are also those of the standard probe (probe.npz,
        `attnlib.measures.attention_probe`), which is an output and adds no setting to the fingerprint.
    timing_reps / timing_warmup: single-image forward passes timed / discarded (Table 3's protocol).
    probe_images: test images on which every epoch logs the per-layer attention measures (0: none).
    reason: why these settings (shown by `python -m attnlib list`).
    """

    train: TrainConfig
    model: dict = field(default_factory=dict)
    data: str | None = None
    attention_images: int = 3
    attention_mean_images: int = 100
    timing_reps: int = 300
    timing_warmup: int = 10
    probe_images: int = 0
    reason: str = ""


@dataclass(frozen=True, kw_only=True)
class RunConfig(Preset):
    """One experiment at one preset, fully resolved: the preset's settings with `model` the experiment's
    fields and the preset's overrides merged; what `config.json` records."""

    experiment: str
    preset: str
    family: str

    def to_dict(self) -> dict:
        d = asdict(self)
        # settings added later are recorded only when set, so that older results keep their fingerprints
        if d["train"]["grad_clip"] is None:
            del d["train"]["grad_clip"]
        if not d["probe_images"]:
            del d["probe_images"]
        return d


# ------------------------------------------------------------------------------------------ history
@cache
def _data(file: str) -> dict:
    """One of the package's YAML files (protocol_history.yaml, presets.yaml), read once."""
    import yaml

    return yaml.safe_load(resources.files("attnlib").joinpath(file).read_text("utf-8"))


def history(preset: str, protocol: str) -> str:
    """The dated history of `protocol` at `preset` (protocol_history.yaml), or "" when it has none."""
    return _data("protocol_history.yaml")["history"].get(preset, {}).get(protocol, "")


# ------------------------------------------------------------------------------------------ experiments
_PAPER_A = "Cordonnier et al. (2020), official code epfml/attention-cnn run scripts"
_RE = "[Re] (Varma T & Prabhu), configs in NishantPrabhu/Self-Attention-and-Convolutions"
BOTH = (False, True)  # a model, then its HA variant

_HEADS16 = dict(hidden=256, mlp=400)  # [Re] learned2d_*_16heads.yaml: narrower than the 9-head 400 / 512
_HEADS16_BUDGET = dict(hidden=40, mlp=100)  # the same ratios to the 9-head budget widths 64 / 128
# The [Re] code's encoder block (attnlib.models.paper, block="re"): no BertSelfOutput Linear, no q/k/v
# biases, head keys with biases, ReLU MLP, LayerNorm eps 1e-5, no hidden dropout; with 16 heads it projects
# the values (Linear(D, 16·D)) before the output projection.
_RE_BLOCK = dict(block="re", dropout=0.0)
_RE_VALUES = {9: {}, 16: dict(value="standard")}
# Every experiment that reproduces a [Re] row is the network as the [Re] code ran it (issue 30), each quirk a
# field of the model's config with the intended form as its default (attnlib.models.paper / vit docstrings):
# PyTorch's default init (init="re"); the learned models with content read queries and keys as (B, W, H)
# (score_layout="re"); ViT adds its residuals to the normalised input, has no final LayerNorm and averages
# a fresh U(0, 1) noise slot with the patches; the hierarchical SAN's attention reads x (raw_input). The one
# exception kept: per-pass batch-norm statistics in the hierarchical SAN (pass_statistics, its docstring).
_RE_INIT = dict(init="re")
_RE_CONTENT = dict(init="re", score_layout="re")
_RE_VIT = dict(residual="re", final_norm=False, pool="re_noise_cls", init="re")
_RE_SAN_HA = dict(raw_input=True, pass_statistics=True)
# SAN widths per preset: the official per-stage network, and the [Re] hierarchical one (attnlib.san.hierarchical)
_SAN_WIDTHS = {
    "budget": dict(widths=(32, 64, 128, 256), stem_width=32),
    "smoke": dict(widths=(32,) * 4, stem_width=8),
}
# learned_9h_pos_init: std of the positional tables and head keys (the paper's init_bert_weights: 0.02). At
# 0.2 the budget model's heads start at about 2.4x uniform (0.02: 1.01x), at random shifts; std 0.35 would
# start them at 7-10x, above the ledger's "localized" bar before any training, and 1.0 at about 50x.
POSITIONAL_STD = 0.2
_SAN_HIER_WIDTH = {"budget": dict(width=64, downsample=2), "smoke": dict(width=32, downsample=4)}
# resnet18_narrow: ResNet18 at the width whose parameter count is within 25% of the paper attention models' at
# the scaled-down presets (the near_resnet claim's comparable_within, analysis/claims.yaml): width 9 gives 222,967 against quadratic_aniso_9h's 235,682
# at budget (ResNet18's budget width 16: 701,466, 3.0x). At paper settings ResNet18 (11.2 M) is already
# comparable with the attention models (12.1-12.3 M): the variant is ResNet18 itself there.
_RESNET_NARROW = {"budget": dict(width=9), "smoke": dict(width=2)}


def _paper(encoding: str, heads: int, content: bool = False, ha: bool = False, **wider) -> dict:
    return dict(encoding=encoding, heads=heads, content=content, hierarchical=ha, **wider)


_NARROW16 = {"budget": _HEADS16_BUDGET}
# The [Re] networks of the learned-2D rows with content: block, values, learned form, init and score layout
_RE_LEARNED = {9: {**_RE_BLOCK, "learned_form": "re", **_RE_CONTENT},
               16: {**_HEADS16, **_RE_BLOCK, **_RE_VALUES[16], "learned_form": "re", **_RE_CONTENT}}  # fmt: skip
# The [Re] code's quadratic network (main/models/, GaussianAttention): its block, init and target vector
_RE_QUADRATIC = dict(**_RE_BLOCK, **_RE_INIT, quadratic_target="re")
_RE_QUADRATIC_SOURCE = (
    f"{_RE} (run g_2021-01-03_09-36_hier_9282: configs/gaussian.yaml of 686aaae, 9 heads, non-isotropic, "
    "hierarchical_weight_sharing {}; its code of that day: one shared EncoderBlock applied 6 times, the "
    "target vector computed from the shared parameters at every application)"
)
_INIT_OFFICIAL = (
    "attnlib variant of {}: init_bert_weights (N(0, 0.02²) for Linear and Embedding weights, zero biases; "
    "Cordonnier et al.'s official init) instead of the [Re] code's PyTorch defaults (positional tables N(0, 1), Linear "
    "U(±1/√fan_in)); everything else as the [Re] form"
)

# The registry as data: one row per experiment (name, family, model, protocol, title, baseline, source,
# overrides, variant_of), in the tables' order; an HA pair is written once (`_ha_pair`).
_ROWS: tuple[tuple, ...] = (
    ("resnet18", "resnet", {}, "resnet", "ResNet18", None, f"{_PAPER_A} (runs/resnet)"),
    ("resnet18_narrow", "resnet", {}, "resnet", "ResNet18 (narrow)", None,
     "attnlib variant of resnet18 for 'close to ResNet18 at a comparable number of parameters': at "
     "the scaled-down presets its width makes its parameter count comparable with the attention models' (within "
     "25%); at paper settings it is ResNet18", _RESNET_NARROW, "resnet18"),
    ("resnet18_narrow_s2d", "resnet", {"downsample": 2}, "resnet", "ResNet18 (narrow, on the attention's tokens)", None,
     "attnlib variant of resnet18_narrow for the resolution confound (issue 48): the same network on the "
     "attention models' space-to-depth input (4x4 at the scaled-down presets: an 8x8 grid of 48 channels; 2x2 "
     "at paper settings), so that what separates it from them is locality, not the resolution it sees",
     {k: {**v, "downsample": 4} for k, v in _RESNET_NARROW.items()}, "resnet18_narrow"),
    ("quadratic_iso_9h", "paper", _paper("quadratic_iso", 9), "attention", "SA quadratic (isotropic), 9 heads",
     None, f"{_PAPER_A} (runs/quadratic)"),
    ("quadratic_aniso_9h", "paper", _paper("quadratic_aniso", 9), "attention",
     "SA quadratic (non-isotropic), 9 heads", None, f"{_PAPER_A} (runs/quadratic-generalized)"),
    ("quadratic_aniso_16h", "paper", _paper("quadratic_aniso", 16), "attention",
     "SA quadratic (non-isotropic), 16 heads", None,
     f"{_RE} (run g_2021-01-18_21-00_normal_16heads_9311: main/configs/gaussian.yaml of 2021-01-19, 16 heads, "
     "attention_isotropic_gaussian False; hidden 400 as the 9-head model)"),
    ("learned_9h", "paper", _paper("learned", 9), "learned", "SA learned 2D, 9 heads", None,
     f"{_PAPER_A} (runs/learned)"),
    ("learned_9h_pos_init", "paper", _paper("learned", 9, positional_std=POSITIONAL_STD), "learned",
     f"SA learned 2D, 9 heads, positional init std {POSITIONAL_STD:g}", None,
     "attnlib variant of learned_9h: its positional tables r and head keys w drawn from "
     f"N(0, {POSITIONAL_STD:g}) instead of the paper's N(0, 0.02): the scores wᵀr and their gradients start 100x "
     "larger (a claim that may only appear with a change)", {}, "learned_9h"),
    ("learned_9h_init_re", "paper", _paper("learned", 9, **_RE_INIT), "learned", "SA learned 2D, 9 heads, [Re] init",
     None, "attnlib variant of learned_9h: PyTorch's default init, as the [Re] code (positional tables N(0, 1), "
     "Linear U(±1/√fan_in)), instead of init_bert_weights (N(0, 0.02²)): the learned-2D model without content in "
     "both initialisations, for the claim that positional heads attend at fixed shifts", {}, "learned_9h"),
    ("learned_16h", "paper", _paper("learned", 16, **_HEADS16, **_RE_BLOCK, **_RE_VALUES[16], **_RE_INIT),
     "learned_16h", "SA learned 2D, 16 heads", None, f"{_RE} (learned2d_nocontent_16heads.yaml)", _NARROW16),
)  # fmt: skip


def _ha_pair(base: str, family, models, protocol: str, title: str, sources, overrides=({}, {}),
             variant_of=None) -> list[Experiment]:  # fmt: skip
    """A model and its HA variant, sharing their protocol (the variant names the model its baseline);
    `family` and `overrides` are one for both or a pair (the hierarchical SAN is its own family)."""
    families = family if isinstance(family, tuple) else (family, family)
    return [Experiment(base + "_ha" * ha, families[ha], models[ha], protocol, title + ", HA" * ha,
                       base if ha else None, sources[ha], overrides[ha], variant_of) for ha in BOTH]  # fmt: skip


def _registry() -> dict[str, Experiment]:
    rows = [Experiment(*row) for row in _ROWS]
    # HA on the quadratic model ([Re] run logs 93.65% -> 92.82%), the [Re] code's network on both sides: variants
    # of quadratic_aniso_9h (Table 3's pair, out of Table 1's grid and the timing command), after the quadratic rows
    at = [r.name for r in rows].index("quadratic_aniso_16h") + 1
    rows[at:at] = _ha_pair("quadratic_re_9h", "paper", [_paper("quadratic_aniso", 9, ha=h, **_RE_QUADRATIC) for h in BOTH],
                     "attention", "SA quadratic (non-isotropic; [Re] code), 9 heads",
                     [_RE_QUADRATIC_SOURCE.format(h) for h in BOTH], variant_of="quadratic_aniso_9h")  # fmt: skip
    for heads in (9, 16):
        cfg, wider = f"{_RE} (learned2d_withcontent_{heads}heads", _RE_LEARNED[heads]
        rows += _ha_pair(f"learned_content_{heads}h", "paper", (_paper("learned", heads, True, **wider),
                         _paper("learned", heads, True, True, **wider)), "learned_content",
                         f"SA learned 2D + content, {heads} heads", (f"{cfg}.yaml)", f"{cfg}_hier.yaml)"),
                         (_NARROW16,) * 2 if heads == 16 else ({}, {}))  # fmt: skip
    # the [Re] pair with the intended init beside it (issue 30): what the [Re] code's PyTorch defaults change
    for e in [r for r in rows if r.name.startswith("learned_content_9h")]:
        base = e.name
        rows.append(Experiment(base + "_init_official", "paper", {**e.model, "init": "official"}, e.protocol,
                               f"{e.title}, init_bert_weights", source=_INIT_OFFICIAL.format(base),
                               variant_of=base))  # fmt: skip
    for kind in ("pairwise", "patchwise"):
        # pass_statistics named (it is the default) so that runs with the [Re] shared statistics are stale
        rows += _ha_pair(f"san_{kind}", ("san", "san_hier"), ({"sa_type": kind, "hierarchical": False},
                         {"sa_type": kind, **_RE_SAN_HA}), f"san_{kind}", f"SAN {kind}",
                         (f"{_RE} (SAN/configs/san_{kind}.yaml)",
                          f"{_RE} (SAN/configs/san_{kind}_hier.yaml, SAN/models/networks.py Encoder)"),
                         (_SAN_WIDTHS, _SAN_HIER_WIDTH))  # fmt: skip
    rows += _ha_pair("vit", "vit", [{"hierarchical": h, **_RE_VIT} for h in BOTH], "vit", "ViT",
                     [f"{_RE} (ViT/configs/vit{h}.yaml)" for h in ("", "_hier")])  # fmt: skip
    return {e.name: e for e in rows}


EXPERIMENTS: dict[str, Experiment] = _registry()


# ---------------------------------------------------------------------------------------------- presets
def _paper_presets() -> dict[str, Preset]:
    sgd = dict(lr=0.1, momentum=0.9, weight_decay=1e-4)
    san = dict(epochs=300, batch_size=40, warmup=10 / 300, nesterov=True, label_smoothing=0.1, **sgd)
    official = dict(epochs=300, batch_size=100, **sgd)  # Cordonnier et al.'s scripts, ResNet's too
    steps = (80 / 300, 150 / 300, 250 / 300)
    return {
        "attention": Preset(
            TrainConfig(warmup=0.05, schedule="cosine", **official),
            reason="Cordonnier et al.'s official run scripts: SGD 0.1, momentum 0.9, wd 1e-4 (none on centres/spreads), "
            "batch 100, 300 epochs, cosine with 5% linear warm-up per step",
        ),
        "resnet": Preset(
            TrainConfig(warmup=0.0, schedule="multistep", milestones=steps, **official),
            reason="Cordonnier et al.'s runs/resnet script: SGD 0.1, momentum 0.9, wd 1e-4, batch 100, 300 epochs, lr ÷10 at "
            "epochs 80, 150, 250 (no cosine flag)",
        ),
        "san_pairwise": Preset(
            TrainConfig(**san),
            reason="[Re] san_pairwise.yaml: SGD 0.1 Nesterov, wd 1e-4, batch 40, 300 epochs, 10 warm-up "
            "epochs then cosine, label smoothing 0.1",
        ),
        "san_patchwise": Preset(
            TrainConfig(**{**san, "lr": 0.01}), reason="[Re] san_patchwise.yaml: as pairwise but lr 0.01"
        ),
        "vit": Preset(
            TrainConfig(epochs=100, batch_size=32, warmup=0.05, nesterov=True, **{**sgd, "lr": 0.01}),
            reason="[Re] vit.yaml: SGD 0.01 Nesterov, wd 1e-4, batch 32, 100 epochs, 5 warm-up epochs then cosine",
        ),
    }


# Budget: the whole 16-run grid on 2 CPU cores in <= GRID_HOURS (why 3.5 h: `history("budget", "grid")`);
# `python -m attnlib list --preset budget` prints the estimate of every run and of the grid (the per-core
# throughputs and the estimates built on them are the plan of the runs: attnlib.analysis.plan).
GRID_HOURS = 3.5


def _budget_presets() -> dict[str, Preset]:  # the common choices are in NOTES["budget"]
    common = dict(epochs=4, batch_size=100, momentum=0.9, weight_decay=1e-4, schedule="cosine", warmup=0.05)
    no_dropout = dict(dropout=0.0, attn_dropout=0.0)
    san = dict(nesterov=True, label_smoothing=0.1, **common)
    attention = Preset(
        TrainConfig(lr=0.1, **common),
        model=dict(layers=4, hidden=64, mlp=128, downsample=4, **no_dropout),
        reason="Paper models: 4 layers (not 6), hidden 64 / MLP 128 (not 400 / 512; 16-head learned "
        "models 40 / 100, the [Re] 16-head ratios), 4x4 space-to-depth so attention runs on 8x8 tokens "
        "(not 16x16: 16x fewer attention pairs), no dropout (4 epochs underfit; dropout only slows "
        "learning); SGD as published (0.1, momentum 0.9, wd 1e-4, none on centres/spreads).",
    )

    def like(text: str, train: dict) -> Preset:  # the paper models' preset, other training
        return replace(attention, train=replace(attention.train, **train), reason=text)

    presets = {
        "attention": attention,
        "learned": like("As the other paper models, but 8 epochs:", dict(epochs=8)),
        "learned_16h": like(
            "As SA learned 2D, 9 heads (8 epochs), but lr 0.06 (not 0.1) and the gradient norm clipped to 1, as the "
            "learned models with content:",
            dict(epochs=8, lr=0.06, grad_clip=1.0),
        ),
        "learned_content": like(
            "As the other paper models, but lr 0.06 (not 0.1), 12 epochs, 1 warm-up epoch and the gradient norm "
            "clipped to 1, for the learned models with content and their HA variants alike.",
            dict(lr=0.06, epochs=12, warmup=1 / 12, grad_clip=1.0),
        ),
        "resnet": Preset(
            TrainConfig(lr=0.1, **common),
            model=dict(width=16),
            reason="ResNet18 at width 16 (stages 16-128 channels, 0.7M parameters, as big as the "
            "attention models); cosine instead of the step schedule, whose milestones mean nothing in 4 epochs.",
        ),
        "san_pairwise": Preset(
            TrainConfig(lr=0.1, **san),
            reason="SAN stage widths 32-256 (not 64-1024), stem 32; batch 100 (not 40) for CPU efficiency with "
            "the [Re] lr 0.1 kept (already high for its batch), Nesterov, label smoothing 0.1.",
        ),
        "san_patchwise": Preset(
            TrainConfig(lr=0.01, **san),
            reason="As SAN pairwise, with the [Re] patchwise lr 0.01 (its aggregation weights are not "
            "normalised).",
        ),
        "vit": Preset(
            TrainConfig(lr=0.03, nesterov=True, **{**common, "epochs": 6}),
            model=dict(layers=4, hidden=64, mlp=128, patch=4, stem="none", **no_dropout),
            reason="ViT: 4 layers, hidden 64 / MLP 128, 4x4 patches (8x8 tokens), no ResNet stem (it alone "
            "would cost more than the encoder at 32x32), no dropout; batch 100 with the [Re] lr 0.01 "
            "scaled linearly from batch 32 (0.03), Nesterov; 6 epochs,",
        ),
    }
    # each reason followed by its protocol's dated history
    return {
        k: replace(p, reason=" ".join(filter(None, (p.reason, history("budget", k)))))
        for k, p in presets.items()
    }


def _smoke_presets() -> dict[str, Preset]:
    small = dict(data="synthetic:64:32", attention_images=2, attention_mean_images=4, timing_reps=3)
    small |= dict(timing_warmup=1, reason="tiny widths (and 1-block stages) so a run takes about a second")

    def tiny(smoothing: float = 0.0, **model) -> Preset:
        train = TrainConfig(
            epochs=1, batch_size=16, lr=0.05, warmup=0.1, bf16=False, label_smoothing=smoothing
        )
        return Preset(train, model=model, **small)

    return {
        "attention": tiny(layers=2, hidden=16, mlp=16, downsample=4),
        "resnet": tiny(width=4, blocks=(1, 1)),
        "san_pairwise": tiny(0.1),  # widths: _SAN_WIDTHS
        "san_patchwise": tiny(0.1),
        "vit": tiny(layers=2, hidden=16, mlp=16, patch=8, stem="none"),
    }


# Long: the budget's models and protocols trained for a fixed LONG_EPOCHS (issues 16, 29): the claims about
# where heads attend need models trained for longer than 4-12 epochs. Every run trains all its epochs: no
# decision reads the test set (why the former `converge` preset's plateau stop was dropped: history("long",
# "plateau")).
LONG_EPOCHS = 60  # the cosine schedule spans all of them
LONG_PROBE_IMAGES = 100  # test images whose per-layer attention measures are logged every epoch
# Long runs at a high lr diverge slowly (what was seen: history("long", "clip_detail")).
LONG_MAX_LR, LONG_CLIP = 0.05, 1.0


def _longer(p: Preset) -> Preset:
    """The long preset of a protocol from its budget preset `p`."""
    lr, clip = min(p.train.lr, LONG_MAX_LR), p.train.grad_clip or LONG_CLIP
    # warm-up: the same share of steps
    train = replace(p.train, epochs=LONG_EPOCHS, lr=lr, grad_clip=clip)
    reason = (
        f"The budget protocol trained for a fixed {LONG_EPOCHS} epochs, cosine over all of them, with no early "
        f"stop and nothing decided on the test set {history('long', 'plateau')}; lr at most {LONG_MAX_LR} and "
        f"the gradient norm clipped to {LONG_CLIP:g} {history('long', 'clip')}; per-layer attention "
        f"measures of {LONG_PROBE_IMAGES} test images logged every epoch. Budget: {p.reason}"
    )
    return replace(p, train=train, probe_images=LONG_PROBE_IMAGES, reason=reason)


BUDGET_TARGET = 0.40  # test accuracy every attention model must reach at the budget preset (issue 7)

# Each preset in words (`python -m attnlib list`): presets.yaml, its {NAME}s this module's constants
NOTES = {preset: text.format(GRID_HOURS=GRID_HOURS, BUDGET_TARGET=BUDGET_TARGET, LONG_EPOCHS=LONG_EPOCHS)
         for preset, text in _data("presets.yaml")["notes"].items()}  # fmt: skip


#: Every protocol, in the order the tables list them
PROTOCOLS = ("attention", "learned", "learned_16h", "learned_content",
             "resnet", "san_pairwise", "san_patchwise", "vit")  # fmt: skip


def _with_defaults(presets: dict[str, Preset]) -> dict[str, Preset]:
    """Every protocol at one preset: one that `presets` does not give trains as the paper models' "attention"."""
    return {k: presets.get(k, presets["attention"]) for k in PROTOCOLS}


PRESET_TABLE: dict[str, dict[str, Preset]] = {
    "paper": _with_defaults(_paper_presets()),
    "budget": _with_defaults(_budget_presets()),
    "smoke": _with_defaults(_smoke_presets()),
}
PRESET_TABLE["long"] = {k: _longer(p) for k, p in PRESET_TABLE["budget"].items()}


# budget30 (issue 48): the budget protocols, unchanged but for a fixed BUDGET30_EPOCHS (warm-up the same share of
# steps, cosine over all of them) and the long preset's per-epoch probe: HA − model of the [Re] Fig. 8 pair at 12
# (budget), 30 and 60 (long) epochs, to see whether the gap moves toward the [Re] logs' +4.6 points at 300.
BUDGET30_EPOCHS = 30


def _budget30(p: Preset) -> Preset:
    reason = (
        f"The budget protocol trained for a fixed {BUDGET30_EPOCHS} epochs (its lr, clipping and warm-up share "
        f"unchanged), with the per-layer attention measures of {LONG_PROBE_IMAGES} test images logged every epoch: "
        f"HA − model between the budget's epochs and the long preset's {LONG_EPOCHS}. Budget: {p.reason}"
    )
    train = replace(p.train, epochs=BUDGET30_EPOCHS)
    return replace(p, train=train, probe_images=LONG_PROBE_IMAGES, reason=reason)


# tokens16 (issue 48): the papers' geometry, 16x16 tokens (2x2 space-to-depth, as both papers) instead of the
# budget's 8x8, for the claims about where heads attend; the budget's depth and widths (4 layers, hidden 64: the
# CPU's cut) and the long recipe otherwise, for TOKENS16_EPOCHS (set from a 1-epoch pilot:
# history("tokens16", "pilot")). Only the paper models have tokens; the other protocols train as at `long`.
TOKENS16_EPOCHS = 20
TOKENS16_DOWNSAMPLE = 2
PAPER_PROTOCOLS = ("attention", "learned", "learned_16h", "learned_content")


def _tokens16(protocol: str, p: Preset) -> Preset:
    long = _longer(p)
    train = replace(long.train, epochs=TOKENS16_EPOCHS)
    if protocol not in PAPER_PROTOCOLS:
        return replace(long, train=train, reason=f"As at long, for {TOKENS16_EPOCHS} epochs (this preset changes "
                       f"only the paper models' tokens). Long: {long.reason}")  # fmt: skip
    reason = (
        f"The papers' geometry: {TOKENS16_DOWNSAMPLE}x{TOKENS16_DOWNSAMPLE} space-to-depth, so attention runs on "
        f"16x16 tokens (the budget's 8x8: 16x fewer attention pairs), the budget's depth and widths, the long "
        f"recipe for {TOKENS16_EPOCHS} epochs {history('tokens16', 'pilot')} Long: {long.reason}"
    )
    model = {**long.model, "downsample": TOKENS16_DOWNSAMPLE}
    return replace(long, train=train, model=model, reason=" ".join(reason.split()))


PRESET_TABLE["budget30"] = {k: _budget30(p) for k, p in PRESET_TABLE["budget"].items()}
PRESET_TABLE["tokens16"] = {k: _tokens16(k, p) for k, p in PRESET_TABLE["budget"].items()}
# a preset that trains another preset's models (and their overrides)
MODELS_OF = {"long": "budget", "budget30": "budget", "tokens16": "budget"}


# ------------------------------------------------------------------------------------------------ lookups
def names(variants: bool = False) -> list[str]:
    """The experiments of the tables' grid, in registry order; `variants`: the claim variants too."""
    return [n for n, e in EXPERIMENTS.items() if variants or not e.variant_of]


def get(name: str) -> Experiment:
    check(name in EXPERIMENTS, "experiment", name, ", ".join(EXPERIMENTS))
    return EXPERIMENTS[name]


def check_preset(preset: str) -> str:
    check(preset in PRESETS, "preset", preset, ", ".join(PRESETS))
    return preset


def preset_for(name: str, preset: str = "paper") -> Preset:
    return PRESET_TABLE[check_preset(preset)][get(name).protocol]


def resolve(name: str, preset: str = "paper", *, epochs: int | None = None) -> RunConfig:
    """The full configuration of experiment `name` at `preset` (optionally with another epoch count)."""
    exp, p = get(name), preset_for(name, preset)
    train = p.train if epochs is None else replace(p.train, epochs=epochs)
    model = {**exp.model, **p.model, **exp.overrides.get(MODELS_OF.get(preset, preset), {})}
    return RunConfig(
        **{**vars(p), "model": model, "train": train}, experiment=name, preset=preset, family=exp.family
    )


def build_model(name: str, preset: str = "paper"):
    """The model of experiment `name` at `preset` (fresh weights; seed the global RNG first)."""
    from attnlib.models import make

    rc = resolve(name, preset)
    return make(rc.family, **rc.model)
