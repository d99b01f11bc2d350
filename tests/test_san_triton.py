"""The Triton kernels of attnlib.san, run on the CPU through Triton's interpreter.

TRITON_INTERPRET=1 must be set before attnlib.san.kernels is first imported, so this module runs its kernel tests
in a fresh pytest process with that variable set: in an ordinary run it defines a single test that starts that
process (which works whatever else the surrounding pytest run imported); in the child process (or in a run that
sets TRITON_INTERPRET=1 itself) it defines the kernel tests, which compare forward and backward of
``backend="triton"`` with the reference (itself checked against a direct loop in test_san_ops.py).
"""

import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

pytest.importorskip("triton")

INTERPRETED = os.environ.get("TRITON_INTERPRET") == "1"

if not INTERPRETED:

    @pytest.mark.slow
    @pytest.mark.triton
    def test_triton_kernels_under_the_interpreter():
        env = os.environ | {"TRITON_INTERPRET": "1"}
        command = [sys.executable, "-m", "pytest", __file__, "-q", "-x", "-p", "no:cacheprovider"]
        root = Path(__file__).resolve().parents[1]
        result = subprocess.run(command, cwd=root, env=env, capture_output=True, text=True, timeout=600)
        assert result.returncode == 0, result.stdout[-6000:] + result.stderr[-3000:]
        assert " passed" in result.stdout and " skipped" not in result.stdout, result.stdout[-3000:]

else:
    from helpers import assert_same_values_and_grads

    from attnlib.san import kernels, ops, reference
    from attnlib.san.reference import output_size

    # (kernel_size, stride, padding, dilation, C, Cw): stride 2, dilation 2, C != Cw, even K, padding > centre, none
    WINDOWS = [
        (3, 1, 1, 1, 4, 2),
        (3, 2, 1, 1, 6, 3),
        (3, 1, 2, 2, 4, 1),
        (3, 2, 2, 2, 2, 2),
        (3, 2, 2, 1, 4, 2),
        (2, 1, 1, 1, 2, 1),
        (3, 1, 0, 1, 2, 1),
    ]
    CASES = [(*w, mode) for w in WINDOWS for mode in ("zeros", "reflect")]

    def inputs(K, s, p, d, C, Cw, dtype, H=7, W=6):
        g = torch.Generator().manual_seed(K * 100 + s * 10 + p + d)
        Ho, Wo = output_size(H, K, s, p, d), output_size(W, K, s, p, d)
        x1, x2 = (torch.randn(2, C, H, W, generator=g).to(dtype).requires_grad_() for _ in range(2))
        w = torch.randn(2, Cw, K * K, Ho, Wo, generator=g).to(dtype).requires_grad_()
        return x1, x2, w

    # float32 everywhere, float64 (tight tolerance) on one window per padding mode
    DTYPED = [(*case, torch.float32) for case in CASES] + [(*CASES[i], torch.float64) for i in (6, 9)]

    @pytest.mark.parametrize("K,s,p,d,C,Cw,mode,dtype", DTYPED)
    def test_triton_matches_reference(K, s, p, d, C, Cw, mode, dtype):
        assert kernels.INTERPRETED
        x1, x2, w = inputs(K, s, p, d, C, Cw, dtype)
        window = (K, s, p, d, mode)
        tol = dict(atol=1e-5, rtol=1e-5) if dtype == torch.float32 else dict(atol=1e-12, rtol=1e-12)
        for op, args in ((ops.aggregation, (x1, w)), (ops.subtraction, (x1,)), (ops.subtraction2, (x1, x2))):
            assert_same_values_and_grads(
                lambda *a, op=op: op(*a, *window, backend="triton"),
                lambda *a, op=op: op(*a, *window, backend="torch"),
                args,
                reference_dtype=torch.float64,
                **tol,
            )

    def test_triton_half_precision_and_only_needed_gradients():
        """float16 inputs (float32 accumulation); a gradient for the weights alone; non-contiguous inputs."""
        x, _, w = inputs(3, 1, 1, 1, 4, 2, torch.float16)
        window = (3, 1, 1, 1, "reflect")
        out = ops.aggregation(
            x.detach().transpose(2, 3).contiguous().transpose(2, 3), w, *window, backend="triton"
        )
        w64 = w.detach().double().requires_grad_()
        expected = reference.aggregation(x.detach().double(), w64, *window)
        torch.testing.assert_close(out.double(), expected, atol=2e-2, rtol=1e-2)
        (grad_w,) = torch.autograd.grad(out.sum(), [w])
        (expected_w,) = torch.autograd.grad(expected.sum(), [w64])
        assert grad_w.dtype == torch.float16
        torch.testing.assert_close(grad_w.double(), expected_w, atol=2e-2, rtol=1e-2)

    def test_triton_mixed_dtypes_promote_like_the_reference():
        x, _, w = inputs(3, 1, 1, 1, 4, 2, torch.float32)
        out = ops.aggregation(x, w.double(), 3, padding=1, backend="triton")
        assert out.dtype == torch.float64
        torch.testing.assert_close(out, reference.aggregation(x.double(), w.double(), 3, padding=1))
