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


def _fit_batch(model, x, y, steps: int = 10) -> list[float]:
    """Training losses of `steps` SGD steps (lr 0.05, momentum 0.9) on one fixed batch."""
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    losses = []
    for _ in range(steps):
        loss = F.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses


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
    losses = _fit_batch(model, x, y)
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


# ------------------------------------------------------------------ the [Re] hierarchical SAN (SAN + HA)
from attnlib.san.hierarchical import HierarchicalSAN, HierarchicalSANConfig  # noqa: E402

HIER_TINY = HierarchicalSANConfig(width=16, rel_reduction=8, share_planes=2)  # φ, ψ: 2 channels, Cw = 2


def test_hierarchical_parameter_counts_equal_the_re_code():
    """[Re] SAN/models/networks.py Encoder, sa_type pair_hier / patch_hier, layers [2,2,2,2], kernels [3,3,3,3]:
    the modules its hierarchical forward uses (conv_in, bn_in, enc_layer, conv0..3, bn0..3, fc), counted by
    instantiating their code. (That Encoder also builds layer0..layer3, which this forward never calls:
    691,582 / 709,242 parameters in all.)"""
    with torch.device("meta"):
        pair, patch = (HierarchicalSAN(HierarchicalSANConfig(sa_type=t)) for t in ("pairwise", "patchwise"))
    assert n_params(pair) == 352_750
    assert n_params(patch) == 356_282


@pytest.mark.parametrize("sa_type", ["pairwise", "patchwise"])
def test_hierarchical_san_keys_come_once_from_one_layer_for_all_eight_applications(sa_type):
    """One forward: the first bottleneck's ψ runs once (on its first input), the second bottleneck's ψ never;
    all 2 x 4 = 8 attention applications use that one key tensor; φ and β run at every application."""
    torch.manual_seed(0)
    model = HierarchicalSAN(replace(HIER_TINY, sa_type=sa_type)).eval()
    calls = {(b, name): 0 for b in range(2) for name in ("key", "query", "value")}
    inputs, used = [], []

    def record(module, args, out):  # the (x, keys) an application got and the keys it used
        inputs.append(args)
        used.append(out[2])

    for b, block in enumerate(model.layer):
        for name in ("key", "query", "value"):
            getattr(block.attention, name).register_forward_hook(
                lambda *_, k=(b, name): calls.__setitem__(k, calls[k] + 1)
            )
        block.attention.register_forward_hook(record)
    x = torch.randn(2, 3, 32, 32)
    with torch.no_grad():
        logits, maps = model(x, return_attention=True)
    assert calls == {
        (0, "key"): 1,
        (1, "key"): 0,
        (0, "query"): 4,
        (1, "query"): 4,
        (0, "value"): 4,
        (1, "value"): 4,
    }
    assert len(used) == len(maps) == 8 and all(k is used[0] for k in used)
    assert inputs[0][1] is None and all(args[1] is used[0] for args in inputs[1:])  # threaded, not recomputed
    with torch.no_grad():  # the keys are ψ of the first application's input
        torch.testing.assert_close(used[0], model.layer[0].attention.key(inputs[0][0]))
    assert [tuple(m.shape) for m in maps] == [(2, 2, 9, 32, 32)] * 8  # full resolution, no pooling
    assert logits.shape == (2, 10)


def test_hierarchical_san_raw_input_is_the_re_code_form():
    """raw_input=True: attention on x (the [Re] Bottleneck), not on relu(bn1(x)); bn1 then gets no gradient,
    and neither does the second bottleneck's ψ in either form."""
    torch.manual_seed(0)
    x, y = torch.randn(4, 3, 32, 32), torch.tensor([0, 1, 2, 3])
    outs = {}
    for raw in (False, True):
        torch.manual_seed(1)
        model = HierarchicalSAN(replace(HIER_TINY, raw_input=raw))
        out = model(x)
        F.cross_entropy(out, y).backward()
        outs[raw] = out.detach()
        unused = {n for n, p in model.named_parameters() if p.grad is None}
        expected = {"layer.1.attention.key.weight"}
        if raw:
            expected |= {f"layer.{b}.bn1.{w}" for b in range(2) for w in ("weight", "bias")}
        assert unused == expected
    assert not torch.allclose(outs[False], outs[True])


