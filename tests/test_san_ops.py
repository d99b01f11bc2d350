"""attnlib.san.reference / ops against a direct loop implementation, gradcheck, dispatch and error messages."""

import os
import subprocess
import sys
from functools import partial
from pathlib import Path

import pytest
import torch
from helpers import assert_same_values_and_grads

from attnlib.errors import ConfigError
from attnlib.san import ops, reference
from attnlib.san.reference import output_size

# (kernel_size, stride, padding, dilation, C, Cw): stride 2, dilation 2, C != Cw, padding beyond the centre tap
WINDOWS = [
    (3, 1, 1, 1, 4, 2),
    (3, 2, 1, 1, 6, 3),
    (3, 1, 2, 2, 4, 1),
    (3, 2, 2, 2, 2, 2),
    (5, 2, 3, 1, 4, 2),
    (3, 1, 0, 1, 2, 1),
]
CASES = [(*w, mode) for w in WINDOWS for mode in ("zeros", "reflect")]


# ---------------------------------------------------------------------------------------------------------------
# Direct loop implementation of the definition (vectorised over batch and channel only).


def source(i: int, n: int, pad_mode: str):
    """Index of the input read at (possibly padded) position i along an axis of length n; None for a zero."""
    if 0 <= i < n:
        return i
    if pad_mode == "zeros":
        return None
    return -i if i < 0 else 2 * (n - 1) - i  # nn.ReflectionPad2d


def read(x, h, w, pad_mode):
    """x[:, :, h, w] through the padding: (B, C)."""
    hs, ws = source(h, x.shape[2], pad_mode), source(w, x.shape[3], pad_mode)
    return x[:, :, 0, 0] * 0 if hs is None or ws is None else x[:, :, hs, ws]


def loop_aggregation(x, weight, K, s, p, d, pad_mode):
    B, C, H, W = x.shape
    Cw = weight.shape[1]
    Ho, Wo = output_size(H, K, s, p, d), output_size(W, K, s, p, d)
    shared = weight[:, [c % Cw for c in range(C)]]  # weight[b, c mod Cw]
    rows = []
    for i in range(Ho):
        row = []
        for j in range(Wo):
            acc = 0
            for kh in range(K):
                for kw in range(K):
                    acc = acc + shared[:, :, kh * K + kw, i, j] * read(
                        x, i * s - p + kh * d, j * s - p + kw * d, pad_mode
                    )
            row.append(acc)
        rows.append(torch.stack(row, -1))
    return torch.stack(rows, -2)


def loop_subtraction2(x1, x2, K, s, p, d, pad_mode):
    B, C, H, W = x1.shape
    Ho, Wo = output_size(H, K, s, p, d), output_size(W, K, s, p, d)
    c0 = (K - 1) // 2  # centre tap
    out = x1.new_zeros(B, C, K * K, Ho, Wo)
    for i in range(Ho):
        for j in range(Wo):
            centre = read(x1, i * s - p + c0 * d, j * s - p + c0 * d, pad_mode)
            for kh in range(K):
                for kw in range(K):
                    neighbour = read(x2, i * s - p + kh * d, j * s - p + kw * d, pad_mode)
                    out[:, :, kh * K + kw, i, j] = centre - neighbour
    return out


def inputs(K, s, p, d, C, Cw, dtype=torch.float64, B=2, H=6, W=5, seed=0):
    g = torch.Generator().manual_seed(seed)
    Ho, Wo = output_size(H, K, s, p, d), output_size(W, K, s, p, d)
    x1 = torch.randn(B, C, H, W, generator=g, dtype=dtype).requires_grad_()
    x2 = torch.randn(B, C, H, W, generator=g, dtype=dtype).requires_grad_()
    w = torch.randn(B, Cw, K * K, Ho, Wo, generator=g, dtype=dtype).requires_grad_()
    return x1, x2, w


# ---------------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("K,s,p,d,C,Cw,mode", CASES)
def test_reference_aggregation_matches_loop(K, s, p, d, C, Cw, mode):
    x, _, w = inputs(K, s, p, d, C, Cw)
    window = (K, s, p, d, mode)
    assert_same_values_and_grads(
        lambda x, w: reference.aggregation(x, w, *window),
        lambda x, w: loop_aggregation(x, w, *window),
        (x, w),
    )


@pytest.mark.parametrize("K,s,p,d,C,Cw,mode", CASES)
def test_reference_subtraction_matches_loop(K, s, p, d, C, Cw, mode):
    x1, x2, _ = inputs(K, s, p, d, C, Cw)
    window = (K, s, p, d, mode)
    assert_same_values_and_grads(
        lambda a, b: reference.subtraction2(a, b, *window),
        lambda a, b: loop_subtraction2(a, b, *window),
        (x1, x2),
    )
    assert_same_values_and_grads(
        lambda a: reference.subtraction(a, *window), lambda a: loop_subtraction2(a, a, *window), (x1,)
    )


def test_subtraction_centre_is_official_for_same_padding():
    """With SAN's padding p = d·(K − 1) / 2 the centre is x[i·s, j·s] (the official unfold_i reference)."""
    x1, x2, _ = inputs(5, 2, 4, 2, 3, 1)
    out = reference.subtraction2(x1, x2, 5, 2, 4, 2, "reflect")
    Ho, Wo = out.shape[-2:]
    centre = torch.nn.functional.unfold(x1, 1, stride=2).view(2, 3, 1, Ho, Wo)
    neighbours = torch.nn.functional.unfold(
        torch.nn.functional.pad(x2, (4,) * 4, mode="reflect"), 5, dilation=2, stride=2
    )
    torch.testing.assert_close(out, centre - neighbours.view(2, 3, 25, Ho, Wo))


