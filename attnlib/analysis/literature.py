"""The published numbers of both papers (Cordonnier et al. 2020 and the [Re] report), each with its source and
kind, as data; and what the research notes could not find, so that the book can say so plainly.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

PAPER = "Cordonnier et al. (2020)"

RE = "[Re] Varma T & Prabhu (2021)"


def short(source: str) -> str:
    """How prose and table headers name a source once its full name has been given: "[Re]", "Cordonnier
    et al."."""
    return {PAPER: "Cordonnier et al.", RE: "[Re]"}.get(source, source)


@dataclass(frozen=True)
class Reference:
    """One number from the literature beside ours.

    ``quantity`` is ``test_accuracy`` (a fraction) or ``params``; ``kind`` says what sort of figure it
    is: ``printed`` (read in the paper), ``claimed`` (a benchmark page quoting the paper),
    ``run-log`` (a run folder name / W&B export of the [Re] authors, not their printed table) or
    ``derived`` (counted from the authors' code, not printed anywhere). ``network``: "" when the figure is
    for the experiment's own network; else the network it is for (the source's model for that row of the
    paper's table, built differently from ours), so that it is never read as a number of our network."""

    experiment: str
    source: str
    quantity: str
    value: float
    kind: str
    where: str
    note: str = ""
    network: str = ""


_S1 = (
    "epfml/attention-cnn code: counted from the layer shapes of its models (models/transformer.py, models/bert.py) "
    "with the settings of its run scripts (runs/*/run.sh)"
)

_S6 = "sotaverified.org benchmark entry for the paper (CIFAR-10, 'SA quadratic embedding', listed as claimed)"

_S8_LOG = "NishantPrabhu/Self-Attention-and-Convolutions, temp/log_extract.ipynb run-folder name `{}`"

_S8_CODE = (
    "NishantPrabhu/Self-Attention-and-Convolutions code and configs: counted from the layer shapes of the [Re] "
    "models with the settings of each model's config"
)

# The [Re] models of Table 1's Paper A rows are built with the [Re] block (main/models/), not the official one
# that our Paper A experiments use: their figures are labelled as those of another network (Reference.network).
_RE_BLOCK = (
    "the [Re] block (no BertSelfOutput Linear, LayerNorm eps 1e-5) and PyTorch's default init; "
    "ours is Cordonnier et al.'s official block"
)
_RE_LEARNED_9H = "[Re] learned2d_nocontent_9heads"
_RE_GAUSSIAN = "[Re] gaussian (non-isotropic)"


def _acc(experiment, source, value, kind, where, note="", network=""):
    return Reference(experiment, source, "test_accuracy", value, kind, where, note, network)


def _par(experiment, source, value, where, note="", network=""):
    return Reference(experiment, source, "params", value, "derived", where, note, network)


