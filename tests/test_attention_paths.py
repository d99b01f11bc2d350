"""The one tester of the attention layer's compute paths (``attnlib.attention.ops``).

Every path × every encoding (none, quadratic iso / aniso, learned in each form, with and without head-key
biases) × content or not × what V is × projection biases and head size × own or given keys (HA), against
the reference formulation (``attnlib.attention.reference``) in float64: outputs, probabilities and the
gradients of every parameter, of the input and of the given keys. Then which path the dispatch takes (and
that the path named really ran), forced-path errors, attention dropout, bf16 autocast. The reference itself
is checked against per-pair definitions in ``tests/test_attention.py``.
"""

import pytest
import torch

from attnlib.attention import Learned2DEncoding, MultiHeadSelfAttention2d, QuadraticEncoding, ops, reference
from attnlib.attention.encodings import RelativeEncoding
from attnlib.errors import ConfigError

D, HEADS = 6, 2
ENCODINGS = {  # name -> (heads, d_h) -> encoding or None
    "none": lambda dh: None,
    "quadratic iso": lambda dh: QuadraticEncoding(HEADS, isotropic=True),
    "quadratic aniso": lambda dh: QuadraticEncoding(HEADS, isotropic=False),
    "learned official": lambda dh: Learned2DEncoding(HEADS, dh, max_pos=5, form="official"),
    "learned official, key bias": lambda dh: Learned2DEncoding(HEADS, dh, 5, form="official", key_bias=True),
    "learned attnlib": lambda dh: Learned2DEncoding(HEADS, dh, max_pos=5, form="attnlib"),
    "learned attnlib, key bias": lambda dh: Learned2DEncoding(HEADS, dh, 5, form="attnlib", key_bias=True),
    "learned re": lambda dh: Learned2DEncoding(HEADS, dh, max_pos=5, form="re"),
}
PROJECTIONS = {"qkv bias, d_h = D": (True, D), "no qkv bias, d_h = 4": (False, 4)}


def _layers():
    for enc, make in ENCODINGS.items():
        for content in (True, False):
            if not content and (enc == "none" or enc == "learned re"):
                continue  # no scores without queries: the layer refuses these (test_attention)
            for values in ("input", "projected"):
                for proj, (bias, dh) in PROJECTIONS.items():
                    name = f"{enc}, {'content' if content else 'positional only'}, values {values}, {proj}"
                    yield name, (make, content, values, bias, dh)


LAYERS = dict(_layers())


def make_layer(name: str, seed: int = 0) -> MultiHeadSelfAttention2d:
    """The layer ``name`` in float64, eval mode, weights moved away from the init so every term matters."""
    make, content, values, bias, dh = LAYERS[name]
    torch.manual_seed(seed)
    layer = MultiHeadSelfAttention2d(
        D, HEADS, make(dh), content, head_dim=dh, attn_dropout=0.1, values=values, qkv_bias=bias, out_dim=5
    )
    layer = layer.double().eval()
    with torch.no_grad():
        for p in layer.parameters():
            p.add_(0.5 * torch.randn_like(p))
    return layer


def expected_paths(layer, keys_given: bool, maps: bool) -> tuple[str, ...]:
    """Written out: positional alone without content; explicit always; SDPA without maps; bilinear with
    input values and the layer's own keys."""
    if not layer.content:
        return ("positional",)
    paths = ["explicit"] + ["sdpa"] * (not maps) + ["bilinear"] * (layer.values == "input" and not keys_given)
    return tuple(paths)


def _cases():
    for name, (_, content, values, _, _) in LAYERS.items():
        if not content:
            yield name, "positional", False
            continue
        for keys_given in (False, True):
            yield name, "explicit", keys_given
            yield name, "sdpa", keys_given
            if values == "input" and not keys_given:
                yield name, "bilinear", False


CASES = list(_cases())


def _inputs(layer, keys_given, seed=1):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(2, 3, 4, D, generator=g, dtype=torch.float64, requires_grad=True)
    keys = None
    if keys_given:  # HA: keys of another input, a leaf of their own
        with torch.no_grad():
            x0 = torch.randn(2, 3, 4, D, generator=g, dtype=torch.float64)
            keys = reference.compute_keys(layer, x0).detach().requires_grad_()
    return x, keys


