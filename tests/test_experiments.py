"""The registry: names, presets, the published protocol, budget choices, and every experiment training at
the smoke preset into a complete result folder."""

from __future__ import annotations

import dataclasses
import re

import numpy as np
import pytest
import torch

from attnlib import experiments
from attnlib.analysis import plan
from attnlib.analysis.costs import count_parameters
from attnlib.analysis.plan import estimate_seconds, grid_seconds
from attnlib.errors import ConfigError
from attnlib.experiments import (
    EXPERIMENTS,
    PRESET_TABLE,
    PRESETS,
    build_model,
    resolve,
)
from attnlib.lab.run import train_run
from attnlib.results.load import inspect_run, load_run

NAMES = [
    "resnet18",
    "quadratic_iso_9h",
    "quadratic_aniso_9h",
    "quadratic_aniso_16h",
    "learned_9h",
    "learned_16h",
    "learned_content_9h",
    "learned_content_16h",
    "learned_content_9h_ha",
    "learned_content_16h_ha",
    "san_pairwise",
    "san_pairwise_ha",
    "san_patchwise",
    "san_patchwise_ha",
    "vit",
    "vit_ha",
]
VARIANTS = {  # claim variants: out of the grid
    "resnet18_narrow": "resnet18",
    "resnet18_narrow_s2d": "resnet18_narrow",
    "learned_9h_pos_init": "learned_9h",
    "learned_9h_init_re": "learned_9h",
    "learned_content_9h_init_official": "learned_content_9h",
    "learned_content_9h_ha_init_official": "learned_content_9h_ha",
    "quadratic_re_9h": "quadratic_aniso_9h",  # the [Re] Gaussian network and its HA variant (Table 3's pair)
    "quadratic_re_9h_ha": "quadratic_aniso_9h",
}
HA_PAIRS = [(n.removesuffix("_ha"), n) for n in [*NAMES, *VARIANTS] if n.endswith("_ha")]


def test_every_preset_covers_every_protocol_with_a_reason():
    assert sorted(experiments.names()) == sorted(NAMES)
    assert sorted(experiments.names(variants=True)) == sorted([*NAMES, *VARIANTS])
    assert {n: e.variant_of for n, e in EXPERIMENTS.items() if e.variant_of} == VARIANTS
    assert PRESETS == ("paper", "budget", "smoke", "long", "budget30", "tokens16")
    for preset in PRESETS:
        assert set(PRESET_TABLE[preset]) == {e.protocol for e in EXPERIMENTS.values()}
        for p in PRESET_TABLE[preset].values():
            assert p.reason, f"{preset}: every preset states its reasons"


def test_history_file_names_only_known_protocols_and_continues_their_reasons():
    constants = {
        ("budget", "grid"),
        ("long", "clip"),
        ("long", "clip_detail"),
        ("long", "plateau"),
        ("tokens16", "pilot"),
    }
    protocols = {e.protocol for e in EXPERIMENTS.values()}
    entries = experiments._data("protocol_history.yaml")["history"]
    assert entries, "protocol_history.yaml holds the dated history"
    for preset, by_protocol in entries.items():
        for protocol, text in by_protocol.items():
            assert (preset, protocol) in constants or protocol in protocols, (preset, protocol)
            assert text.strip() == text and "\n" not in text and "  " not in text
            if protocol in protocols:
                assert PRESET_TABLE[preset][protocol].reason.endswith(" " + text)
    assert experiments.history("long", "clip") in PRESET_TABLE["long"]["attention"].reason
    assert set(plan.THROUGHPUT["budget"]) == set(EXPERIMENTS)  # a variant: its base's throughput
    assert all(plan.THROUGHPUT["budget"][v] == plan.THROUGHPUT["budget"][b] for v, b in VARIANTS.items())


def test_every_preset_is_said_in_words_with_its_numbers_filled_in():
    assert list(experiments.NOTES) == list(PRESETS)  # presets.yaml's notes
    for text in experiments.NOTES.values():
        assert text.strip() == text and "\n" not in text and "  " not in text and "{" not in text
    assert f"{experiments.LONG_EPOCHS} epochs" in experiments.NOTES["long"]
    assert f"{experiments.GRID_HOURS:g} h" in experiments.NOTES["budget"]


