"""Model registry, parameter counts against the official code, the model contract, and training."""

import dataclasses
import json

import pytest
import torch
import torch.nn.functional as F

from attnlib.errors import ConfigError
from attnlib.models import FAMILIES, make, make_config
from attnlib.models.paper import AttentionClassifier, PaperConfig
from attnlib.models.vit import ViT, ViTConfig


def _count(model) -> int:
    return sum(p.numel() for p in model.parameters())


def _meta_count(family, **cfg) -> int:
    with torch.device("meta"):  # shapes only: counting the full-size models costs nothing
        return _count(make(family, **cfg))


# official code (papers.md A.3): derived from epfml/attention-cnn at the run-script settings
@pytest.mark.parametrize(
    "cfg, expected",
    [
        (dict(encoding="quadratic_iso"), 12_086_844),
        (dict(encoding="quadratic_aniso"), 12_087_006),
        (dict(encoding="learned"), 12_278_682),
        (dict(encoding="learned", content=True), 29_601_882),
    ],
)
def test_paper_parameter_counts_equal_official_code(cfg, expected):
    assert _meta_count("paper", **cfg) == expected


def test_resnet18_parameter_count():
    assert _meta_count("resnet") == 11_173_962


def test_vit_parameter_count_by_layer_arithmetic():
    d, m, h, c = 400, 512, 9, 10
    stem = 3 * 64 * 9 + 2 * 64 + 2 * (2 * (64 * 64 * 9 + 2 * 64))  # conv + BN + ResNet18 stage 1
    embed = 64 * 4 * d + d + 256 * d  # patch Linear(64·2², D) + position table (16·16, D)
    block = 2 * 2 * d + 3 * d * h * d + (h * d * d + d) + (d * m + m) + (m * d + d)
    head = 2 * d + d * c + c  # final LN + classifier
    assert _meta_count("vit") == stem + embed + 6 * block + head
    assert _meta_count("vit", hierarchical=True) == stem + embed + block + head


@pytest.mark.parametrize("family, cfg", [("paper", dict(encoding="learned", content=True)), ("vit", {})])
def test_hierarchical_parameter_count_does_not_depend_on_layers(family, cfg):
    counts = {n: _meta_count(family, layers=n, hierarchical=True, **cfg) for n in (2, 6)}
    assert counts[2] == counts[6] < _meta_count(family, layers=2, **cfg)


# ----------------------------------------------------------------------------------------- registry


def test_registry_and_make():
    assert set(FAMILIES) == {"paper", "resnet", "vit", "san", "san_hier"}  # listing does not import SAN
    assert FAMILIES["paper"] == (PaperConfig, AttentionClassifier)
    assert FAMILIES["vit"] == (ViTConfig, ViT)
    with pytest.raises(ConfigError, match="family"):
        make("transformer")
    with pytest.raises(ConfigError) as err:
        make("paper", heads_count=9)
    assert err.value.parameter == "paper.heads_count"
    with pytest.raises(ConfigError, match="encoding"):
        make("paper", encoding="sinusoid")
    with pytest.raises(ConfigError, match="dropout"):
        make("vit", dropout=1.5)
    with pytest.raises(ConfigError, match="patch"):
        make("vit", patch=3)
    with pytest.raises(ConfigError, match="blocks"):
        make("resnet", blocks=(2, 0))


@pytest.mark.parametrize("family", ["paper", "resnet", "vit"])
def test_configs_serialise(family):
    cfg = make_config(family)
    assert type(cfg)(**json.loads(json.dumps(dataclasses.asdict(cfg)))) == cfg


# ----------------------------------------------------------------------------------------- contract

SMALL = dict(layers=2, hidden=16, mlp=24, heads=4)
SMALL_VIT = dict(SMALL, image_size=8, stem="none")
VARIANTS = {
    "quadratic_iso": ("paper", dict(SMALL)),
    "quadratic_aniso": ("paper", dict(SMALL, encoding="quadratic_aniso")),
    "learned": ("paper", dict(SMALL, encoding="learned", max_pos=4)),
    "learned+content": ("paper", dict(SMALL, encoding="learned", max_pos=4, content=True)),
    "learned+content HA": (
        "paper",
        dict(SMALL, encoding="learned", max_pos=4, content=True, hierarchical=True),
    ),
    "quadratic HA": ("paper", dict(SMALL, hierarchical=True)),
    "vit": ("vit", dict(SMALL_VIT)),
    "vit HA": ("vit", dict(SMALL_VIT, hierarchical=True)),
}


@pytest.mark.parametrize("name", sorted(VARIANTS))
def test_model_contract_logits_and_attention_maps(name):
    torch.manual_seed(0)
    family, cfg = VARIANTS[name]
    model = make(family, **cfg).eval().double()  # float64: the two paths agree as math, not by luck
    x = torch.randn(3, 3, 8, 8, dtype=torch.float64)
    logits = model(x)
    logits2, maps = model(x, return_attention=True)
    assert logits.shape == (3, 10)
    torch.testing.assert_close(logits, logits2, atol=1e-12, rtol=1e-10)  # SDPA path == explicit path
    assert len(maps) == 2
    for m in maps:
        assert m.shape == (3, 4, 16, 16)  # 8x8 image -> 4x4 grid after 2x2 down-sampling / patches
        torch.testing.assert_close(m.sum(-1), torch.ones(3, 4, 16, dtype=m.dtype))