def _values_and_grads(fn, layer, x, keys, seed=2):
    out, probs = fn()
    g = torch.Generator().manual_seed(seed)
    loss = (out * torch.randn(out.shape, generator=g, dtype=out.dtype)).sum()
    if probs is not None:  # the maps are outputs too: their gradients must agree
        loss = loss + (probs * torch.randn(probs.shape, generator=g, dtype=probs.dtype)).sum()
    leaves = [x] + ([keys] if keys is not None else []) + list(layer.parameters())
    grads = torch.autograd.grad(loss, leaves, allow_unused=True)
    return out, probs, grads


@pytest.mark.parametrize(
    "name, path, keys_given", CASES, ids=[f"{p}, {'keys, ' * k}{n}" for n, p, k in CASES]
)
def test_every_path_equals_the_reference_in_float64(name, path, keys_given):
    layer = make_layer(name)
    x, keys = _inputs(layer, keys_given)
    maps = path != "sdpa"  # SDPA returns no probabilities
    assert path in ops.available_paths(layer, keys, maps)
    out, probs, grads = _values_and_grads(
        lambda: ops.attention(layer, x, keys, maps, path=path), layer, x, keys
    )
    ref, ref_probs, ref_grads = _values_and_grads(
        lambda: reference.attention(layer, x, keys, maps), layer, x, keys
    )
    assert out.dtype == torch.float64 and out.shape == (2, 3, 4, 5)
    torch.testing.assert_close(out, ref, atol=1e-12, rtol=1e-10)
    if maps:
        assert probs.shape == (2, HEADS, 12, 12)
        torch.testing.assert_close(probs, ref_probs, atol=1e-12, rtol=1e-10)
    else:
        assert probs is None
    names = ["x"] + ["keys"] * (keys is not None) + [n for n, _ in layer.named_parameters()]
    for n, g, r in zip(names, grads, ref_grads, strict=True):
        if r is None:  # a parameter the reference does not use is not used by the path either
            assert g is None or not g.any(), n
            continue
        torch.testing.assert_close(
            g if g is not None else torch.zeros_like(r), r, atol=1e-10, rtol=1e-9, msg=n
        )


def test_the_cases_cover_every_path_encoding_and_value_mode():
    """The parametrisation above is not missing a combination (and each case's path is available)."""
    assert {p for _, p, _ in CASES} == set(ops.PATHS)
    for enc in ENCODINGS:
        for path in ops.PATHS:
            if enc in ("none", "learned re") and path == "positional":
                continue
            for values in ("input", "projected"):
                if path == "bilinear" and values == "projected":
                    continue
                assert any(
                    n.startswith(enc + ",") and f"values {values}" in n and p == path for n, p, _ in CASES
                )
    for name, (_, content, _, _, _) in LAYERS.items():
        layer = make_layer(name)
        for keys_given in (False, True) if content else (False,):
            keys = (
                reference.compute_keys(layer, torch.zeros(1, 3, 4, D, dtype=torch.float64))
                if keys_given
                else None
            )
            for maps in (False, True):
                assert ops.available_paths(layer, keys, maps) == expected_paths(layer, keys_given, maps)


# ----------------------------------------------------------------------------------------- dispatch
def _layer(content=True, values="input", encoding="learned attnlib", dim=D):
    enc = ENCODINGS[encoding](dim)
    return MultiHeadSelfAttention2d(dim, HEADS, enc, content, values=values).eval()


@pytest.mark.parametrize(
    "content, values, batch, side, keys_given, maps, path",
    [
        (False, "input", 2, 3, False, False, "positional"),
        (False, "projected", 2, 3, False, True, "positional"),
        (True, "input", 2, 3, False, False, "bilinear"),  # B·N = 18 > D = 6
        (True, "input", 2, 3, False, True, "bilinear"),  # the bilinear path returns maps too
        (True, "input", 1, 2, False, False, "explicit"),  # B·N = 4 <= D: q and k cost less
        (True, "input", 2, 3, True, False, "explicit"),  # given keys (HA): q·k
        (True, "projected", 2, 3, False, False, "explicit"),  # projected values: q·k
    ],
)
def test_default_path_on_the_cpu(content, values, batch, side, keys_given, maps, path):
    layer = _layer(content, values)
    x = torch.randn(batch, side, side, D)
    keys = layer.compute_keys(x) if keys_given else None
    assert ops.choose_path(layer, x, keys, maps) == path


