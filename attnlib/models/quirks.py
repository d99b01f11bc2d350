"""The [Re] code's quirks (issue 30), as data, and what each changes in a network.

Every experiment that reproduces a [Re] row is the network as the [Re] code ran it; each way that code departs
from the intended network is a field of the model's config, with the intended form as the field's default
(the model docstrings: ``attnlib.models.paper``, ``attnlib.models.vit``, ``attnlib.san.hierarchical``).
``QUIRKS`` lists them: the field and its two values, the [Re] rows that carry the [Re] value, what the [Re]
code does (with its file) and the intended form. The one documented exception, per-pass batch-norm
statistics in the hierarchical SAN (``pass_statistics``), is not a quirk we adopt and is not listed.

``measure(quirk)`` computes what a quirk changes, live, on one model (``Quirk.measured_on``):

- ``kind="logits"`` (the two forms share their parameters): the [Re]-form model at a preset, seeded, its
  weights copied into the model with that one field switched to the intended value (strict, except the keys
  the switch adds, kept at their initial value), both run in float64 eval mode on fixed random images:
  max |Δ logits| = max_{b,c} |z_re[b, c] − z_int[b, c]| and the share of images whose argmax changes;
- ``kind="noise"``: the [Re] form against itself, two eval forwards with fresh noise, same weights;
- ``kind="init"``: the standard deviation of named parameters in freshly built models under each form.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from attnlib.errors import ConfigError

KINDS = ("logits", "noise", "init")
IMAGES = 32  # the fixed random images each measure runs on
_LEARNED_RE = ("learned_16h", "learned_content_9h", "learned_content_9h_ha", "learned_content_16h",
               "learned_content_16h_ha")  # fmt: skip
_CONTENT_RE = _LEARNED_RE[1:]
_VIT_RE = ("vit", "vit_ha")
_QUADRATIC_RE = ("quadratic_re_9h", "quadratic_re_9h_ha")  # the [Re] Gaussian network and its HA variant


@dataclass(frozen=True)
class Quirk:
    """One way the [Re] code departs from the intended network.

    name: its display name; family: the model family (``attnlib.models.FAMILIES``) whose config has ``field``;
    re_value / intended_value: the field's value for the [Re] form / the intended form (the field's default);
    experiments: the registry's [Re] rows that carry ``re_value``; re_code: what the [Re] code does, with its
    file; intended: the intended form; kind: how ``measure`` shows the difference (``KINDS``);
    measured_on: the experiment it is measured on; probes: for ``kind="init"``, (label, regular expression
    matching parameter names) whose standard deviation is compared.
    """

    name: str
    family: str
    field: str
    re_value: object
    intended_value: object
    experiments: tuple[str, ...]
    re_code: str
    intended: str
    kind: str
    measured_on: str
    probes: tuple[tuple[str, str], ...] = ()


QUIRKS: tuple[Quirk, ...] = (
    Quirk(
        "Initialisation (learned 2D, quadratic)",
        "paper",
        "init",
        "re",
        "official",
        _LEARNED_RE + _QUADRATIC_RE,
        "keeps PyTorch's defaults: positional tables N(0, 1), Linear layers U(±1/√fan_in) "
        "(main/models/attention.py, nn.Embedding and nn.Linear as built; the quadratic centres and spreads "
        "have their own draw in both codes)",
        "init_bert_weights: N(0, 0.02²) for Linear and Embedding weights, zero biases (Cordonnier et al.'s official code)",
        "init",
        "learned_content_9h",
        probes=(
            ("positional tables", r"encoding\.(row|col)_embeddings\.weight$"),
            ("query projection", r"attn\.query\.weight$"),
        ),
    ),
    Quirk(
        "Quadratic target vector",
        "paper",
        "quadratic_target",
        "re",
        "intended",
        _QUADRATIC_RE,
        "writes the target vector's second component as −2(c + μ₂ + bμ₁) for −2(cμ₂ + bμ₁): the score gains "
        "(c + μ₂ − cμ₂)·δ₂ per head, so a head no longer attends around its centre "
        "(main/models/attention.py, GaussianAttention.get_heads_target_vectors)",
        "−½(δ − Δ)ᵀΣ⁻¹(δ − Δ), as Cordonnier et al.'s official code",
        "logits",
        "quadratic_re_9h_ha",
    ),
    Quirk(
        "Content-score layout",
        "paper",
        "score_layout",
        "re",
        "intended",
        _CONTENT_RE,
        "reads the (B, H, W) queries and keys as (B, W, H) and permutes the scores back "
        "(main/models/attention.py, Learned2dRelativeSelfAttention.forward)",
        "the score of each query with each key on the H × W grid, as written",
        "logits",
        "learned_content_9h_ha",
    ),
    Quirk(
        "ViT residual",
        "vit",
        "residual",
        "re",
        "prenorm",
        _VIT_RE,
        "adds each residual to the normalised input, f(LN(x)) + LN(x) "
        "(ViT/models/networks.py, SelfAttention.forward and Feedforward.forward)",
        "pre-norm residual x + f(LN(x)) (Dosovitskiy et al.)",
        "logits",
        "vit_ha",
    ),
    Quirk(
        "ViT final LayerNorm",
        "vit",
        "final_norm",
        False,
        True,
        _VIT_RE,
        "no LayerNorm after the last block (ViT/models/networks.py, Encoder.forward and ClassificationHead.forward)",
        "a LayerNorm before the pooling (added at its initial weight 1, bias 0)",
        "logits",
        "vit_ha",
    ),
    Quirk(
        "ViT pooling",
        "vit",
        "pool",
        "re_noise_cls",
        "tokens",
        _VIT_RE,
        "prepends a token of fresh U(0, 1) noise at every forward and averages all tokens "
        "(ViT/models/networks.py, PatchExtraction.forward and ClassificationHead.forward)",
        "the mean of the patch tokens",
        "noise",
        "vit_ha",
    ),
    Quirk(
        "Initialisation (ViT)",
        "vit",
        "init",
        "re",
        "official",
        _VIT_RE,
        "keeps PyTorch's defaults: position embedding N(0, 1), Linear layers U(±1/√fan_in), the ResNet stage's "
        "convolutions kaiming-normal (ViT/models/networks.py, PatchExtraction with torchvision's resnet18)",
        "init_bert_weights: N(0, 0.02²) for Linear and Embedding weights, zero biases; convolutions at "
        "PyTorch's default",
        "init",
        "vit",
        probes=(
            ("position embedding", r"^pos_embed\.weight$"),
            ("stem stage convolutions", r"^stem\.3\..*conv\d\.weight$"),
        ),
    ),
    Quirk(
        "SAN-HA attention input",
        "san_hier",
        "raw_input",
        True,
        False,
        ("san_pairwise_ha", "san_patchwise_ha"),
        "applies the attention to the block's input x and discards relu(bn1(x)) "
        "(SAN/models/networks.py, Bottleneck.forward)",
        "the attention reads relu(bn1(x)), as in the official SAN",
        "logits",
        "san_pairwise_ha",
    ),
)


def get(name: str) -> Quirk:
    """The quirk called ``name`` (its display name)."""
    for q in QUIRKS:
        if q.name == name:
            return q
    raise ConfigError("quirk", name, [q.name for q in QUIRKS])


def _build(family: str, model: dict, seed: int):
    import torch

    from attnlib.models import make

    torch.manual_seed(seed)
    return make(family, **model).double().eval()


def _logits(model, x, noise_seed: int):
    """Eval-mode logits, the global generator seeded first (the [Re] noise slot draws from it)."""
    import torch

    with torch.no_grad(), torch.random.fork_rng():
        torch.manual_seed(noise_seed)
        return model(x)


def logit_change(name: str, field: str, value, preset: str = "budget", *, seed: int = 0, images: int = IMAGES,
                 data_seed: int = 0) -> dict:  # fmt: skip
    """{'max_abs': max |Δ logits|, 'argmax_share': share of images whose argmax changes} between experiment
    ``name`` at ``preset`` (seeded with ``seed``) and the same network with ``field`` set to ``value``, its
    weights copied (every key of the first; the keys only the second has keep their initial values), both in
    float64 eval mode on ``images`` N(0, 1) images of a generator seeded with ``data_seed``; the noise of a
    [Re] noise slot is drawn alike in both."""
    import torch

    from attnlib.experiments import resolve

    run = resolve(name, preset)
    first = _build(run.family, run.model, seed)
    second = _build(run.family, {**run.model, field: value}, seed)
    theirs = second.state_dict()
    if any(k in theirs and theirs[k].shape != v.shape for k, v in first.state_dict().items()):
        raise ConfigError(field, value, "a switch whose two forms share their weights (a shape differs)")
    missing, unexpected = second.load_state_dict(first.state_dict(), strict=False)
    if unexpected:
        raise ConfigError(field, value, f"a switch that removes no weights (it removes {unexpected})")
    added = set(second.state_dict()) - set(first.state_dict())
    if set(missing) != added:
        raise ConfigError(field, value, "a switch whose two forms share their weights")
    generator = torch.Generator().manual_seed(data_seed)
    x = torch.randn(images, 3, 32, 32, generator=generator, dtype=torch.float64)
    a, b = _logits(first, x, data_seed), _logits(second, x, data_seed)
    return {
        "max_abs": float((a - b).abs().max()),
        "argmax_share": float((a.argmax(1) != b.argmax(1)).double().mean()),
    }


def noise_spread(
    name: str, preset: str = "budget", *, seed: int = 0, images: int = IMAGES, data_seed: int = 0
) -> dict:
    """{'max_abs': max |Δ logits|, 'argmax_share'} between two eval forwards of experiment ``name`` at
    ``preset`` on the same float64 images, each with fresh noise (the [Re] noise slot)."""
    import torch

    from attnlib.experiments import resolve

    run = resolve(name, preset)
    model = _build(run.family, run.model, seed)
    x = torch.randn(
        images, 3, 32, 32, generator=torch.Generator().manual_seed(data_seed), dtype=torch.float64
    )
    a, b = _logits(model, x, data_seed + 1), _logits(model, x, data_seed + 2)
    return {
        "max_abs": float((a - b).abs().max()),
        "argmax_share": float((a.argmax(1) != b.argmax(1)).double().mean()),
    }


def init_std(
    name: str, probes, overrides: dict | None = None, preset: str = "paper", *, seed: int = 0
) -> dict:
    """{label: standard deviation of the parameters whose names match the label's expression} in a freshly
    built model of experiment ``name`` at ``preset`` (with ``overrides`` of its model fields)."""
    import torch

    from attnlib.experiments import resolve
    from attnlib.models import make

    run = resolve(name, preset)
    torch.manual_seed(seed)
    model = make(run.family, **{**run.model, **(overrides or {})})
    out = {}
    for label, pattern in probes:
        values = [p.detach().flatten() for n, p in model.named_parameters() if re.search(pattern, n)]
        if not values:
            raise ConfigError("probes", pattern, f"an expression matching a parameter of {name}")
        out[label] = float(torch.cat(values).double().std())
    return out


def measure(quirk: Quirk, preset: str = "budget") -> dict:
    """What ``quirk`` changes on ``quirk.measured_on`` (module docstring): ``max_abs`` and ``argmax_share``
    (kinds "logits" and "noise", at ``preset``; None for "init"), ``std`` ({label: (re, intended)}: kind
    "init", at the paper preset, the size the [Re] code ran; {} otherwise)."""
    if quirk.kind == "logits":
        return {**logit_change(quirk.measured_on, quirk.field, quirk.intended_value, preset), "std": {}}
    if quirk.kind == "noise":
        return {**noise_spread(quirk.measured_on, preset), "std": {}}
    if quirk.kind == "init":
        forms = [
            init_std(quirk.measured_on, quirk.probes, {quirk.field: v})
            for v in (quirk.re_value, quirk.intended_value)
        ]
        return {
            "max_abs": None,
            "argmax_share": None,
            "std": {k: (forms[0][k], forms[1][k]) for k in forms[0]},
        }
    raise ConfigError("kind", quirk.kind, KINDS)
