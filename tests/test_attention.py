"""Encodings, the multi-head layer (SDPA vs explicit), probabilities, and the HA stack."""

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
    out, _, _ = layer(torch.randn(2, 4, 5, 8))
    out.square().sum().backward()
    for name, p in enc.named_parameters():
        assert p.grad is not None and p.grad.abs().sum() > 0, name


# ----------------------------------------------------------------------------------------- layer


def _explicit(layer, x, keys=None):
    """Reference: einsum scores, softmax, per-head average, concat, output projection."""
    b, height, width, d = x.shape
    n, h = height * width, layer.heads
    xs = x.reshape(b, n, d)
    scores = torch.zeros(b, h, n, n)
    if layer.content:
        q = layer.query(xs).view(b, n, h, layer.head_dim)
        k = layer.key(xs).view(b, n, h, layer.head_dim) if keys is None else keys.transpose(1, 2)
        scores = torch.einsum("bqhd,bkhd->bhqk", q, k) / math.sqrt(layer.head_dim)
    if layer.encoding is not None:
        scores = scores + layer.encoding.scores(height, width)
    if layer.content and isinstance(layer.encoding, Learned2DEncoding):
        # query-positional term q_h · (r^row_{k_i − q_i} + r^col_{k_j − q_j}) / √d_h, written out per pair
        enc, m = layer.encoding, layer.encoding.max_pos
        ii, jj = torch.meshgrid(torch.arange(height), torch.arange(width), indexing="ij")
        ii, jj = ii.reshape(-1), jj.reshape(-1)
        r = enc.row_embeddings.weight[ii[None, :] - ii[:, None] + m - 1]  # (N, N, D_p) [query, key]
        r = r + enc.col_embeddings.weight[jj[None, :] - jj[:, None] + m - 1]
        scores = scores + torch.einsum("bqhd,qkd->bhqk", q, r) / math.sqrt(layer.head_dim)
    probs = scores.softmax(-1)
    if layer.value_mode == "paper":
        v = xs[:, :, None, :].expand(b, n, h, d)
    else:
        v = layer.value(xs).view(b, n, h, layer.head_dim)
    ctx = torch.einsum("bhqk,bkhd->bqhd", probs, v).reshape(b, n, -1)
    return layer.out(ctx).reshape(b, height, width, -1), probs


LAYERS = {
    "quadratic+content": lambda: MultiHeadSelfAttention2d(
        12, 3, QuadraticEncoding(3, False), True, head_dim=8
    ),
    "learned+content": lambda: MultiHeadSelfAttention2d(12, 3, Learned2DEncoding(3, 12, 6), True),
    "quadratic": lambda: MultiHeadSelfAttention2d(12, 3, QuadraticEncoding(3), content=False),
    "learned/standard": lambda: MultiHeadSelfAttention2d(
        12, 3, Learned2DEncoding(3, 12, 6), False, head_dim=5, value="standard"
    ),
    "vit": lambda: MultiHeadSelfAttention2d(12, 3, None, True, value="standard", qkv_bias=False, out_dim=7),
}


@pytest.mark.parametrize("name", sorted(LAYERS))
def test_sdpa_path_equals_explicit_formulation(name):
    torch.manual_seed(0)
    layer = LAYERS[name]().eval().double()  # float64: equality of the math, not of summation orders
    x = torch.randn(2, 5, 6, 12, dtype=torch.float64)
    with torch.no_grad():
        out, _, none = layer(x)  # SDPA / shared-softmax path
        ref, ref_probs = _explicit(layer, x)
        out2, _, probs = layer(x, return_attention=True)
    assert none is None and out.dtype == torch.float64
    torch.testing.assert_close(out, ref, atol=1e-12, rtol=1e-10)
    torch.testing.assert_close(out2, ref, atol=1e-12, rtol=1e-10)
    torch.testing.assert_close(probs, ref_probs, atol=1e-12, rtol=1e-10)