REFERENCES: tuple[Reference, ...] = (
    # Cordonnier et al. (2020), Table 1: only one accuracy could be read, on a benchmark page.
    _acc(
        "quadratic_iso_9h",
        PAPER,
        0.938,
        "claimed",
        _S6,
        "Table 1 row 'SA quadratic embedding'; which quadratic variant the row is was not read",
    ),
    _par("quadratic_iso_9h", PAPER, 12_086_844, _S1),
    _par("quadratic_aniso_9h", PAPER, 12_087_006, _S1),
    _par("learned_9h", PAPER, 12_278_682, _S1),
    _par("learned_content_9h", PAPER, 29_601_882, _S1, "no run script for this model in the official code"),
    # [Re] (Varma T & Prabhu): run-log values; the printed tables were not retrievable.
    _acc("resnet18", RE, 0.9463, "run-log", _S8_LOG.format("resnet18_9463")),
    # One run, one row: the [Re] Gaussian runs were non-isotropic (their configs/gaussian.yaml as committed on
    # the day of each run has attention_isotropic_gaussian: False, also the code's default), so no isotropic row.
    _acc(
        "quadratic_aniso_9h",
        RE,
        0.9365,
        "run-log",
        _S8_LOG.format("g_2020-12-31_22-09_normal_9365"),
        "non-isotropic: configs/gaussian.yaml committed at 21:23 that day (4698a66) and the hyperparameters.txt "
        "of that day's earlier runs say attention_isotropic_gaussian: false, 9 heads; W&B CSV max 0.9341; "
        f"of another network, {_RE_GAUSSIAN}: {_RE_BLOCK}",
        network=_RE_GAUSSIAN,
    ),
    _acc(
        "quadratic_aniso_16h",
        RE,
        0.9311,
        "run-log",
        _S8_LOG.format("g_2021-01-18_21-00_normal_16heads_9311"),
        "non-isotropic: main/configs/gaussian.yaml committed the next day (10fce8b) has 16 heads and "
        f"attention_isotropic_gaussian: False; of another network, {_RE_GAUSSIAN}, 16 heads: {_RE_BLOCK}",
        network=_RE_GAUSSIAN + ", 16 heads",
    ),
    _acc(
        "learned_9h",
        RE,
        0.9036,
        "run-log",
        _S8_LOG.format("l2d_..._normal_nqc_9036"),
        f"W&B CSV max 0.9036; of another network, {_RE_LEARNED_9H} (11,316,390 parameters): {_RE_BLOCK} "
        "(12,278,682)",
        network=_RE_LEARNED_9H,
    ),
    _acc("learned_16h", RE, 0.9115, "run-log", _S8_LOG.format("l2d_..._normal_nqc_16heads_9115")),
    _acc(
        "learned_content_9h",
        RE,
        0.8636,
        "run-log",
        _S8_LOG.format("l2d_..._normal_qc_8636"),
        "W&B CSV max 0.8636",
    ),
    _acc("learned_content_16h", RE, 0.8556, "run-log", _S8_LOG.format("l2d_..._qc_normal_16heads_8556")),
    _acc(
        "learned_content_9h_ha",
        RE,
        0.9100,
        "run-log",
        _S8_LOG.format("l2d_..._hier_qc_9100"),
        "W&B CSV max 0.9074 (possibly an earlier run)",
    ),
    _acc("learned_content_16h_ha", RE, 0.8768, "run-log", _S8_LOG.format("l2d_..._hier_qc_16heads_8768")),
    _par(
        "quadratic_iso_9h",
        RE,
        11_124_444,
        _S8_CODE,
        f"of another network, [Re] gaussian: {_RE_BLOCK}",
        network="[Re] gaussian (isotropic)",
    ),
    _par(
        "quadratic_aniso_9h",
        RE,
        11_124_606,
        _S8_CODE,
        f"of another network, {_RE_GAUSSIAN}: {_RE_BLOCK}",
        network=_RE_GAUSSIAN,
    ),
    _par(
        "learned_9h",
        RE,
        11_316_390,
        _S8_CODE,
        f"of another network, {_RE_LEARNED_9H}: {_RE_BLOCK}",
        network=_RE_LEARNED_9H,
    ),
    _par("learned_16h", RE, 13_973_802, _S8_CODE, "the [Re] 16-head configs use hidden 256, MLP 400"),
    _par("learned_content_9h", RE, 28_478_682, _S8_CODE),
    _par("learned_content_16h", RE, 26_459_754, _S8_CODE, "the [Re] 16-head configs use hidden 256, MLP 400"),
    _par("learned_content_9h_ha", RE, 4_754_122, _S8_CODE),
    _par("learned_content_16h_ha", RE, 4_414_874, _S8_CODE),
    _par(
        "san_pairwise_ha",
        RE,
        352_750,
        _S8_CODE,
        "SAN/models/networks.py Encoder, sa_type pair_hier: the modules its hierarchical forward uses "
        "(691,582 with the four stages it builds but never calls)",
    ),
    _par(
        "san_patchwise_ha",
        RE,
        356_282,
        _S8_CODE,
        "as pairwise, sa_type patch_hier (709,242 with the unused stages)",
    ),
    _par(
        "vit",
        RE,
        37_394_506,
        _S8_CODE,
        "ours in the [Re] form too (the noise 'cls' slot's position row, no final LayerNorm); the intended "
        "form (attnlib.models.vit) has 400 more",
    ),
    _par("vit_ha", RE, 6_531_946, _S8_CODE, "as for ViT"),
)

