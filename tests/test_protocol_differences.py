"""The book's table of protocol differences (attnlib/protocol_differences.yaml) says what the registry and the
data pipeline do: each row checked against the code it describes, and every model it names exists."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from attnlib import data, experiments
from attnlib.analysis.literature import protocol_differences, select_models
from attnlib.errors import ConfigError

REPOSITORY = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def rows():
    return {d.what: d for d in protocol_differences()}


def test_every_row_names_registry_models_and_presets(rows):
    assert len(rows) >= 7
    known = set(experiments.names(variants=True))
    for d in rows.values():
        assert d.ours and d.theirs and d.checked and "{" not in d.ours + d.theirs  # placeholders filled
        assert d.models == ("every",) or set(d.models) <= known, d.models
        assert d.presets == ("every",) or set(d.presets) <= set(experiments.PRESETS), d.presets


def test_long_runs_cap_the_lr_and_clip_every_model(rows):
    d = rows["learning rate and gradient clipping of the long runs"]
    assert f"lr at most {experiments.LONG_MAX_LR}" in d.ours and d.applies("vit", "long")
    assert not d.applies("vit", "budget")
    for name in experiments.names():
        train = experiments.preset_for(name, "long").train
        assert train.lr <= experiments.LONG_MAX_LR and train.grad_clip == experiments.LONG_CLIP, name
    assert (
        max(experiments.preset_for(n, "budget").train.lr for n in experiments.names())
        > experiments.LONG_MAX_LR
    )


def test_the_models_of_cordonnier_et_al_s_protocols_train_without_nesterov_and_warm_up_per_step(rows):
    """The row covers every model that trains without Nesterov (the [Re] code's main/ models all had it):
    the quadratic, learned-2D (the [Re] networks among them) and ResNet18 protocols, claim variants included."""
    d = rows["momentum and warm-up of the quadratic, learned-2D and ResNet18 networks"]
    named = {"quadratic_re_9h", "quadratic_re_9h_ha", "learned_content_16h_ha", "resnet18_narrow"}
    assert named <= set(d.models)
    for name in experiments.EXPERIMENTS:
        for preset in ("paper", "budget", "long"):
            train = experiments.preset_for(name, preset).train
            # ours: no Nesterov, a warm-up per step (a share of the steps; none for ResNet18's step schedule)
            assert (train.nesterov is False) == (name in d.models), (name, preset)
            if name in d.models:
                per_step = (train.warmup > 0) == (train.schedule == "cosine")
                assert 0 <= train.warmup < 1 and per_step, (name, preset)
    # the [Re] networks of SAN and ViT keep their Nesterov momentum: not in this row
    assert experiments.preset_for("vit", "budget").train.nesterov and "vit" not in d.models
    content = experiments.preset_for("learned_content_9h", "long").train
    assert content.warmup == 1 / 12 and f"5 of {experiments.LONG_EPOCHS}" in d.ours


def test_every_model_is_cropped_and_flipped(rows):
    """One augmentation for every model: random crop with PAD-pixel zero padding, then a flip (the SAN and
    ResNet18 rows say so against [Re]'s flip only / rotation and colour jitter)."""
    import torch

    assert data.PAD == 4 and "4-pixel zero padding" in rows["data augmentation of SAN"].ours
    x = torch.arange(2 * 1 * 4 * 4, dtype=torch.uint8).reshape(2, 1, 4, 4)
    out = data.crop_flip(
        x, torch.tensor([[data.PAD, data.PAD], [data.PAD, data.PAD + 1]]), torch.tensor([True, False])
    )
    assert torch.equal(out[0], x[0].flip(-1))  # no shift, flipped
    assert torch.equal(out[1, :, :, :3], x[1, :, :, 1:]) and out[1, :, :, 3].eq(0).all()  # shifted, zero pad


def test_quadratic_centres_spread_twice_the_papers_relative_to_the_image(rows):
    d = rows["initial spread of the quadratic centres"]
    torch = pytest.importorskip("torch")
    from attnlib.attention.encodings import QuadraticEncoding

    # the row marks every experiment whose model has quadratic encodings ([Re] code's pair included)
    with torch.device("meta"):
        quadratic = {
            n
            for n in experiments.EXPERIMENTS
            if any(isinstance(m, QuadraticEncoding) for m in experiments.build_model(n, "budget").modules())
        }
    assert set(d.models) == quadratic and {"quadratic_re_9h", "quadratic_re_9h_ha"} <= quadratic
    for name in d.models:
        budget, paper = (
            experiments.preset_for(name, p).model.get("downsample", 2) for p in ("budget", "paper")
        )
        assert budget == 2 * paper == 4, name
        model = experiments.build_model(name, "budget")
        encodings = [m for m in model.modules() if hasattr(m, "centers")]
        assert encodings and all(isinstance(m.centers, torch.nn.Parameter) for m in encodings)
    import inspect

    std = inspect.signature(QuadraticEncoding).parameters["center_std"].default  # key positions
    assert std == 2.0
    # one key position spans `downsample` input pixels: sigma in input px = std x downsample
    assert f"σ = {std * budget:g} input px" in d.ours and "8 × 8" in d.ours
    assert f"σ = {std * paper:g} input px" in d.theirs and "16 × 16" in d.theirs


def test_no_run_stops_on_the_test_set(rows):
    """Every preset trains a fixed number of epochs; the former "converge" preset, whose plateau stop read
    the test set, is gone from the registry, so its one run left on disk cannot be read as a result."""
    from attnlib.config import TrainConfig
    from attnlib.results.load import read

    d = rows["stopping on the test set"]
    assert d.models == d.presets == ("every",) and f"a fixed {experiments.LONG_EPOCHS}" in d.ours
    assert '"converge" preset' in d.ours and "best test accuracy" in d.theirs
    assert "converge" not in experiments.PRESETS and "plateau" not in TrainConfig.__dataclass_fields__
    with pytest.raises(ConfigError):
        read("resnet18", "converge", results_dir=REPOSITORY / "results")
    long_epochs = {experiments.preset_for(n, "long").train.epochs for n in experiments.EXPERIMENTS}
    assert long_epochs == {experiments.LONG_EPOCHS}


def test_bf16_autocast_at_the_presets_the_row_names(rows):
    """Autocast where the hardware has fast bf16 (TrainConfig.bf16 None) at exactly the presets marked; the
    smoke preset trains in float32."""
    d = rows["numeric precision"]
    for preset in experiments.PRESETS:
        settings = {p.train.bf16 for p in experiments.PRESET_TABLE[preset].values()}
        assert settings == ({None} if preset in d.presets else {False}), preset


def test_model_selectors_follow_the_registry():
    by_protocol = select_models({"protocol": ["resnet"]})
    assert by_protocol == tuple(n for n, e in experiments.EXPERIMENTS.items() if e.protocol == "resnet")
    assert select_models("every") == ("every",) and select_models(["vit"]) == ("vit",)
    for bad in ({"protocol": ["no_such_protocol"]}, {"family": ["paper"]}, {"protocol": [], "encoding": []}):
        with pytest.raises(ConfigError):
            select_models(bad)


# our side of `checked`: a file of this repository, then optionally the names it defines, "(name, name)"
_OURS = re.compile(r"(?<![\w./-])((?:attnlib|book|tests)/[\w/.-]+\.(?:py|yaml))(?: \(([^)]*)\))?")


def _top_names(body) -> set[str]:
    names = set()
    for node in body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(node.name)
        elif isinstance(node, ast.Assign | ast.AnnAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names |= {n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)}
    return names


def _defines(path: Path, name: str) -> bool:
    """Whether `path` defines `name`: a top-level function, class or assignment of a Python file (or
    "Class.method"), a key path ("a.b.c") of a YAML file."""
    if path.suffix == ".yaml":
        import yaml

        node = yaml.safe_load(path.read_text("utf-8"))
        for key in name.split("."):
            if not isinstance(node, dict) or key not in node:
                return False
            node = node[key]
        return True
    body = ast.parse(path.read_text("utf-8")).body
    *classes, last = name.split(".")
    for part in classes:
        found = [n for n in body if isinstance(n, ast.ClassDef) and n.name == part]
        if not found:
            return False
        body = found[0].body
    return last in _top_names(body)


def checked_problems(checked: str) -> list[str]:
    """What is wrong with our side of a row's `checked`: a file that does not exist, a parenthesised item that is
    not a name, a name the file does not define, or no file of ours at all."""
    found = _OURS.findall(checked)
    problems = [] if found else [f"names no file of this repository: {checked!r}"]
    for rel, names in found:
        path = REPOSITORY / rel
        if not path.is_file():
            problems.append(f"{rel} does not exist")
            continue
        for name in filter(None, (n.strip() for n in names.split(","))):
            if not re.fullmatch(r"[A-Za-z_]\w*(\.[A-Za-z_]\w*)*", name):
                problems.append(f"{rel} ({name}): not a name")
            elif not _defines(path, name):
                problems.append(f"{rel} does not define {name}")
    return problems


def test_every_path_and_name_of_ours_that_a_row_was_checked_in_exists(rows):
    assert {d.what: checked_problems(d.checked) for d in rows.values()} == {d: [] for d in rows}
    # the check catches what it is for: the module layout and names before attnlib.train and attnlib.data
    # became packages and the long preset's settings moved to _longer
    stale = (
        "attnlib/train.py (fast_bf16); attnlib/data.py (Batches); attnlib/experiments.py (_long_presets), "
        "attnlib/experiments.py (the learned protocols), attnlib/data/batches.py (Batches.no_such), "
        "attnlib/protocol_history.yaml (history.long.no_such)"
    )
    assert checked_problems(stale) == [
        "attnlib/train.py does not exist",
        "attnlib/data.py does not exist",
        "attnlib/experiments.py does not define _long_presets",
        "attnlib/experiments.py (the learned protocols): not a name",
        "attnlib/data/batches.py does not define Batches.no_such",
        "attnlib/protocol_history.yaml does not define history.long.no_such",
    ]
    assert checked_problems("[Re] main/configs/resnet.yaml (train_transform)") == [
        "names no file of this repository: '[Re] main/configs/resnet.yaml (train_transform)'"
    ]