@pytest.mark.parametrize("name", sorted(LAYERS))
def test_probabilities_sum_to_one_and_reproduce_the_output(name):
    torch.manual_seed(1)
    layer = LAYERS[name]().eval()
    x = torch.randn(3, 4, 5, 12)
    with torch.no_grad():
        out, _, probs = layer(x, return_attention=True)
        assert probs.shape == (3, 3, 20, 20)
        assert torch.allclose(probs.sum(-1), torch.ones(3, 3, 20))
        # recompute the output from the returned probabilities alone
        xs = x.reshape(3, 20, 12)
        v = xs[:, None].expand(3, 3, 20, 12) if layer.value_mode == "paper" else layer._values(xs)
        ctx = (probs @ v).transpose(1, 2).reshape(3, 20, -1)
        assert torch.allclose(layer.out(ctx).reshape(out.shape), out, atol=1e-5)


def test_positional_only_probabilities_are_shared_by_the_batch():
    layer = MultiHeadSelfAttention2d(6, 2, QuadraticEncoding(2), content=False)
    _, keys, probs = layer(torch.randn(4, 3, 3, 6), return_attention=True)
    assert keys is None
    assert all(torch.equal(probs[0], probs[i]) for i in range(1, 4))
    with_content = MultiHeadSelfAttention2d(6, 2, QuadraticEncoding(2), content=True).eval()
    _, keys, probs = with_content(torch.randn(2, 3, 3, 6), return_attention=True)
    assert keys.shape == (2, 2, 9, 6)
    assert not torch.allclose(probs[0], probs[1])


def test_given_keys_are_used_and_returned():
    torch.manual_seed(0)
    layer = LAYERS["learned+content"]().eval().double()
    x0, x1 = torch.randn(2, 2, 4, 4, 12, dtype=torch.float64)
    with torch.no_grad():
        _, k0, _ = layer(x0)
        out, k, _ = layer(x1, keys=k0)
        ref, _ = _explicit(layer, x1, keys=k0)
    assert k is k0
    torch.testing.assert_close(out, ref, atol=1e-12, rtol=1e-10)


@pytest.mark.parametrize("name", sorted(LAYERS))
def test_bf16_autocast_runs(name):
    torch.manual_seed(0)
    layer = LAYERS[name]().eval()
    x = torch.randn(2, 4, 4, 12)
    with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16):
        out, _, _ = layer(x)
    ref, _ = _explicit(layer, x)
    assert out.shape == ref.shape and torch.allclose(out.float(), ref, atol=0.05, rtol=0.05)


def test_layer_config_errors():
    with pytest.raises(ConfigError, match="value"):
        MultiHeadSelfAttention2d(4, 2, QuadraticEncoding(2), value="nope")
    with pytest.raises(ConfigError, match="encoding"):
        MultiHeadSelfAttention2d(4, 2, None, content=False)
    with pytest.raises(ConfigError, match="encoding.heads"):
        MultiHeadSelfAttention2d(4, 2, QuadraticEncoding(3))
    with pytest.raises(ConfigError, match="norm"):
        EncoderBlock(MultiHeadSelfAttention2d(4, 2), 4, 8, norm="sandwich")


# ----------------------------------------------------------------------------------------- stack


def _factory(content=True, norm="post"):
    def make():
        attn = MultiHeadSelfAttention2d(8, 2, Learned2DEncoding(2, 8, 4), content=content, attn_dropout=0.0)
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


def test_hierarchical_computes_keys_once_and_recomputes_queries():
    torch.manual_seed(0)
    x = torch.randn(2, 4, 4, 8)
    ha, plain = Encoder(_factory(), 5, True).eval(), Encoder(_factory(), 5, False).eval()
    n_ha, maps = _key_calls(ha, x)
    n_plain, _ = _key_calls(plain, x)
    assert (n_ha, n_plain) == (1, 5)
    assert len(maps) == 5 and all(m.shape == (2, 2, 16, 16) for m in maps)
    assert not torch.allclose(maps[0], maps[1])  # queries change between applications
    # the same computation written out: keys from the first application's input, reused
    block, h, keys = ha.block, x, None
    with torch.no_grad():
        for _ in range(5):
            h, used, _ = block(h, keys)
            keys = used if keys is None else keys
        out, _ = ha(x)
    assert torch.allclose(out, h)
    assert torch.allclose(keys, block.attn.compute_keys(x))