def _count_calls(monkeypatch, layer):
    """Count calls of F.scaled_dot_product_attention and of the key projection."""
    calls = {"sdpa": 0, "key": 0}
    sdpa = torch.nn.functional.scaled_dot_product_attention

    def counted(*args, **kwargs):
        calls["sdpa"] += 1
        return sdpa(*args, **kwargs)

    monkeypatch.setattr(torch.nn.functional, "scaled_dot_product_attention", counted)
    if layer.content:
        layer.key.register_forward_hook(lambda *a: calls.__setitem__("key", calls["key"] + 1))
    return calls


@pytest.mark.parametrize(
    "path, sdpa_calls, key_calls", [("sdpa", 1, 1), ("explicit", 0, 1), ("bilinear", 0, 0)]
)
def test_the_named_content_path_is_the_one_that_runs_on_the_cpu(monkeypatch, path, sdpa_calls, key_calls):
    """The SDPA path runs F.scaled_dot_product_attention; the explicit one does not; the bilinear one
    never projects keys."""
    layer = _layer()
    calls = _count_calls(monkeypatch, layer)
    with torch.no_grad():
        ops.attention(layer, torch.randn(2, 3, 3, D), path=path)
    assert calls == {"sdpa": sdpa_calls, "key": key_calls}


def test_the_layer_runs_the_default_path_and_returns_what_is_asked(monkeypatch):
    layer = _layer()  # B·N > D: bilinear by default
    calls = _count_calls(monkeypatch, layer)
    x = torch.randn(2, 3, 3, D)
    with torch.no_grad():
        out = layer(x)
        out2, probs = layer(x, return_attention=True)
        ref, ref_probs = ops.attention(layer, x, return_attention=True, path="bilinear")
    assert calls == {"sdpa": 0, "key": 0}
    assert isinstance(out, torch.Tensor) and out.shape == (2, 3, 3, D)
    assert torch.equal(out, out2) and torch.equal(out, ref) and torch.equal(probs, ref_probs)
    with torch.no_grad():
        layer(x, keys=layer.compute_keys(x))  # given keys: q·k, explicit on the CPU
    assert calls == {"sdpa": 0, "key": 1}


@pytest.mark.parametrize(
    "content, values, keys_given, maps, path",
    [
        (True, "input", False, True, "sdpa"),  # SDPA returns no probabilities
        (True, "projected", False, False, "bilinear"),  # the bilinear path needs V^(h) = X
        (True, "input", True, False, "bilinear"),  # and the layer's own keys
        (True, "input", False, False, "positional"),  # with content the probabilities depend on x
        (False, "input", False, False, "explicit"),  # without content there is no q·k
        (True, "input", False, False, "flash"),
    ],
)
def test_forcing_a_path_that_cannot_compute_the_inputs_is_a_config_error(
    content, values, keys_given, maps, path
):
    layer = _layer(content, values)
    x = torch.randn(2, 3, 3, D)
    keys = layer.compute_keys(x) if keys_given else None
    with pytest.raises(ConfigError, match="path"):
        ops.attention(layer, x, keys, maps, path=path)


def test_keys_given_to_a_layer_without_content_are_a_config_error():
    layer = _layer(content=False)
    with pytest.raises(ConfigError, match="keys"):
        layer(torch.randn(1, 3, 3, D), keys=torch.randn(1, HEADS, 9, D))


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
@pytest.mark.parametrize("values", ["input", "projected"])
def test_on_cuda_the_default_with_keys_is_sdpa_and_equals_the_reference(monkeypatch, values):
    layer = _layer(values=values).cuda().double()
    calls = _count_calls(monkeypatch, layer)
    x = torch.randn(2, 4, 4, D, device="cuda", dtype=torch.float64)
    keys = layer.compute_keys(x)
    assert ops.choose_path(layer, x, keys) == "sdpa"
    with torch.no_grad():
        out = layer(x, keys)
        ref, _ = reference.attention(layer, x, keys)
    assert calls["sdpa"] == 1
    torch.testing.assert_close(out, ref, atol=1e-12, rtol=1e-10)