def test_registry_imports_no_training_code():
    import subprocess
    import sys

    code = "import sys, attnlib.experiments; print('attnlib.train' in sys.modules, 'torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["False", "False"]


@pytest.mark.parametrize("base,ha", HA_PAIRS)
@pytest.mark.parametrize("preset", PRESETS)
def test_ha_variant_trains_like_its_baseline(base, ha, preset):
    a, b = resolve(base, preset), resolve(ha, preset)
    assert EXPERIMENTS[ha].baseline == base and EXPERIMENTS[ha].protocol == EXPERIMENTS[base].protocol
    assert a.train == b.train and a.data == b.data
    if b.family == "san_hier":  # SAN + HA is the [Re] hierarchical network, not the per-stage SAN shared
        assert a.family == "san" and a.model["sa_type"] == b.model["sa_type"] and not a.model["hierarchical"]
    else:
        assert {**a.model, "hierarchical": True} == b.model and a.model["hierarchical"] is False


def test_paper_preset_has_the_published_optimisers():
    paper = {n: resolve(n, "paper") for n in NAMES}
    for n in NAMES:
        t = paper[n].train
        assert (t.momentum, t.weight_decay) == (0.9, 1e-4)
        if EXPERIMENTS[n].family == "paper":
            assert (t.lr, t.batch_size, t.epochs, t.schedule, t.warmup) == (0.1, 100, 300, "cosine", 0.05)
            assert t.label_smoothing == 0
    assert paper["resnet18"].train.schedule == "multistep" and paper["resnet18"].train.epochs == 300
    assert paper["san_pairwise"].train.label_smoothing == 0.1 and paper["san_pairwise"].train.lr == 0.1
    assert paper["san_patchwise"].train.lr == 0.01
    assert (paper["vit"].train.epochs, paper["vit"].train.lr) == (100, 0.01)
    assert paper["learned_content_16h"].model["hidden"] == 256  # [Re] 16-head configs


@pytest.mark.parametrize(
    "name,expected",
    [
        ("quadratic_iso_9h", 12_086_844),
        ("learned_9h", 12_278_682),
        ("resnet18", 11.2e6),
    ],
)
def test_paper_parameter_counts(name, expected):
    """The registry maps names to the paper's models: counts of the official code (issue 3), within 1%."""
    assert count_parameters(name, "paper") == pytest.approx(expected, rel=0.01)


@pytest.mark.parametrize(
    "name,expected",
    [
        ("learned_16h", 13_973_802),
        ("learned_content_9h", 28_478_682),
        ("learned_content_9h_ha", 4_754_122),
        ("learned_content_16h", 26_459_754),
        ("learned_content_16h_ha", 4_414_874),
        ("san_pairwise_ha", 352_750),
        ("san_patchwise_ha", 356_282),
    ],
)
def test_re_models_have_the_re_parameter_counts(name, expected):
    """The experiments compared with [Re] logs are the [Re] networks: at the paper preset their parameter
    counts equal those of the [Re] code instantiated at its configs (learned2d_*.yaml, san_*_hier.yaml;
    derivations in the research notes, B.2)."""
    assert count_parameters(name, "paper") == expected


@pytest.mark.parametrize("name,re_count", [("vit", 37_394_506), ("vit_ha", 6_531_946)])
def test_vit_parameter_count_equals_re_and_the_intended_form_differs_by_two_known_vectors(name, re_count):
    """[Re] ViT/models/networks.py at vit(_hier).yaml: 37,394,506 / 6,531,946, the registry's [Re] form
    (issue 30). The intended form has a final LayerNorm (2 x 400) that theirs lacks, and lacks the
    position-embedding row of their per-call noise "cls" slot (1 x 400): 400 more in each."""
    from attnlib.experiments import resolve
    from attnlib.models import make

    with torch.device("meta"):
        model = build_model(name, "paper")
        fields = {**resolve(name, "paper").model, "residual": "prenorm", "final_norm": True, "pool": "tokens"}
        intended = make("vit", **fields)
    ours = sum(p.numel() for p in model.parameters())
    assert ours == re_count and model.pos_embed.num_embeddings == 16 * 16 + 1
    final_norm = sum(p.numel() for p in intended.norm.parameters())
    assert final_norm == 2 * 400 and intended.pos_embed.num_embeddings == 16 * 16
    assert sum(p.numel() for p in intended.parameters()) - final_norm + 400 == re_count