@pytest.mark.parametrize("per_pass", [True, False])
def test_hierarchical_san_batch_norm_statistics_per_pass_or_shared(per_pass):
    """pass_statistics=True: every batch norm of the shared layer keeps one row of running statistics per
    pass, pass t's row updated by pass t's input only (compared with a BatchNorm2d fed that input), and
    evaluation normalises pass t with row t; the parameters are those of the [Re] form (False: plain
    BatchNorm2d, one set of statistics moved by all four passes)."""
    torch.manual_seed(0)
    cfg = replace(HIER_TINY, pass_statistics=per_pass)
    model = HierarchicalSAN(cfg).train()
    bn = model.layer[0].bn1
    seen = []
    bn.register_forward_pre_hook(lambda m, args: seen.append(args[0].detach().clone()))
    model(torch.randn(6, 3, 32, 32))
    assert len(seen) == cfg.passes
    if not per_pass:
        assert isinstance(bn, torch.nn.BatchNorm2d) and bn.running_mean.shape == (16,)
        assert bn.num_batches_tracked == cfg.passes  # one set of statistics, moved four times
        return
    assert bn.running_mean.shape == bn.running_var.shape == (cfg.passes, 16)
    for t, x in enumerate(seen):  # row t: one update by pass t's input, as a fresh BatchNorm2d would make
        ref = torch.nn.BatchNorm2d(16).train()
        ref(x)
        torch.testing.assert_close(bn.running_mean[t], ref.running_mean)
        torch.testing.assert_close(bn.running_var[t], ref.running_var)
    model.eval()  # evaluation: pass t normalised with row t
    for t, x in enumerate(list(seen)):
        bn.index = t
        ref = torch.nn.BatchNorm2d(16).eval()
        ref.load_state_dict({"weight": bn.weight, "bias": bn.bias, "running_mean": bn.running_mean[t],
                             "running_var": bn.running_var[t]}, strict=False)  # fmt: skip
        torch.testing.assert_close(bn(x), ref(x))
    shared = HierarchicalSAN(replace(cfg, pass_statistics=False))
    assert [(n, p.shape) for n, p in model.named_parameters()] == [
        (n, p.shape) for n, p in shared.named_parameters()
    ]
    with pytest.raises(ConfigError, match="pass_statistics"):
        replace(cfg, pass_statistics=1)


def test_hierarchical_san_downsample_and_training():
    torch.manual_seed(0)
    model = HierarchicalSAN(replace(HIER_TINY, downsample=2))
    x, y = torch.randn(8, 3, 32, 32), torch.randint(0, 10, (8,))
    _, maps = model(x, return_attention=True)
    assert [tuple(m.shape) for m in maps] == [(8, 2, 9, 16, 16)] * 8
    losses = _fit_batch(model, x, y)
    assert min(losses[-3:]) < 0.85 * losses[0], losses
    with pytest.raises(ConfigError, match="downsample"):
        HierarchicalSAN(replace(HIER_TINY, downsample=3))(x)


def test_hierarchical_san_config_errors():
    cfg = HierarchicalSANConfig(sa_type="patchwise", width=64, downsample=2)
    assert HierarchicalSANConfig(**json.loads(json.dumps(asdict(cfg)))) == cfg
    for kwargs, parameter in [
        (dict(sa_type="dot"), "sa_type"),
        (dict(kernel=4), "kernel"),
        (dict(width=48), "width"),  # not a multiple of mid_reduction·share_planes = 32
        (dict(passes=0), "passes"),
        (dict(raw_input="yes"), "raw_input"),
    ]:
        with pytest.raises(ConfigError) as info:
            HierarchicalSANConfig(**kwargs)
        assert info.value.parameter == parameter and "allowed" in str(info.value)