# ----------------------------------------------------------------------------------------- the rest
@pytest.mark.parametrize(
    "path, values",
    [(p, v) for p in ops.PATHS for v in ("input", "projected") if (p, v) != ("bilinear", "projected")],
)
def test_attention_dropout_is_unbiased_on_every_path(path, values):
    """Training-mode attention averages to the eval-mode output (mask and 1/(1−p) rescaling). One forward
    over 4000 copies of an image; every copy draws its own mask (positional-only paths too)."""
    torch.manual_seed(0)
    content = path != "positional"
    layer = MultiHeadSelfAttention2d(4, 2, QuadraticEncoding(2), content, attn_dropout=0.5, values=values)
    x = torch.randn(1, 3, 3, 4)
    with torch.no_grad():
        ref = layer.eval()(x)[0]
        layer.train()
        draws = ops.attention(layer, x.expand(4000, -1, -1, -1), path=path)[0]
    assert not torch.allclose(draws[0], ref)  # dropout is active
    assert torch.allclose(draws.mean(0), ref, atol=0.05)


BF16 = [("positional", "quadratic aniso"), ("positional", "learned attnlib")] + [
    (path, enc)
    for path in ("explicit", "sdpa", "bilinear")
    for enc in ("none", "quadratic aniso", "learned re")
]


@pytest.mark.parametrize("path, encoding", BF16)
def test_bf16_autocast_on_every_path_is_close_to_the_reference(path, encoding):
    torch.manual_seed(0)
    layer = MultiHeadSelfAttention2d(D, HEADS, ENCODINGS[encoding](D), content=path != "positional").eval()
    x = torch.randn(2, 4, 4, D)
    with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16):
        out, _ = ops.attention(layer, x, path=path)
    ref32, _ = reference.attention(layer, x)
    assert out.dtype == torch.bfloat16 and out.shape == ref32.shape
    assert torch.allclose(out.float(), ref32, atol=0.05, rtol=0.05)


@pytest.mark.parametrize("name", [n for n in LAYERS if "d_h = D" in n])
def test_probabilities_sum_to_one_and_reproduce_the_output(name):
    layer = make_layer(name)
    x, _ = _inputs(layer, False)
    with torch.no_grad():
        out, probs = layer(x, return_attention=True)
        assert torch.allclose(probs.sum(-1), torch.ones(2, HEADS, 12, dtype=torch.float64))
        xs = x.reshape(2, 12, D)  # recompute the output from the returned probabilities alone
        v = xs[:, None] if layer.values == "input" else layer.value(xs).view(2, 12, HEADS, D).transpose(1, 2)
        ctx = (probs @ v).transpose(1, 2).reshape(2, 12, -1)
        torch.testing.assert_close(layer.out(ctx).reshape(out.shape), out, atol=1e-12, rtol=1e-10)


@pytest.mark.parametrize("name", [n for n in ENCODINGS if n != "none"])
def test_every_form_of_the_encoding_terms_equals_the_generic_one(name):
    """Each encoding's own plain_scores / plain_query_scores (as published code writes them) and its fused
    content_bias / linear_query_bias equal RelativeEncoding's defaults, which derive them from scores and
    query_scores."""
    torch.manual_seed(0)
    enc = ENCODINGS[name](D).double()
    with torch.no_grad():
        for p in enc.parameters():
            p.add_(0.5 * torch.randn_like(p))
    xs = torch.randn(2, 12, D, dtype=torch.float64)
    w, b = torch.randn(HEADS, D, D, dtype=torch.float64), torch.randn(HEADS, D, dtype=torch.float64)
    q = torch.randn(2, HEADS, 12, D, dtype=torch.float64)
    generic = RelativeEncoding
    close = dict(atol=1e-12, rtol=1e-10)
    if enc.has_scores:
        torch.testing.assert_close(enc.plain_scores(3, 4), generic.plain_scores(enc, 3, 4), **close)
    if enc.has_query_scores:
        q6 = q.transpose(1, 2).reshape(2, 3, 4, HEADS, D)
        torch.testing.assert_close(
            enc.plain_query_scores(q6, 3, 4), generic.plain_query_scores(enc, q6, 3, 4), **close
        )
    torch.testing.assert_close(enc.content_bias(q, 3, 4), generic.content_bias(enc, q, 3, 4), **close)
    torch.testing.assert_close(
        enc.linear_query_bias(xs, w, b, 3, 4), generic.linear_query_bias(enc, xs, w, b, 3, 4), **close
    )