@pytest.mark.parametrize("mode", ["zeros", "reflect"])
def test_reference_passes_gradcheck_in_float64(mode):
    K, s, p, d, C, Cw = 3, 2, 2, 2, 2, 1
    x1, x2, w = inputs(K, s, p, d, C, Cw, B=1, H=5, W=4)
    window = dict(kernel_size=K, stride=s, padding=p, dilation=d, pad_mode=mode)
    assert torch.autograd.gradcheck(partial(reference.aggregation, **window), (x1, w))
    assert torch.autograd.gradcheck(partial(reference.subtraction, **window), (x1,))
    assert torch.autograd.gradcheck(partial(reference.subtraction2, **window), (x1, x2))


def test_ops_torch_and_auto_on_cpu_are_the_reference():
    x1, x2, w = inputs(3, 1, 1, 1, 4, 2)
    for backend in ("torch", "auto"):
        expected = reference.aggregation(x1, w, 3, 1, 1, 1, "reflect")
        torch.testing.assert_close(
            ops.aggregation(x1, w, 3, padding=1, pad_mode="reflect", backend=backend), expected
        )
        torch.testing.assert_close(
            ops.subtraction2(x1, x2, 3, padding=1, backend=backend), reference.subtraction2(x1, x2, 3, 1, 1)
        )
        torch.testing.assert_close(
            ops.subtraction(x1, 3, padding=1, backend=backend), reference.subtraction(x1, 3, 1, 1)
        )


# ---------------------------------------------------------------------------------------------------------------
# Errors


def _agg(**kw):
    x = kw.pop("x", torch.randn(1, 4, 5, 5))
    w = kw.pop("weight", torch.randn(1, 2, 9, 5, 5))
    args = dict(kernel_size=3, padding=1) | kw
    return ops.aggregation(x, w, **args)


@pytest.mark.parametrize(
    "kwargs,parameter,allowed",
    [
        (dict(pad_mode="circular"), "pad_mode", "'zeros' | 'reflect'"),
        (dict(backend="cuda"), "backend", "'auto' | 'torch' | 'triton'"),
        (dict(kernel_size=0), "kernel_size", "int >= 1"),
        (dict(stride=0), "stride", "int >= 1"),
        (dict(padding=-1), "padding", "int >= 0"),
        (dict(dilation=1.5), "dilation", "int >= 1"),
        (dict(weight=torch.randn(1, 3, 9, 5, 5)), "weight", "Cw dividing C=4"),
        (dict(weight=torch.randn(1, 2, 4, 5, 5)), "weight", "K*K=9"),
        (dict(weight=torch.randn(1, 2, 9, 4, 4)), "weight", "Ho=5, Wo=5"),
        (dict(weight=torch.randn(2, 9, 5, 5)), "weight", "(B, Cw, K*K, Ho, Wo)"),
        (dict(x=torch.randn(4, 5, 5)), "x", "(B, C, H, W)"),
        (dict(padding=5, pad_mode="reflect"), "padding", "< min(H, W) = 5"),
        (dict(kernel_size=9, padding=0), "kernel_size", "fits in 5x5"),
    ],
)
def test_aggregation_errors_name_parameter_and_allowed(kwargs, parameter, allowed):
    with pytest.raises(ConfigError) as info:
        _agg(**kwargs)
    assert info.value.parameter == parameter
    message = str(info.value)
    assert message.startswith(f"{parameter}: got ") and allowed in message


def test_subtraction_refuses_mismatched_shapes_pad_modes_and_integer_inputs():
    x = torch.randn(1, 2, 5, 5)
    with pytest.raises(ConfigError, match=r"^x2: got \(1, 3, 5, 5\); allowed: the shape of x1"):
        ops.subtraction2(x, torch.randn(1, 3, 5, 5), 3, padding=1)
    with pytest.raises(ConfigError, match="^pad_mode: "):
        ops.subtraction(x, 3, pad_mode="replicate")
    with pytest.raises(ConfigError, match="^x1: "):
        ops.subtraction2(x.long(), x, 3)


@pytest.mark.skipif(
    os.environ.get("TRITON_INTERPRET") == "1", reason="the interpreter makes CPU triton valid"
)
def test_triton_backend_on_cpu_without_interpreter_is_a_clear_error():
    pytest.importorskip("triton")
    x = torch.randn(1, 2, 5, 5)
    with pytest.raises(ConfigError, match="^backend: got 'triton'; allowed: .*TRITON_INTERPRET=1"):
        ops.subtraction(x, 3, padding=1, backend="triton")


@pytest.mark.slow
def test_san_imports_and_runs_without_triton():
    """`import attnlib.san` does not import triton; without triton, 'auto' works and 'triton' is a ConfigError."""
    code = """
import sys
import attnlib.san, attnlib.san.model
assert "triton" not in sys.modules, "importing attnlib.san imported triton"
sys.modules["triton"] = None  # make `import triton` fail
import torch
from attnlib.errors import ConfigError
x = torch.randn(1, 2, 5, 5)
assert attnlib.san.subtraction(x, 3, padding=1).shape == (1, 2, 9, 5, 5)
try:
    attnlib.san.subtraction(x, 3, padding=1, backend="triton")
except ConfigError as e:
    assert "triton is not installed" in str(e), e
else:
    raise AssertionError("no error")
"""
    root = Path(__file__).resolve().parents[1]
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    result = subprocess.run(
        [sys.executable, "-c", code], cwd=root, env=env, capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stderr
