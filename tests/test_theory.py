"""Theorem 1: the constructed attention layer equals F.conv2d (borders included); learning a shift."""

import pytest
import torch
from torch import nn

from attnlib.errors import ConfigError
from attnlib.theory import (
    INITS,
    alpha_sweep,
    attention_from_conv,
    conv_reference,
    conv_relative_error,
    head_attention_maps,
    kernel_centers,
    learn_shift,
)


def _conv(k, d, bias, c_in=3, c_out=5, seed=0):
    torch.manual_seed(seed)
    conv = nn.Conv2d(c_in, c_out, k, padding=d * (k - 1) // 2, dilation=d, bias=bias).double()
    with torch.no_grad():
        conv.weight.normal_()
        if bias:
            conv.bias.normal_()
    return conv


@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize("dilation", [1, 2])
@pytest.mark.parametrize("k", [1, 3, 5])
def test_attention_equals_conv2d(k, dilation, bias):
    conv = _conv(k, dilation, bias)
    x = torch.randn(2, 7, 10, 3, dtype=torch.float64)  # non-square, C_in = 3 != C_out = 5
    layer = attention_from_conv(conv, alpha=40.0)
    with torch.no_grad():
        out, ref = layer(x), conv_reference(conv, x)
    assert out.shape == ref.shape == (2, 7, 10, 5)
    assert out.dtype == torch.float64
    rel = (out - ref).norm() / ref.norm()
    assert rel < 1e-5
    # border pixels too: elementwise relative to the output scale
    assert torch.allclose(out, ref, rtol=1e-5, atol=1e-5 * ref.abs().max().item())
    # K² heads, one per tap, centres on the dilated kernel grid
    assert layer.attn.heads == k * k
    assert torch.equal(layer.attn.encoding.centers.detach().double(), kernel_centers(k, dilation).double())


def test_content_layer_with_zero_query_key_weights():
    conv = _conv(3, 1, True, c_in=4, c_out=2)
    x = torch.randn(1, 5, 6, 4, dtype=torch.float64)
    assert conv_relative_error(conv, 40.0, x, content=True) < 1e-5


def test_same_padding_string_and_float32():
    conv = nn.Conv2d(2, 3, 3, padding="same", dilation=2)
    x = torch.randn(1, 6, 5, 2)
    assert conv_relative_error(conv, 40.0, x) < 1e-5


def test_error_falls_with_alpha():
    conv = _conv(3, 1, True)
    x = torch.randn(2, 6, 6, 3, dtype=torch.float64)
    errs = alpha_sweep(conv, [0.1, 1.0, 4.0, 16.0, 64.0], x)
    assert errs[0] > 0.1  # far from a convolution at small α: the test can fail
    assert all(a > b for a, b in zip(errs[:-2], errs[1:-1], strict=True))
    assert errs[-1] < 1e-12


def test_head_maps_are_one_hot_at_the_taps():
    conv = _conv(3, 2, False)
    layer = attention_from_conv(conv, 40.0)
    maps = head_attention_maps(layer, 8, 9, query=(4, 4))
    assert maps.shape == (9, 8, 9)
    for h, (di, dj) in enumerate(kernel_centers(3, 2).long().tolist()):
        assert maps[h, 4 + di, 4 + dj] == pytest.approx(1.0, abs=1e-12)
    # a corner query: taps outside the image fall on the zero padding and are dropped
    corner = head_attention_maps(layer, 8, 9, query=(0, 0))
    assert corner[0].sum() < 1e-12 and corner[8, 2, 2] == pytest.approx(1.0)


@pytest.mark.parametrize(
    "conv, parameter",
    [
        (nn.Conv2d(2, 2, 2, padding=0), "kernel_size"),
        (nn.Conv2d(2, 2, (3, 5), padding=(1, 2)), "kernel_size"),
        (nn.Conv2d(2, 2, 3, padding=1, stride=2), "stride"),
        (nn.Conv2d(2, 2, 3, padding=1, groups=2), "groups"),
        (nn.Conv2d(2, 2, 3, padding=0), "padding"),
        (nn.Conv2d(2, 2, 3, padding=1, dilation=2), "padding"),
        (nn.Conv2d(2, 2, 3, padding=1, padding_mode="reflect"), "padding_mode"),
        (nn.Conv2d(2, 2, 3, padding=(2, 1), dilation=(2, 1)), "dilation"),
        (nn.Linear(2, 2), "conv"),
    ],
)
def test_invalid_convolutions_raise(conv, parameter):
    with pytest.raises(ConfigError) as err:
        attention_from_conv(conv, 10.0)
    assert err.value.parameter == parameter


@pytest.mark.parametrize("alpha", [0.0, -1.0, float("inf")])
def test_invalid_alpha_raises(alpha):
    with pytest.raises(ConfigError, match="alpha"):
        attention_from_conv(nn.Conv2d(1, 1, 3, padding=1), alpha)


def test_learned_head_escapes_uniform_attention_later_from_the_paper_init():
    """A positional-only learned-2D head learns to attend at a fixed shift with the budget's SGD, from
    either initialisation; from the paper's N(0, 0.02²) it starts uniform and escapes several times later."""
    first = {}
    for init in INITS:
        fit = learn_shift(init=init, shift=(1, -1), steps=500)
        assert fit.target[-1] > 0.9 and fit.loss[-1] < 0.01
        first[init] = int(fit.steps[int((fit.target > 0.5).nonzero()[0])])
        assert (
            fit.target.dtype == fit.loss.dtype == torch.float64
        )  # the run's dtype: the same curve on every CPU
        if init == "paper":
            assert abs(float(fit.target[0]) - 1 / 64) < 1e-3  # uniform over the 8x8 keys at the start
    assert first["paper"] > 2 * first["default"]


def test_theory_fits_run_on_one_thread_whatever_the_callers_count():
    """learn_shift / learn_convolution optimise tiny tensors on one thread (a second one only adds barriers)
    and give the caller its thread count back: the same trace from a caller on 1 or 2 threads."""
    previous = torch.get_num_threads()
    traces = []
    try:
        for threads in (1, 2):
            torch.set_num_threads(threads)
            fit = learn_shift(steps=40, record_every=10)
            assert torch.get_num_threads() == threads
            traces.append((fit.loss, fit.target))
    finally:
        torch.set_num_threads(previous)
    assert all(torch.equal(a, b) for a, b in zip(*traces, strict=True))


@pytest.mark.parametrize(
    "kwargs, parameter",
    [
        ({"init": "xavier"}, "init"),
        ({"shift": (0, 8)}, "shift"),
        ({"steps": -1}, "steps"),
        ({"size": 0}, "size"),
    ],
)
def test_learn_shift_rejects_bad_parameters(kwargs, parameter):
    with pytest.raises(ConfigError) as err:
        learn_shift(**kwargs)
    assert err.value.parameter == parameter