# ------------------------------------------------------------------------- [Re] score layout, dropout per image
RE_LAYOUT = [
    (enc, values, path, keys_given, side)
    for enc in ("none", "learned re")
    for values in ("input", "projected")
    for path in ("explicit", "sdpa", "bilinear")
    for keys_given in (False, True)
    for side in ((3, 4), (4, 4))
    if not (path == "bilinear" and (keys_given or values == "projected"))
]


def _re_layout_layer(enc: str, values: str, layout: str = "re", seed: int = 0) -> MultiHeadSelfAttention2d:
    torch.manual_seed(seed)
    layer = MultiHeadSelfAttention2d(
        D, HEADS, ENCODINGS[enc](4), True, head_dim=4, values=values, qkv_bias=False, out_dim=5,
        score_layout=layout,
    ).double().eval()  # fmt: skip
    with torch.no_grad():
        for p in layer.parameters():
            p.add_(0.5 * torch.randn_like(p))
    return layer


@pytest.mark.parametrize("enc, values, path, keys_given, side", RE_LAYOUT)
def test_the_re_score_layout_on_every_path_equals_the_reference_in_float64(
    enc, values, path, keys_given, side
):
    """Every path's [Re] layout (scores on the W x H grid, transposed values and output) equals the reference,
    which writes the [Re] code's (B, W, H) view and permute, on square and non-square grids."""
    layer = _re_layout_layer(enc, values)
    g = torch.Generator().manual_seed(1)
    x = torch.randn(2, *side, D, generator=g, dtype=torch.float64, requires_grad=True)
    keys = None
    if keys_given:
        keys = reference.compute_keys(layer, torch.randn(2, *side, D, generator=g, dtype=torch.float64))
        keys = keys.detach().requires_grad_()
    maps = path != "sdpa"
    out, probs, grads = _values_and_grads(
        lambda: ops.attention(layer, x, keys, maps, path=path), layer, x, keys
    )
    ref, ref_probs, ref_grads = _values_and_grads(
        lambda: reference.attention(layer, x, keys, maps), layer, x, keys
    )
    torch.testing.assert_close(out, ref, atol=1e-12, rtol=1e-10)
    if maps:
        torch.testing.assert_close(probs, ref_probs, atol=1e-12, rtol=1e-10)
    for g_, r in zip(grads, ref_grads, strict=True):
        if r is not None:
            torch.testing.assert_close(
                g_ if g_ is not None else torch.zeros_like(r), r, atol=1e-10, rtol=1e-9
            )


def test_the_re_score_layout_is_the_intended_score_of_transposed_pixels_on_a_square_grid():
    """Written out on a 3x3 grid: the [Re] score of query (i, j) and key (k, l) is the intended score of query
    (j, i) and key (l, k); the values stay in place, so the two layouts give different outputs."""
    re_layer = _re_layout_layer("learned re", "input")
    intended = _re_layout_layer("learned re", "input", layout="intended")
    intended.load_state_dict(re_layer.state_dict())
    x = torch.randn(2, 3, 3, D, dtype=torch.float64)
    _, p_re = ops.attention(re_layer, x, None, True, path="explicit")
    _, p = ops.attention(intended, x, None, True, path="explicit")
    # logits from the maps (log p up to a per-row constant): compare the centred log-probabilities
    log_re, log = p_re.log().view(2, HEADS, 3, 3, 3, 3), p.log().view(2, HEADS, 3, 3, 3, 3)
    expected = log.permute(0, 1, 3, 2, 5, 4)  # [q=(i,j), k=(k,l)] <- [(j,i), (l,k)]
    centre = lambda t: t - t.mean(dim=(-2, -1), keepdim=True)  # noqa: E731
    torch.testing.assert_close(centre(log_re), centre(expected), atol=1e-12, rtol=1e-10)
    out_re, out = re_layer(x), intended(x)
    assert (out_re - out).abs().max() > 1e-3


