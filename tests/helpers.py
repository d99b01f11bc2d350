"""What several test files share: the tiny paper classifier, and the check that one implementation of an
operation (a backend, a fast path) equals another in values and gradients.

Imported as `from helpers import ...` (pytest puts tests/ on sys.path; so does running a test file as a
script, as test_ddp's torchrun workers do)."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import torch

# The paper classifier at its smallest useful size: 2 layers, width 16, 4 heads, 4x4 space-to-depth (8x8
# tokens on 32x32 images), no dropout (so that runs compare exactly).
TINY_PAPER = dict(layers=2, hidden=16, mlp=16, downsample=4, heads=4, dropout=0.0, attn_dropout=0.0)


def assert_same_values_and_grads(
    f: Callable,
    g: Callable,
    args: Sequence[torch.Tensor],
    *,
    reference_dtype: torch.dtype | None = None,
    atol: float | None = None,
    rtol: float | None = None,
    seed: int = 1,
) -> None:
    """f(*args) equals g(*args) and so do the gradients of one random upstream gradient with respect to
    every arg. With `reference_dtype`, g (the reference) runs on detached copies of args in that dtype
    and f's outputs and gradients are compared after conversion; f's gradients keep their args' dtypes.
    atol / rtol: torch.testing.assert_close's (None: its defaults for the dtypes compared)."""
    tol = {} if atol is None and rtol is None else dict(atol=atol, rtol=rtol)
    ref_args = list(args)
    if reference_dtype is not None:
        ref_args = [a.detach().to(reference_dtype).requires_grad_() for a in args]
    out, expected = f(*args), g(*ref_args)
    torch.testing.assert_close(out.to(expected.dtype), expected, **tol)
    generator = torch.Generator().manual_seed(seed)
    upstream = torch.randn(expected.shape, generator=generator, dtype=expected.dtype)
    grads = torch.autograd.grad(out, list(args), upstream.to(out.dtype))
    expected_grads = torch.autograd.grad(expected, ref_args, upstream)
    for arg, got, want in zip(args, grads, expected_grads, strict=True):
        assert got.dtype == arg.dtype
        torch.testing.assert_close(got.to(want.dtype), want, **tol)
