"""Encodings, the reference formulation against per-pair definitions, layer errors, and the HA stack.

(Every fast path of the layer against the reference: ``tests/test_attention_paths.py``.)"""

import math

import pytest
import torch
from torch import nn

from attnlib.attention import (
    Encoder,
    EncoderBlock,
    Learned2DEncoding,
    MultiHeadSelfAttention2d,
    QuadraticEncoding,
    reference,
)
from attnlib.errors import ConfigError


def _delta(height, width):
    """δ = key − query for every (query, key) token pair, (N, N, 2), row-major tokens."""
    ii, jj = torch.meshgrid(torch.arange(height), torch.arange(width), indexing="ij")
    pos = torch.stack([ii.reshape(-1), jj.reshape(-1)], -1).double()
    return pos[None, :, :] - pos[:, None, :]


# ----------------------------------------------------------------------------------------- encodings


@pytest.mark.parametrize("isotropic", [True, False])
def test_quadratic_scores_match_gaussian_formula(isotropic):
    torch.manual_seed(0)
    enc = QuadraticEncoding(4, isotropic=isotropic, spread_std=0.5).double()
    s = enc.scores(3, 5)
    delta = _delta(3, 5)  # (N, N, 2)
    d = delta[None] - enc.centers[:, None, None, :]  # δ − Δ
    expected = -0.5 * torch.einsum("hqki,hij,hqkj->hqk", d, enc.inverse_covariance(), d)
    assert s.shape == (4, 15, 15)
    assert torch.allclose(s, expected, atol=1e-12)
    if isotropic:
        assert torch.allclose(s, -enc.alpha()[:, None, None] * d.pow(2).sum(-1))  # −α‖δ − Δ‖², α = s²/2


@pytest.mark.parametrize("isotropic", [True, False])
def test_quadratic_softmax_equals_official_target_vector_form(isotropic):
    """Official GaussianSelfAttention: scores u_h · r_δ with r = (δ₁, δ₂, δ₁², δ₂², δ₁δ₂)."""
    torch.manual_seed(1)
    enc = QuadraticEncoding(3, isotropic=isotropic, spread_std=0.3).double()
    inv = enc.inverse_covariance()
    a, b, c = inv[:, 0, 0], inv[:, 0, 1], inv[:, 1, 1]
    mu1, mu2 = enc.centers[:, 0], enc.centers[:, 1]
    u = -0.5 * torch.stack([-2 * (a * mu1 + b * mu2), -2 * (c * mu2 + b * mu1), a, c, 2 * b], -1)
    delta = _delta(4, 4)
    r = torch.cat([delta, delta.pow(2), (delta[..., 0] * delta[..., 1])[..., None]], -1)
    official = torch.einsum("qkd,hd->hqk", r, u)
    assert torch.allclose(enc.scores(4, 4).softmax(-1), official.softmax(-1), atol=1e-12)


def test_inverse_covariance_shapes_and_init():
    torch.manual_seed(0)
    iso, aniso = QuadraticEncoding(9, isotropic=True), QuadraticEncoding(9, isotropic=False)
    assert iso.centers.shape == (9, 2) and iso.spreads.shape == (9,)
    assert aniso.spreads.shape == (9, 2, 2)
    for enc in (iso, aniso):
        inv = enc.inverse_covariance()
        assert inv.shape == (9, 2, 2)
        assert torch.allclose(inv, inv.transpose(1, 2))
        assert (torch.linalg.eigvalsh(inv) >= 0).all()  # Σ−1 = S Sᵀ is PSD
        assert torch.allclose(inv, torch.eye(2).expand(9, 2, 2), atol=0.1)  # init ≈ I


def _peaks(enc, height, width, query):
    probs = enc.scores(height, width).softmax(-1)[:, query[0] * width + query[1]]
    return [divmod(int(i), width) for i in probs.argmax(-1)]


def test_isotropic_heads_peak_at_their_centres():
    enc = QuadraticEncoding(4, isotropic=True)
    with torch.no_grad():
        enc.centers.copy_(torch.tensor([[0.0, 0.0], [-2.0, 1.0], [3.0, -3.0], [1.0, 2.0]]))
        enc.spreads.copy_(torch.tensor([1.0, 0.7, 2.0, 1.3]))
    assert _peaks(enc, 9, 8, (4, 4)) == [(4, 4), (2, 5), (7, 1), (5, 6)]