def test_encoder_gradients_flow_through_shared_block():
    enc = Encoder(_factory(), 3, True)
    out, _ = enc(torch.randn(2, 3, 3, 8))
    out.sum().backward()
    assert all(p.grad is not None for p in enc.parameters())


@pytest.mark.parametrize("name", ["quadratic+content", "learned+content", "vit"])
def test_sdpa_and_explicit_content_paths_agree(name):
    """F.scaled_dot_product_attention (the GPU default) and the explicit CPU path give the same output."""
    torch.manual_seed(2)
    layer = LAYERS[name]().eval().double()
    x = torch.randn(2, 5, 6, 12, dtype=torch.float64, requires_grad=True)
    layer.sdpa = True
    out_sdpa, _, _ = layer(x)
    (g_sdpa,) = torch.autograd.grad(out_sdpa.square().sum(), x)
    layer.sdpa = False
    out, _, _ = layer(x)
    (g,) = torch.autograd.grad(out.square().sum(), x)
    torch.testing.assert_close(out_sdpa, out, atol=1e-12, rtol=1e-10)
    torch.testing.assert_close(g_sdpa, g, atol=1e-12, rtol=1e-10)


# ------------------------------------------------------------------------ learned 2D encoding forms
# Each form of the learned encoding (official / attnlib / [Re]) against a per-pair formulation: a Python
# loop over heads, query pixels and key pixels that writes each score from its definition, in float64.
FORM_CASES = {
    # name: (form, key_bias, content, value)
    "official+content": ("official", False, True, "paper"),
    "official, positional only, key bias, values ([Re] 16h)": ("official", True, False, "standard"),
    "attnlib+content": ("attnlib", False, True, "paper"),
    "attnlib+content, key bias": ("attnlib", True, True, "paper"),
    "re+content ([Re] 9 heads)": ("re", False, True, "paper"),
    "re+content, projected values ([Re] 16 heads)": ("re", False, True, "standard"),
}
D, HEADS, M = 6, 2, 5  # hidden = head size 6 (the [Re] halves: 3), 2 heads, shifts up to ±4


def _form_layer(form, key_bias, content, value, qkv_bias=True):
    torch.manual_seed(0)
    enc = Learned2DEncoding(HEADS, D, max_pos=M, form=form, key_bias=key_bias)
    layer = MultiHeadSelfAttention2d(
        D, HEADS, enc, content, head_dim=D, attn_dropout=0.0, value=value, qkv_bias=qkv_bias, bilinear=True
    )
    layer = layer.eval().double()
    for p in layer.parameters():  # away from the init, so that every term matters
        p.data.add_(0.5 * torch.randn_like(p))
    return layer


def _per_pair(layer, x, keys_from=None):
    """out (B, H, W, D) and probabilities (B, heads, N, N), one score at a time from the definitions."""
    b, height, width, d = x.shape
    enc, n = layer.encoding, height * width
    pixels = [(i, j) for i in range(height) for j in range(width)]
    xs = x.reshape(b, n, d)
    q = layer.query(xs).view(b, n, HEADS, D) if layer.content else None
    k = (
        layer.key((x if keys_from is None else keys_from).reshape(b, n, d)).view(b, n, HEADS, D)
        if layer.content
        else None
    )
    row, col = enc.row_embeddings.weight, enc.col_embeddings.weight
    half = D // 2
    scores = torch.zeros(b, HEADS, n, n, dtype=x.dtype)
    for bi in range(b):
        for h in range(HEADS):
            for a, (qi, qj) in enumerate(pixels):
                for c, (ki, kj) in enumerate(pixels):
                    r, s = row[ki - qi + M - 1], col[kj - qj + M - 1]  # δ = key − query
                    score = torch.zeros((), dtype=x.dtype)
                    if enc.form != "re":  # w_row^(h)·r_δ₁ + w_col^(h)·r_δ₂ (+ biases)
                        score = score + enc.head_keys_row.weight[h] @ r + enc.head_keys_col.weight[h] @ s
                        if enc.head_keys_row.bias is not None:
                            score = score + enc.head_keys_row.bias[h] + enc.head_keys_col.bias[h]
                    if layer.content:
                        qv = q[bi, a, h]
                        score = score + qv @ k[bi, c, h] / math.sqrt(D)  # q·k/√d_h
                        if enc.form == "attnlib":  # q·(r_δ₁ + r_δ₂)/√d_h
                            score = score + qv @ (r + s) / math.sqrt(D)
                        if enc.form == "re":  # (q[:d/2]·r_δ₁ + q[d/2:]·r_δ₂)/√d_h
                            score = score + (qv[:half] @ r + qv[half:] @ s) / math.sqrt(D)
                    scores[bi, h, a, c] = score
    probs = scores.softmax(-1)
    if layer.value_mode == "paper":
        v = xs[:, :, None, :].expand(b, n, HEADS, d)
    else:
        v = layer.value(xs).view(b, n, HEADS, D)
    ctx = torch.einsum("bhqk,bkhd->bqhd", probs, v).reshape(b, n, -1)
    return layer.out(ctx).reshape(b, height, width, -1), probs