def test_vit_full_size_forward_with_resnet_stem():
    model = make("vit", layers=1, heads=2, hidden=16, mlp=16).eval()
    logits, maps = model(torch.randn(1, 3, 32, 32), return_attention=True)
    assert logits.shape == (1, 10) and maps[0].shape == (1, 2, 256, 256)
    with pytest.raises(ConfigError, match="image_size"):
        model(torch.randn(1, 3, 16, 16))


def test_resnet_small_forward():
    model = make("resnet", width=4, blocks=(1, 1)).eval()
    logits, maps = model(torch.randn(2, 3, 8, 8), return_attention=True)
    assert logits.shape == (2, 10) and maps == []


def test_paper_init_matches_official():
    torch.manual_seed(0)
    model = make("paper", **SMALL)
    lin = model.encoder.blocks[0].attn.out
    assert lin.bias.abs().sum() == 0 and 0.015 < lin.weight.std() < 0.025
    assert model.encoder.blocks[0].norm1.eps == 1e-12
    enc = model.encoder.blocks[0].attn.encoding
    assert 1.0 < enc.centers.std() < 3.5 and (enc.spreads - 1).abs().max() < 0.05


# ----------------------------------------------------------------------------------------- training


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(VARIANTS))
def test_a_few_sgd_steps_reduce_the_loss(name):
    torch.manual_seed(0)
    family, cfg = VARIANTS[name]
    model = make(family, **cfg)
    x, y = torch.randn(16, 3, 8, 8), torch.arange(16) % 10

    def loss():
        model.eval()
        with torch.no_grad():
            return F.cross_entropy(model(x), y).item()

    before = loss()
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    model.train()
    for _ in range(25):
        opt.zero_grad()
        F.cross_entropy(model(x), y).backward()
        opt.step()
    assert loss() < 0.75 * before


def test_re_block_is_the_re_code_block():
    """block="re": no BertSelfOutput Linear, q/k/v without biases, head keys with biases, ReLU MLP, LayerNorm
    eps 1e-5; value="standard": the [Re] 16-head value projection Linear(D, heads·D) without bias."""
    model = make("paper", layers=1, hidden=8, mlp=12, heads=2, encoding="learned", content=True,
                 block="re", learned_form="re", value="standard")  # fmt: skip
    block = model.encoder.blocks[0]
    attn = block.attn
    assert isinstance(block.attn_dense, torch.nn.Identity) and isinstance(block.mlp[1], torch.nn.ReLU)
    assert block.norm1.eps == block.norm2.eps == 1e-5
    assert attn.query.bias is None and attn.key.bias is None and attn.value.bias is None
    assert attn.value.weight.shape == (2 * 8, 8) and attn.out.weight.shape == (8, 2 * 8)
    assert (
        attn.encoding.form == "re"
        and attn.encoding.pos_dim == 4
        and not hasattr(attn.encoding, "head_keys_row")
    )
    positional = make("paper", layers=1, hidden=8, mlp=12, heads=2, encoding="learned", block="re")
    assert positional.encoder.blocks[0].attn.encoding.head_keys_row.bias is not None
    official = make("paper", layers=1, hidden=8, mlp=12, heads=2, encoding="learned", content=True)
    assert official.encoder.blocks[0].attn.encoding.form == "attnlib"  # the default: unchanged models
    assert isinstance(official.encoder.blocks[0].mlp[1], torch.nn.GELU)
    for kwargs, parameter in [
        (dict(block="bert"), "block"),
        (dict(learned_form="xl"), "learned_form"),
        (dict(value="none"), "value"),
        (dict(learned_form="re"), "content"),  # the [Re] form scores with the queries
        (dict(learned_form="re", content=True, hidden=7), "hidden"),
    ]:
        with pytest.raises(ConfigError) as err:
            make("paper", encoding="learned", **kwargs)
        assert err.value.parameter == parameter


def test_resnet_on_the_attention_models_tokens():
    """resnet18_narrow_s2d sees the attention models' 8x8 grid (48 channels) at budget; ResNet runs saved
    before the field existed (all at the 32x32 image) still match their configuration."""
    import torch.nn.functional as F

    from attnlib.experiments import build_model
    from attnlib.models import FAMILIES, resolved_difference
    from attnlib.models.resnet import ResNetConfig

    torch.manual_seed(0)
    model = build_model("resnet18_narrow_s2d", "budget")
    seen = []
    model.stages[0].register_forward_hook(lambda m, i, o: seen.append(tuple(i[0].shape)))
    x = torch.randn(2, 3, 32, 32)
    out = model(x)
    assert out.shape == (2, 10) and seen == [(2, 9, 8, 8)]
    assert model.stem[0].in_channels == 48
    # the same network fed the rearranged image by hand
    manual = model.fc(model.stages(model.stem(F.pixel_unshuffle(x, 4))).mean(dim=(2, 3)))
    torch.testing.assert_close(out, manual)
    with pytest.raises(ConfigError, match="downsample"):
        make("resnet", downsample=3)(x)
    saved = {"width": 9, "blocks": [2, 2, 2, 2], "num_classes": 10}  # a config.json of before the field
    now = {**saved, "downsample": 1}
    assert resolved_difference(saved, now, ResNetConfig) == []
    assert resolved_difference(saved, {**now, "downsample": 4}, FAMILIES["resnet"][0]) == [
        "downsample: 1 saved, 4 now"
    ]