def test_unknown_names_list_allowed_values():
    with pytest.raises(
        ConfigError,
        match="experiment: got 'resnet50'; allowed: resnet18, resnet18_narrow, resnet18_narrow_s2d, quadratic_iso_9h",
    ):
        build_model("resnet50")
    with pytest.raises(ConfigError, match="preset: got 'fast'; allowed: paper, budget, smoke"):
        build_model("vit", "fast")


def test_build_model_follows_the_preset():
    torch.manual_seed(0)
    small = build_model("learned_content_9h_ha", "smoke")
    assert small.cfg.hidden == 16 and small.cfg.hierarchical and small.cfg.heads == 9
    assert resolve("vit", "budget", epochs=7).train.epochs == 7


def test_budget_grid_fits_its_ceiling(monkeypatch):
    est = {n: estimate_seconds(n, "budget") for n in NAMES}
    assert all(v is not None for v in est.values()), "every budget run has a measured throughput"
    assert grid_seconds(list(est.values())) <= experiments.GRID_HOURS * 3600
    assert grid_seconds([3.0, 1.0, 1.0]) == 3.0 and grid_seconds([2.0, 2.0, 2.0, 2.0]) == 4.0
    monkeypatch.setitem(plan.THROUGHPUT["budget"], "vit", (100.0, 1000.0))
    epochs = experiments.preset_for("vit", "budget").train.epochs
    assert estimate_seconds("vit", "budget") == pytest.approx(epochs * (500 + 10) + plan.RUN_OVERHEAD_S)
    assert estimate_seconds("vit", "paper") is None  # no throughput measured at the paper's sizes


def test_budget_configs_serialise_to_dicts():
    for n in NAMES:
        d = resolve(n, "budget").to_dict()
        assert d["train"]["epochs"] >= 1 and isinstance(d["model"], dict)
        assert dataclasses.is_dataclass(resolve(n, "budget").train)


@pytest.fixture(scope="module")
def smoke_results(tmp_path_factory):
    return tmp_path_factory.mktemp("smoke")


@pytest.mark.parametrize("name", [*NAMES, *VARIANTS])
def test_every_experiment_trains_at_smoke(name, smoke_results):
    res = train_run(name, "smoke", results_dir=smoke_results, progress=False)
    assert inspect_run(res.path)[0] == "complete"
    again = load_run(res.path)
    assert len(again.history) == 1 and 0 <= again.test_accuracy <= 1
    assert np.isfinite(again.history[["train_loss", "test_loss"]].to_numpy()).all()
    family = EXPERIMENTS[name].family
    att = again.attention
    if family in ("paper", "vit"):
        layers = resolve(name, "smoke").model["layers"]
        assert att["rows"].shape[:2] == (2, layers) and att["offset_mean"].shape[0] == layers
    elif family in ("san", "san_hier"):
        assert any(k.endswith("_weights") for k in att)
    else:
        assert att == {}  # ResNet has no attention
    quadratic = name.startswith("quadratic")
    assert (again.centers is not None) == quadratic
    if quadratic:
        model = resolve(name, "smoke").model
        blocks = 1 if model["hierarchical"] else model["layers"]  # HA: one shared block
        heads = model["heads"]
        assert again.centers["centers"].shape == (2, blocks, heads, 2)
        assert again.centers["inverse_covariance"].shape == (2, blocks, heads, 2, 2)


def test_long_preset_is_the_budget_for_a_fixed_number_of_epochs_with_measures():
    import dataclasses

    from attnlib.config import TrainConfig
    from attnlib.experiments import LONG_CLIP, LONG_EPOCHS, LONG_MAX_LR

    # no setting of the protocol stops a run early: TrainConfig has no stopping rule at all
    assert not {f.name for f in dataclasses.fields(TrainConfig)} & {"plateau", "plateau_lr", "patience"}
    for name in EXPERIMENTS:
        budget, long = resolve(name, "budget"), resolve(name, "long")
        assert long.model == budget.model  # the same networks
        assert long.train == dataclasses.replace(
            budget.train,
            epochs=LONG_EPOCHS,
            lr=min(budget.train.lr, LONG_MAX_LR),
            grad_clip=budget.train.grad_clip or LONG_CLIP,
        )
        assert long.train.epochs == 60 and long.train.lr <= 0.05 and long.train.grad_clip == 1.0
        assert long.probe_images > 0 and budget.probe_images == 0
        assert "probe_images" in long.to_dict() and "probe_images" not in budget.to_dict()
        assert not {"plateau", "plateau_lr"} & set(long.to_dict()["train"])
        # the reason says what the preset is, and the history why the plateau rule went
        assert experiments.history("long", "plateau") in long.reason and "fixed 60 epochs" in long.reason
        assert "read the test set" in experiments.history("long", "plateau")