def test_non_isotropic_heads_peak_at_their_centres():
    enc = QuadraticEncoding(3, isotropic=False)
    with torch.no_grad():
        enc.centers.copy_(torch.tensor([[1.0, -2.0], [-3.0, 0.0], [2.0, 2.0]]))
        # non-diagonal Σ−1 = S Sᵀ, well conditioned
        enc.spreads.copy_(
            torch.tensor([[[1.0, 0.6], [0.0, 0.9]], [[0.8, -0.5], [0.3, 1.1]], [[1.5, 0.0], [0.7, 0.6]]])
        )
    assert (enc.inverse_covariance()[:, 0, 1].abs() > 0.1).all()
    assert _peaks(enc, 8, 9, (4, 4)) == [(5, 2), (1, 4), (6, 6)]


def test_learned_scores_match_official_index_then_project():
    torch.manual_seed(0)
    m = 6
    enc = Learned2DEncoding(heads=3, dim=5, max_pos=m).double()
    height, width = 4, 6
    rel = torch.arange(m).view(1, -1) - torch.arange(m).view(-1, 1) + m - 1  # official relative_indices
    row = enc.head_keys_row(enc.row_embeddings(rel[:height, :height]))  # (H, H, heads)
    col = enc.head_keys_col(enc.col_embeddings(rel[:width, :width]))  # (W, W, heads)
    expected = row[:, None, :, None, :] + col[None, :, None, :, :]  # (H, W, H, W, heads)
    expected = expected.permute(4, 0, 1, 2, 3).reshape(3, height * width, height * width)
    assert torch.allclose(enc.scores(height, width), expected)
    with pytest.raises(ConfigError, match="max_pos"):
        enc.scores(m + 1, 2)


def test_learned_parameter_count_is_official():
    enc = Learned2DEncoding(heads=9, dim=400, max_pos=16)
    assert sum(p.numel() for p in enc.parameters()) == 2 * 31 * 400 + 2 * 400 * 9


@pytest.mark.parametrize("encoding", ["iso", "aniso", "learned"])
def test_gradients_reach_positional_parameters(encoding):
    torch.manual_seed(0)
    enc = (
        Learned2DEncoding(2, 8, max_pos=5)
        if encoding == "learned"
        else QuadraticEncoding(2, isotropic=encoding == "iso")
    )
    layer = MultiHeadSelfAttention2d(8, 2, encoding=enc, content=False, attn_dropout=0.0)
    out = layer(torch.randn(2, 4, 5, 8))
    out.square().sum().backward()
    for name, p in enc.named_parameters():
        assert p.grad is not None and p.grad.abs().sum() > 0, name


# ----------------------------------------------------------------------------------------- layer


def test_positional_only_probabilities_are_shared_by_the_batch():
    layer = MultiHeadSelfAttention2d(6, 2, QuadraticEncoding(2), content=False)
    _, probs = layer(torch.randn(4, 3, 3, 6), return_attention=True)
    assert layer.compute_keys(torch.randn(4, 3, 3, 6)) is None
    assert all(torch.equal(probs[0], probs[i]) for i in range(1, 4))
    with_content = MultiHeadSelfAttention2d(6, 2, QuadraticEncoding(2), content=True).eval()
    x = torch.randn(2, 3, 3, 6)
    _, probs = with_content(x, return_attention=True)
    assert with_content.compute_keys(x).shape == (2, 2, 9, 6)
    assert not torch.allclose(probs[0], probs[1])


def test_layer_config_errors():
    with pytest.raises(ConfigError, match="values"):
        MultiHeadSelfAttention2d(4, 2, QuadraticEncoding(2), values="paper")
    with pytest.raises(ConfigError, match="encoding"):
        MultiHeadSelfAttention2d(4, 2, None, content=False)
    with pytest.raises(ConfigError, match="RelativeEncoding"):
        MultiHeadSelfAttention2d(4, 2, nn.Linear(2, 2))  # encodings declare their terms; no probing
    with pytest.raises(ConfigError, match="encoding.heads"):
        MultiHeadSelfAttention2d(4, 2, QuadraticEncoding(3))
    with pytest.raises(ConfigError, match="norm"):
        EncoderBlock(MultiHeadSelfAttention2d(4, 2), 4, 8, norm="sandwich")


# ----------------------------------------------------------------------------------------- stack