#: What the research notes could not find (the book states these plainly).
NOT_FOUND: tuple[str, ...] = (
    f"{PAPER}, Table 1: the accuracies of ResNet18, 'SA learned embedding' and 'SA learned embedding + "
    "content', and every printed #params and #FLOPs value (only 'SA quadratic embedding 93.8 %' was read, "
    "on a benchmark page).",
    f"{PAPER}: the printed hyper-parameter table (the official code's defaults are used instead).",
    f"{RE}: the printed reproduction table and Table 3 (accuracy, #params, wall time of every model and its "
    "HA variant); the report PDF was not retrievable. The accuracies shown are the authors' run-log values.",
    f"{RE}: any accuracy or wall time of SAN pairwise / patchwise, ViT and their HA variants.",
    f"{RE}: any inference wall time (only the protocol, 10 warm-up + 300 timed single-image passes, is known "
    "from their code).",
)

#: [Re] run-log accuracy of the hierarchical version of their non-isotropic quadratic 9-head model
#: (quadratic_re_9h_ha), below the model without HA (93.65%); the book names it in the text.
RE_QUADRATIC_9H_HA = _acc(
    "quadratic_re_9h_ha",
    RE,
    0.9282,
    "run-log",
    _S8_LOG.format("g_2021-01-03_09-36_hier_9282"),
    "configs/gaussian.yaml as committed from 2021-01-01 to 01-07 (686aaae, e0850fe, 658b8b6): 9 heads, "
    "hierarchical_weight_sharing: True, attention_isotropic_gaussian: False; the run started at 09:36, before "
    "e0850fe (09:54), so with 686aaae's code",
)
#: The [Re] Gaussian network's run log without HA (93.65%) is attached to Paper A's quadratic row for Table 1,
#: labelled as another network: it is the network of quadratic_re_9h (one run, one reference).
RE_GAUSSIAN_ROW = {"quadratic_re_9h": "quadratic_aniso_9h"}


def references(experiment: str | None = None, source: str | None = None, quantity: str | None = None):
    """The references matching the given fields, in ``REFERENCES`` order."""
    return [
        r
        for r in REFERENCES
        if (experiment is None or r.experiment == experiment)
        and (source is None or r.source == source)
        and (quantity is None or r.quantity == quantity)
    ]


def reference_value(experiment: str, source: str, quantity: str) -> float:
    """The one reference value for (experiment, source, quantity), or NaN when none is known."""
    found = references(experiment, source, quantity)
    return found[0].value if found else math.nan


def logged_gain(base: str, source: str = RE) -> float:
    """HA − model in accuracy points as ``source``'s run logs have them: the difference of the two run-log
    accuracies of ``base`` and ``base + "_ha"`` in ``REFERENCES`` (research notes B.2; kind ``run-log``, so
    a difference of two best test accuracies, one run each); NaN where either is missing. What [Re] §4.4
    words as "at least 5% gain in each case" is to be read beside these."""
    model, ha = (_logged(name, source) for name in (base, base + "_ha"))
    return (ha - model) * 100


def _logged(name: str, source: str) -> float:
    """The run-log accuracy of `name`: its reference, or the [Re] Gaussian network's (RE_GAUSSIAN_ROW,
    RE_QUADRATIC_9H_HA); NaN when none."""
    if source == RE and name == RE_QUADRATIC_9H_HA.experiment:
        return RE_QUADRATIC_9H_HA.value
    return reference_value(RE_GAUSSIAN_ROW.get(name, name) if source == RE else name, source, "test_accuracy")