@pytest.mark.parametrize("preset", PRESETS)
def test_positional_init_variant_changes_only_the_positional_init(preset):
    from attnlib.attention import Learned2DEncoding

    base, variant = resolve("learned_9h", preset), resolve("learned_9h_pos_init", preset)
    assert variant.train == base.train and variant.model == {
        **base.model,
        "positional_std": experiments.POSITIONAL_STD,
    }
    assert count_parameters("learned_9h", preset) == count_parameters("learned_9h_pos_init", preset)
    torch.manual_seed(0)
    model = build_model("learned_9h_pos_init", preset)
    encodings = [m for m in model.modules() if isinstance(m, Learned2DEncoding)]
    assert encodings
    for enc in encodings:
        for module in (enc.row_embeddings, enc.col_embeddings, enc.head_keys_row, enc.head_keys_col):
            assert abs(module.weight.std().item() / experiments.POSITIONAL_STD - 1) < 0.15
    # everything else keeps the paper's N(0, 0.02)
    assert abs(model.embed.weight.std().item() / 0.02 - 1) < 0.15


def test_positional_std_is_checked():
    from attnlib.models import make

    for bad in (0, -1.0, "1", True):
        with pytest.raises(ConfigError, match="positional_std"):
            make("paper", encoding="learned", positional_std=bad)
    with pytest.raises(ConfigError, match="positional_std.*only the learned"):
        make("paper", encoding="quadratic_iso", positional_std=0.2)


# What a reader of the book must not meet in the library's strings that the book prints (issue 31): pointers to
# notes or issues the reader does not have, the registry's code names and constants, machine-made plurals.
_JARGON = re.compile(
    r"Paper A|research notes|\bissue \d|\b[A-Z]{2,}_[A-Z_]+\b|40% bar|revisited|thread\(s\)|this machine"
)


def _registry_ids(text: str) -> list[str]:
    """Registry names used as words in `text` (a [Re] file name such as "san_pairwise.yaml" or a library's own
    function such as "torchvision's resnet18" is not one)."""
    names = "|".join(sorted(map(re.escape, EXPERIMENTS), key=len, reverse=True))
    return re.findall(rf"(?<![\w./'-])(?:{names})(?![\w.])", text.replace("torchvision's resnet18", ""))


def test_strings_the_book_prints_carry_no_jargon():
    from attnlib.analysis import literature
    from attnlib.analysis.claims import CLAIMS
    from attnlib.models.quirks import QUIRKS

    shown = [(preset, PRESET_TABLE[preset]) for preset in ("paper", "budget")]  # appendix A's tables
    texts = {f"{preset} {protocol}": p.reason for preset, table in shown for protocol, p in table.items()}
    refs = (*literature.REFERENCES, literature.RE_QUADRATIC_9H_HA)
    texts |= {f"reference {i}": f"{r.where} {r.note}" for i, r in enumerate(refs)}
    texts |= {f"quirk {q.name}": f"{q.re_code} {q.intended}" for q in QUIRKS}
    differences = literature.protocol_differences()
    texts |= {f"difference {d.what}": f"{d.ours} {d.theirs} {d.checked}" for d in differences}
    texts |= {f"claim {c.key}": f"{c.words} {c.measure} {c.rule}" for c in CLAIMS}
    found = {k: (_JARGON.findall(t), _registry_ids(t)) for k, t in texts.items()}
    assert {k: v for k, v in found.items() if v != ([], [])} == {}
    # the checks can fail: each catches what it is for
    caught = _JARGON.findall("at 4 epochs (GRID_HOURS, the 40% bar, 1 thread(s))")
    assert caught == ["GRID_HOURS", "40% bar", "thread(s)"]
    assert _registry_ids("vit_ha had 33.8%; [Re] san_pairwise.yaml, torchvision's resnet18") == ["vit_ha"]
