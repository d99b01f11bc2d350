"""The [Re] code's quirks (issue 30), as data, and what each changes in a network.

Every experiment that reproduces a [Re] row is the network as the [Re] code ran it; each way that code departs
from the intended network is a field of the model's config, with the intended form as the field's default
(the model docstrings: ``attnlib.models.paper``, ``attnlib.models.vit``, ``attnlib.san.hierarchical``).
``QUIRKS`` lists them, read from quirks.yaml beside this module: the field and its two values, the [Re] rows that carry the [Re] value, what the [Re]
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
from dataclasses import MISSING, dataclass

from attnlib.errors import ConfigError

KINDS = ("logits", "noise", "init")
IMAGES = 32  # the fixed random images each measure runs on


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


def _load() -> tuple[Quirk, ...]:
    """The quirks of quirks.yaml (beside this module), each checked: its keys, its kind, its experiments (names
    or the file's groups). A damaged file is a ConfigError naming the quirk and the key."""
    from importlib import resources

    import yaml

    doc = yaml.safe_load(resources.files("attnlib.models").joinpath("quirks.yaml").read_text(encoding="utf-8"))
    groups, keys = doc["groups"], set(Quirk.__dataclass_fields__)
    found = []
    for entry in doc["quirks"]:
        name = entry.get("name", "?")
        if set(entry) - keys or {k for k, f in Quirk.__dataclass_fields__.items() if f.default is MISSING} - set(entry):
            raise ConfigError(f"quirks.yaml: quirk {name!r} keys", sorted(entry), sorted(keys))
        if entry["kind"] not in KINDS:
            raise ConfigError(f"quirks.yaml: quirk {name!r} kind", entry["kind"], KINDS)
        names = [entry["experiments"]] if isinstance(entry["experiments"], str) else entry["experiments"]
        experiments = tuple(e for n in names for e in groups.get(n, [n]))
        probes = tuple(tuple(p) for p in entry.get("probes", ()))
        found.append(Quirk(**{**entry, "experiments": experiments, "probes": probes}))
    return tuple(found)


QUIRKS: tuple[Quirk, ...] = _load()


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
