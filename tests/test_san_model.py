"""SAN pairwise / patchwise and their Hierarchical Attention variants (attnlib.san.model), on the CPU."""

import json
from dataclasses import asdict, replace

import pytest
import torch
import torch.nn.functional as F

from attnlib.errors import ConfigError
from attnlib.san import SAN, SANConfig

# Narrow widths for speed: relation channels 2, SA channels 4, Cw = 2 aggregation weight groups.
TINY = SANConfig(widths=(16, 16, 32, 32), stem_width=8, rel_reduction=8, share_planes=2)
VARIANTS = [
    replace(TINY, sa_type=t, hierarchical=h) for t in ("pairwise", "patchwise") for h in (False, True)
]
IDS = [f"{c.sa_type}{'-HA' if c.hierarchical else ''}" for c in VARIANTS]


def n_params(model):
    return sum(p.numel() for p in model.parameters())


@pytest.mark.parametrize("cfg", VARIANTS, ids=IDS)
def test_forward_shapes_and_attention_maps(cfg):
    torch.manual_seed(0)
    model = SAN(cfg)
    x = torch.randn(3, 3, 32, 32)
    assert model(x).shape == (3, 10)
    logits, maps = model(x, return_attention=True)
    assert logits.shape == (3, 10)
    assert len(maps) == sum(cfg.layers)  # one per SA application, HA included
    shapes = [
        (3, w // 4 // 2, 9, 16 >> s, 16 >> s)
        for s, (w, n) in enumerate(zip(cfg.widths, cfg.layers, strict=True))
        for _ in range(n)
    ]
    assert [tuple(m.shape) for m in maps] == shapes
    if cfg.sa_type == "pairwise":  # softmax over the K·K window
        for m in maps:
            assert (m >= 0).all()
            torch.testing.assert_close(m.sum(2), torch.ones_like(m.sum(2)))


def test_patchwise_weights_are_unnormalised_unless_asked():
    x = torch.randn(2, 3, 32, 32)
    _, maps = SAN(replace(TINY, sa_type="patchwise")).eval()(x, return_attention=True)
    assert not torch.allclose(maps[0].sum(2), torch.ones(()))  # official SAN: no softmax in patchwise
    _, maps = SAN(replace(TINY, sa_type="patchwise", patchwise_softmax=True)).eval()(x, return_attention=True)
    for m in maps:
        torch.testing.assert_close(m.sum(2), torch.ones_like(m.sum(2)))


@pytest.mark.parametrize("sa_type", ["pairwise", "patchwise"])
def test_hierarchical_shares_blocks_and_keeps_keys(sa_type):
    one, three = (replace(TINY, sa_type=sa_type, layers=(n,) * 4) for n in (1, 3))
    normal = [n_params(SAN(c)) for c in (one, three)]
    ha = [n_params(SAN(replace(c, hierarchical=True))) for c in (one, three)]
    assert ha[0] == ha[1] == normal[0]  # independent of repeats: one block per stage
    assert ha[1] < normal[1]

    # Keys ψ(x) are computed once per stage (from its first input), queries and values at every application.
    model = SAN(replace(three, hierarchical=True))
    calls = {"key": 0, "query": 0}
    for stage in model.stages:
        attention = stage.blocks[0].attention
        for name in calls:
            getattr(attention, name).register_forward_hook(
                lambda *_, name=name: calls.__setitem__(name, calls[name] + 1)
            )
    model(torch.randn(2, 3, 32, 32))
    assert calls == {"key": 4, "query": 12}


def test_parameter_counts_match_the_re_code():
    """Equal to the [Re] authors' SAN/models/san_networks.Encoder for the non-hierarchical runs (module-by-module
    replica of that code: 1x1 stem 3->64, stages 64/256/512/1024 of 2 bottlenecks, K = 3)."""
    assert n_params(SAN(SANConfig(sa_type="pairwise"))) == 2_446_318
    assert n_params(SAN(SANConfig(sa_type="patchwise"))) == 2_512_654


@pytest.mark.parametrize("cfg", VARIANTS, ids=IDS)
def test_a_few_sgd_steps_reduce_the_loss(cfg):
    torch.manual_seed(0)
    model = SAN(cfg)
    x, y = torch.randn(8, 3, 32, 32), torch.randint(0, 10, (8,))  # one fixed synthetic batch
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    losses = []
    for _ in range(10):
        loss = F.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    assert all(torch.isfinite(torch.tensor(losses)))
    assert min(losses[-3:]) < 0.85 * losses[0], losses


def test_config_roundtrip_and_errors():
    cfg = replace(TINY, sa_type="patchwise", hierarchical=True)
    assert SANConfig(**json.loads(json.dumps(asdict(cfg)))) == cfg  # lists from JSON become tuples
    for kwargs, parameter in [
        (dict(sa_type="dot"), "sa_type"),
        (dict(kernels=(3, 4, 3, 3)), "kernels"),
        (dict(layers=(2, 2, 2)), "layers/kernels/widths"),
        (dict(layers=(2, 0, 2, 2)), "layers"),
        (dict(widths=(16, 16, 32, 36)), "widths"),
        (dict(share_planes=0), "share_planes"),
    ]:
        with pytest.raises(ConfigError) as info:
            replace(TINY, **kwargs)
        assert info.value.parameter == parameter and "allowed" in str(info.value)