def _factory(content=True, norm="post", values="input"):
    def make():
        enc = Learned2DEncoding(2, 8, 4)
        attn = MultiHeadSelfAttention2d(8, 2, enc, content=content, attn_dropout=0.0, values=values)
        return EncoderBlock(attn, 8, 16, dropout=0.0, norm=norm, attn_dense=norm == "post")

    return make


def _count(m: nn.Module) -> int:
    return sum(p.numel() for p in m.parameters())


@pytest.mark.parametrize("norm", ["post", "pre"])
def test_hierarchical_parameters_do_not_depend_on_layers(norm):
    two, six = Encoder(_factory(norm=norm), 2, True), Encoder(_factory(norm=norm), 6, True)
    assert _count(two) == _count(six) == _count(_factory(norm=norm)())
    assert _count(Encoder(_factory(norm=norm), 6, False)) == 6 * _count(two)


def _key_calls(encoder, x):
    calls = []
    hooks = [
        b.attn.key.register_forward_hook(lambda *a: calls.append(1)) for b in set(encoder.applications())
    ]
    _, maps = encoder(x, return_attention=True)
    for h in hooks:
        h.remove()
    return len(calls), maps


@pytest.mark.parametrize("norm", ["post", "pre"])
def test_hierarchical_computes_keys_once_and_recomputes_queries(norm):
    torch.manual_seed(0)
    x = torch.randn(2, 4, 4, 8)
    # projected values: the independent blocks form their keys (input values would take the bilinear path)
    make = _factory(norm=norm, values="projected")
    ha, plain = Encoder(make, 5, True).eval(), Encoder(make, 5, False).eval()
    n_ha, maps = _key_calls(ha, x)
    n_plain, _ = _key_calls(plain, x)
    assert (n_ha, n_plain) == (1, 5)
    assert len(maps) == 5 and all(m.shape == (2, 2, 16, 16) for m in maps)
    assert not torch.allclose(maps[0], maps[1])  # queries change between applications
    # the same computation written out: keys from the first application's attention input, reused
    block = ha.block
    keys = block.attn.compute_keys(x if norm == "post" else block.norm1(x))
    h = x
    with torch.no_grad():
        for _ in range(5):
            h = block(h, keys)
        out, _ = ha(x)
    assert torch.equal(out, h)


def test_encoder_gradients_flow_through_shared_block():
    enc = Encoder(_factory(), 3, True)
    out, _ = enc(torch.randn(2, 3, 3, 8))
    out.sum().backward()
    assert all(p.grad is not None for p in enc.parameters())


# ------------------------------------------------------------------------ the reference, pair by pair
# The reference formulation (attnlib.attention.reference, which every fast path equals: test_attention_paths)
# against a per-pair formulation: a Python loop over heads, query pixels and key pixels that writes each
# score from its definition, in float64. Every learned form (official / attnlib / [Re]), the quadratic
# encodings, and no encoding.
D, HEADS, M = 6, 2, 5  # hidden = head size 6 (the [Re] halves: 3), 2 heads, shifts up to ±4
REFERENCE_CASES = {
    # name: (encoding factory, content, values)
    "learned official+content": (lambda: Learned2DEncoding(HEADS, D, M, form="official"), True, "input"),
    "learned official, positional only, key bias, projected values ([Re] 16h)": (
        lambda: Learned2DEncoding(HEADS, D, M, form="official", key_bias=True),
        False,
        "projected",
    ),
    "learned attnlib+content": (lambda: Learned2DEncoding(HEADS, D, M, form="attnlib"), True, "input"),
    "learned attnlib+content, key bias": (
        lambda: Learned2DEncoding(HEADS, D, M, form="attnlib", key_bias=True),
        True,
        "input",
    ),
    "learned re+content ([Re] 9 heads)": (lambda: Learned2DEncoding(HEADS, D, M, form="re"), True, "input"),
    "learned re+content, projected values ([Re] 16 heads)": (
        lambda: Learned2DEncoding(HEADS, D, M, form="re"),
        True,
        "projected",
    ),
    "quadratic aniso+content": (lambda: QuadraticEncoding(HEADS, isotropic=False), True, "input"),
    "quadratic iso, positional only, projected values": (
        lambda: QuadraticEncoding(HEADS),
        False,
        "projected",
    ),
    "no encoding+content, projected values (ViT)": (lambda: None, True, "projected"),
}


def _case_layer(case):
    make, content, values = REFERENCE_CASES[case]
    torch.manual_seed(0)
    layer = MultiHeadSelfAttention2d(D, HEADS, make(), content, head_dim=D, attn_dropout=0.0, values=values)
    layer = layer.eval().double()
    for p in layer.parameters():  # away from the init, so that every term matters
        p.data.add_(0.5 * torch.randn_like(p))
    return layer