def test_a_re_score_layout_without_content_or_with_head_key_scores_is_a_config_error():
    with pytest.raises(ConfigError, match="score_layout"):
        MultiHeadSelfAttention2d(D, HEADS, ENCODINGS["learned official"](D), False, score_layout="re")
    with pytest.raises(ConfigError, match="score_layout"):
        MultiHeadSelfAttention2d(D, HEADS, ENCODINGS["learned attnlib"](D), True, score_layout="re")
    with pytest.raises(ConfigError, match="score_layout"):
        MultiHeadSelfAttention2d(D, HEADS, None, True, score_layout="sideways")


@pytest.mark.parametrize(
    "encoding, content, path",
    [("learned official", False, "positional"), ("quadratic iso", False, "positional"),
     ("learned re", True, "explicit"), ("learned re", True, "sdpa"), ("learned re", True, "bilinear"),
     ("none", True, "explicit")],
)  # fmt: skip
def test_attention_dropout_draws_a_mask_per_image_on_every_path(encoding, content, path):
    """Two identical images in one training batch at p = 0.5 get different outputs (each image its own
    mask, as the [Re] code's dropout after expanding to the batch), on every path and in the reference."""
    torch.manual_seed(0)
    layer = MultiHeadSelfAttention2d(D, HEADS, ENCODINGS[encoding](D), content, attn_dropout=0.5).train()
    x = torch.randn(1, 3, 3, D).expand(2, -1, -1, -1).contiguous()
    out, _ = ops.attention(layer, x, None, False, path=path)
    assert (out[0] - out[1]).abs().max() > 1e-3
    ref, _ = reference.attention(layer, x, None, False, torch.nn.Dropout(0.5))
    assert (ref[0] - ref[1]).abs().max() > 1e-3
    layer.eval()  # and without dropout the two images agree
    out, _ = ops.attention(layer, x, None, False, path=path)
    torch.testing.assert_close(out[0], out[1])


@pytest.mark.parametrize("with_bias", [False, True])
def test_the_score_product_and_its_gradients_equal_baddbmm(with_bias):
    """``ops.scores`` (bias + α·A Bᵀ with its own backward) against torch's baddbmm: values and gradients in
    float64 (gradcheck), and gradients laid out as the inputs are (contiguous, no transposed copies)."""
    from attnlib.attention.ops import scores

    g = torch.Generator().manual_seed(3)
    a = torch.randn(3, 5, 4, dtype=torch.float64, generator=g, requires_grad=True)
    b = torch.randn(3, 6, 4, dtype=torch.float64, generator=g, requires_grad=True)
    bias = torch.randn(5, 6, dtype=torch.float64, generator=g, requires_grad=True) if with_bias else None
    full = None if bias is None else bias.expand(3, 5, 6)
    want = torch.baddbmm(a.new_zeros(()) if full is None else full, a, b.transpose(1, 2), beta=int(with_bias),
                         alpha=0.3)  # fmt: skip
    assert torch.allclose(scores(a, b, full, 0.3), want, rtol=0, atol=1e-14)
    inputs = (a, b) + ((bias,) if with_bias else ())
    fn = (
        (lambda a, b, bias: scores(a, b, bias.expand(3, 5, 6), 0.3))
        if with_bias
        else (lambda a, b: scores(a, b, None, 0.3))
    )
    assert torch.autograd.gradcheck(fn, inputs)
    scores(a, b, full, 0.3).sum().backward()
    assert a.grad.is_contiguous() and b.grad.is_contiguous()