@pytest.mark.parametrize("case", sorted(FORM_CASES))
def test_learned_forms_equal_the_per_pair_formulation_on_every_path(case):
    """Every compute path the layer dispatches to gives the per-pair outputs, probabilities and, for the
    explicit and bilinear paths, the same gradients: explicit scores (return_attention), SDPA, the
    bilinear path (need_keys=False; B·N > D so it is taken), given keys (HA) and bench.PlainAttention."""
    from attnlib.bench import PlainAttention

    form, key_bias, content, value = FORM_CASES[case]
    layer = _form_layer(form, key_bias, content, value)
    x = torch.randn(2, 3, 4, D, dtype=torch.float64)
    with torch.no_grad():
        ref, ref_probs = _per_pair(layer, x)
        out, keys, probs = layer(x, return_attention=True)  # explicit scores
        torch.testing.assert_close(out, ref, atol=1e-12, rtol=1e-10)
        torch.testing.assert_close(probs, ref_probs, atol=1e-12, rtol=1e-10)
        plain, _, plain_probs = PlainAttention(layer)(x, return_attention=True)
        torch.testing.assert_close(plain, ref, atol=1e-12, rtol=1e-10)
        torch.testing.assert_close(plain_probs, ref_probs, atol=1e-12, rtol=1e-10)
        if not content:
            return
        layer.sdpa = True
        out_sdpa, _, _ = layer(x)
        layer.sdpa = None
        torch.testing.assert_close(out_sdpa, ref, atol=1e-12, rtol=1e-10)
        x1 = torch.randn_like(x)  # HA: the keys of x, the queries (and values) of x1
        out_keys, used, _ = layer(x1, keys=keys)
        assert used is keys
        torch.testing.assert_close(out_keys, _per_pair(layer, x1, keys_from=x)[0], atol=1e-12, rtol=1e-10)
    calls = []
    hook = layer.key.register_forward_hook(lambda *a: calls.append(1))
    grads = {}
    for need_keys in (True, False):
        layer.zero_grad()
        out, _, _ = layer(x, need_keys=need_keys)
        (out * torch.randn_like(out, generator=torch.Generator().manual_seed(1))).sum().backward()
        grads[need_keys] = {n: p.grad.clone() for n, p in layer.named_parameters()}
        if not need_keys:
            torch.testing.assert_close(out, ref, atol=1e-12, rtol=1e-10)
    hook.remove()
    assert len(calls) == (1 if value == "paper" else 2)  # the bilinear path (paper values) skips the keys
    for n in grads[True]:
        torch.testing.assert_close(grads[False][n], grads[True][n], atol=1e-10, rtol=1e-9, msg=n)


def test_the_per_pair_reference_sees_each_form():
    """The three forms give different attention on the same weights (the test above could not pass by
    ignoring the form)."""
    x = torch.randn(1, 3, 4, D, dtype=torch.float64)
    maps = {}
    for form in ("official", "attnlib", "re"):
        layer = _form_layer(form, False, True, "paper")
        with torch.no_grad():
            maps[form] = layer(x, return_attention=True)[2]
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