def _pair_score(enc, h, delta, qv):
    """The encoding's terms of one score: head h, shift δ = key − query (δ₁, δ₂), query qv (or None)."""
    score = torch.zeros((), dtype=torch.float64)
    if isinstance(enc, QuadraticEncoding):  # −½ (δ − Δ)ᵀ Σ−1 (δ − Δ)
        u = torch.tensor(delta, dtype=torch.float64) - enc.centers[h]
        return score - 0.5 * u @ enc.inverse_covariance()[h] @ u
    if enc is None:
        return score
    r, s = enc.row_embeddings.weight[delta[0] + M - 1], enc.col_embeddings.weight[delta[1] + M - 1]
    if enc.form != "re":  # w_row^(h)·r_δ₁ + w_col^(h)·r_δ₂ (+ biases)
        score = score + enc.head_keys_row.weight[h] @ r + enc.head_keys_col.weight[h] @ s
        if enc.head_keys_row.bias is not None:
            score = score + enc.head_keys_row.bias[h] + enc.head_keys_col.bias[h]
    if qv is not None and enc.form == "attnlib":  # q·(r_δ₁ + r_δ₂)/√d_h
        score = score + qv @ (r + s) / math.sqrt(D)
    if qv is not None and enc.form == "re":  # (q[:d/2]·r_δ₁ + q[d/2:]·r_δ₂)/√d_h
        score = score + (qv[: D // 2] @ r + qv[D // 2 :] @ s) / math.sqrt(D)
    return score


def _per_pair(layer, x, keys_from=None):
    """out (B, H, W, D) and probabilities (B, heads, N, N), one score at a time from the definitions."""
    b, height, width, d = x.shape
    n = height * width
    pixels = [(i, j) for i in range(height) for j in range(width)]
    xs = x.reshape(b, n, d)
    if layer.content:
        q = layer.query(xs).view(b, n, HEADS, D)
        k = layer.key((x if keys_from is None else keys_from).reshape(b, n, d)).view(b, n, HEADS, D)
    scores = torch.zeros(b, HEADS, n, n, dtype=x.dtype)
    for bi in range(b):
        for h in range(HEADS):
            for a, (qi, qj) in enumerate(pixels):
                for c, (ki, kj) in enumerate(pixels):
                    qv = q[bi, a, h] if layer.content else None
                    score = _pair_score(layer.encoding, h, (ki - qi, kj - qj), qv)
                    if layer.content:
                        score = score + qv @ k[bi, c, h] / math.sqrt(D)  # q·k/√d_h
                    scores[bi, h, a, c] = score
    probs = scores.softmax(-1)
    if layer.values == "input":  # V^(h) = X
        v = xs[:, :, None, :].expand(b, n, HEADS, d)
    else:  # V^(h) = X W_val^(h)
        v = layer.value(xs).view(b, n, HEADS, D)
    ctx = torch.einsum("bhqk,bkhd->bqhd", probs, v).reshape(b, n, -1)
    return layer.out(ctx).reshape(b, height, width, -1), probs


@pytest.mark.parametrize("case", sorted(REFERENCE_CASES))
def test_the_reference_equals_the_per_pair_formulation(case):
    """The reference's outputs and probabilities, with its own keys and with given keys (HA: the keys of
    x0, the queries and values of x); also bench's PlainAttention (the reference with nn.Dropout) and the
    layer on its default path."""
    layer = _case_layer(case)
    x, x0 = torch.randn(2, 2, 3, 4, D, dtype=torch.float64)
    with torch.no_grad():
        ref, ref_probs = _per_pair(layer, x)
        out, probs = reference.attention(layer, x, return_attention=True)
        torch.testing.assert_close(out, ref, atol=1e-12, rtol=1e-10)
        torch.testing.assert_close(probs, ref_probs, atol=1e-12, rtol=1e-10)
        plain, plain_probs = reference.PlainAttention(layer)(x, return_attention=True)
        torch.testing.assert_close(plain, ref, atol=1e-12, rtol=1e-10)
        torch.testing.assert_close(plain_probs, ref_probs, atol=1e-12, rtol=1e-10)
        torch.testing.assert_close(layer(x), ref, atol=1e-12, rtol=1e-10)
        if not layer.content:
            return
        keys = reference.compute_keys(layer, x0)
        ref_keys, _ = _per_pair(layer, x, keys_from=x0)
        torch.testing.assert_close(reference.attention(layer, x, keys)[0], ref_keys, atol=1e-12, rtol=1e-10)
        torch.testing.assert_close(layer(x, keys), ref_keys, atol=1e-12, rtol=1e-10)


def test_the_per_pair_reference_sees_each_form():
    """The three learned forms give different attention on the same weights (the test above could not pass
    by ignoring the form)."""
    x = torch.randn(1, 3, 4, D, dtype=torch.float64)
    maps = {}
    for form in ("official", "attnlib", "re"):
        layer = _case_layer(f"learned {form}+content" + " ([Re] 9 heads)" * (form == "re"))
        with torch.no_grad():
            maps[form] = layer(x, return_attention=True)[1]
    assert not torch.allclose(maps["official"], maps["attnlib"])
    assert not torch.allclose(maps["attnlib"], maps["re"])


def test_learned_form_parameters_and_errors():
    """[Re] form: tables of width d_h/2 and no head keys; official and attnlib forms: tables of width d_h and
    head keys (with biases when asked, as the [Re] nn.Linear)."""
    counts = {
        (form, bias): _count(Learned2DEncoding(9, 400, 16, form=form, key_bias=bias))
        for form in ("official", "attnlib", "re")
        for bias in (False, True)
        if not (form == "re" and bias)
    }
    assert counts[("re", False)] == 2 * 31 * 200
    assert counts[("official", False)] == counts[("attnlib", False)] == 2 * 31 * 400 + 2 * 400 * 9
    assert counts[("official", True)] == counts[("official", False)] + 2 * 9
    with pytest.raises(ConfigError, match="form"):
        Learned2DEncoding(2, 8, 4, form="transformer-xl")
    with pytest.raises(ConfigError, match="dim"):
        Learned2DEncoding(2, 7, 4, form="re")  # odd: no halves
    with pytest.raises(ConfigError, match="content"):
        MultiHeadSelfAttention2d(8, 2, Learned2DEncoding(2, 8, 4, form="re"), content=False)
    with pytest.raises(ConfigError, match="form"):
        Learned2DEncoding(2, 8, 4, form="re").scores(3, 3)  # no input-independent scores
    with pytest.raises(ConfigError, match="activation"):
        EncoderBlock(MultiHeadSelfAttention2d(4, 2), 4, 8, activation="tanh")


@pytest.mark.parametrize("height, width", [(1, 1), (3, 5), (8, 8)])
def test_pair_sum_is_the_broadcast_sum_exactly(height, width):
    """``pair_sum`` (one GEMM with the 0/1 ``axis_indicator``) gives row[k_i] + col[k_j] for every key, bit for
    bit in float32 and bfloat16 (each output is one addition, rounded once), and the same gradients."""
    from attnlib.attention.encodings import axis_indicator, pair_sum

    e = axis_indicator(height, width)
    assert e.shape == (height + width, height * width) and torch.equal(
        e.sum(0), torch.full((height * width,), 2.0)
    )
    for dtype in (torch.float32, torch.bfloat16):
        g = torch.Generator().manual_seed(height * width)
        row = torch.randn(4, 3, height, generator=g).to(dtype).requires_grad_()
        col = torch.randn(4, 3, width, generator=g).to(dtype).requires_grad_()
        want = (row[..., :, None] + col[..., None, :]).reshape(4, 3, height * width)
        got = pair_sum(row, col)
        assert got.dtype == dtype and torch.equal(got, want)
    row = torch.randn(2, height, dtype=torch.float64, requires_grad=True)
    col = torch.randn(2, width, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(pair_sum, (row, col))


def test_the_readme_snippet_runs():
    """The README's "Use the layers" code builds a learned-2D layer and an HA encoder and runs them as it says."""
    import contextlib
    import io
    import re
    from pathlib import Path

    readme = (Path(__file__).parents[1] / "README.md").read_text(encoding="utf-8")
    section = readme.split("## Use the layers", 1)[1]
    code = re.search(r"```python\n(.*?)```", section, re.S).group(1)
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        exec(compile(code, "README.md", "exec"), {"__name__": "readme"})
    shapes = printed.getvalue()
    assert "torch.Size([8, 16, 16, 64]) torch.Size([8, 9, 256, 256]) torch.Size([8, 16, 16, 64])" in shapes