def best_reference(experiments, source: str, quantity: str) -> Reference | None:
    """The reference with the highest value for (experiment, source, quantity) over ``experiments``, None when
    none of them has one. Experiments without a figure are skipped: ``max`` over ``reference_value``'s NaNs
    would return whatever came first (NaN compares false both ways)."""
    found = [r for name in experiments for r in references(name, source, quantity)]
    return max(found, key=lambda r: r.value) if found else None


@dataclass(frozen=True)
class ProtocolDifference:
    """One way our training protocol differs from the papers' (``protocol_differences.yaml``): what differs,
    ours, theirs, where it applies (``models``: experiment names or ("every",); ``presets``: preset names
    or ("every",)) and where each side was read (``checked``)."""

    what: str
    ours: str
    theirs: str
    models: tuple[str, ...]
    presets: tuple[str, ...]
    checked: str

    def applies(self, experiment: str, preset: str) -> bool:
        """Whether this difference holds for a run of ``experiment`` at ``preset``."""
        return ("every" in self.models or experiment in self.models) and (
            "every" in self.presets or preset in self.presets
        )


#: The selectors of ``protocol_differences.yaml``'s ``models``: a mapping of one of these keys to a list picks every
#: experiment of the registry (claim variants included) whose protocol / model ``encoding`` is in the list
MODEL_SELECTORS = ("protocol", "encoding")


def select_models(spec) -> tuple[str, ...]:
    """The experiments a row's ``models`` names: ``"every"``, a list of experiment names, or one selector
    (``MODEL_SELECTORS``: ``{"protocol": [...]}`` or ``{"encoding": [...]}``) resolved against the registry, in
    registry order, so that an experiment added later with that protocol or encoding is marked too. A
    selector that picks nothing is an error (a misspelt protocol would otherwise mark no model)."""
    from attnlib import experiments
    from attnlib.checks import check

    if isinstance(spec, str):
        return (spec,)
    if not isinstance(spec, dict):
        return tuple(spec)
    check(len(spec) == 1 and set(spec) <= set(MODEL_SELECTORS), "models", spec, f"one of {MODEL_SELECTORS}")
    [(key, values)] = spec.items()
    picked = tuple(
        name
        for name, e in experiments.EXPERIMENTS.items()
        if (e.protocol if key == "protocol" else e.model.get(key)) in values
    )
    check(bool(picked), "models", spec, "a selector that picks at least one experiment")
    return picked


def protocol_differences() -> tuple[ProtocolDifference, ...]:
    """The protocol differences of ``protocol_differences.yaml``, with the long preset's settings filled in
    from ``attnlib.experiments`` (LONG_MAX_LR, LONG_CLIP, LONG_EPOCHS) and each row's ``models`` resolved
    against the registry (``select_models``)."""
    from importlib import resources

    import yaml

    from attnlib import experiments

    values = {
        "long_max_lr": experiments.LONG_MAX_LR,
        "long_clip": experiments.LONG_CLIP,
        "long_epochs": experiments.LONG_EPOCHS,
    }
    text = resources.files("attnlib").joinpath("protocol_differences.yaml").read_text("utf-8")

    def listed(v) -> tuple[str, ...]:
        return (v,) if isinstance(v, str) else tuple(v)

    return tuple(
        ProtocolDifference(
            what=row["what"],
            ours=row["ours"].format(**values),
            theirs=row["theirs"].format(**values),
            models=select_models(row["models"]),
            presets=listed(row["presets"]),
            checked=row["checked"],
        )
        for row in yaml.safe_load(text)
    )


def references_frame():
    """All references as a table (experiment, source, quantity, value, kind, where, note, network)."""
    import pandas as pd

    return pd.DataFrame([r.__dict__ for r in REFERENCES])
