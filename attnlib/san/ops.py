"""Public SAN operations with backend dispatch: ``aggregation``, ``subtraction``, ``subtraction2``.

Semantics: see ``attnlib.san.reference``. Backends:
- ``"torch"``: the unfold-based reference (autograd, any device);
- ``"triton"``: the kernels of ``attnlib.san.kernels`` (CUDA tensors, or CPU tensors under ``TRITON_INTERPRET=1``
  set before that module is first imported);
- ``"auto"``: Triton for CUDA tensors when Triton is installed, the reference otherwise.
Triton is imported lazily, so ``import attnlib.san`` works without it or a GPU.
"""

from __future__ import annotations

from functools import cache

import torch

from attnlib.errors import ConfigError
from attnlib.san import reference
from attnlib.san.reference import PAD_MODES, output_size

BACKENDS = ("auto", "torch", "triton")


# ---------------------------------------------------------------------------------------------------------------
# Validation


def _check_int(name: str, value, minimum: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ConfigError(name, value, f"an int >= {minimum}")


def _check_input(name: str, x) -> None:
    if not isinstance(x, torch.Tensor) or x.dim() != 4 or not x.is_floating_point():
        shape = tuple(x.shape) if isinstance(x, torch.Tensor) else type(x).__name__
        raise ConfigError(name, shape, "a floating-point tensor of shape (B, C, H, W)")


def _geometry(x, kernel_size, stride, padding, dilation, pad_mode) -> tuple[int, int]:
    """Validate the window arguments against x (B, C, H, W); return the output size (Ho, Wo)."""
    _check_int("kernel_size", kernel_size, 1)
    _check_int("stride", stride, 1)
    _check_int("padding", padding, 0)
    _check_int("dilation", dilation, 1)
    if pad_mode not in PAD_MODES:
        raise ConfigError("pad_mode", pad_mode, " | ".join(map(repr, PAD_MODES)))
    H, W = x.shape[-2:]
    if pad_mode == "reflect" and padding >= min(H, W):
        raise ConfigError("padding", padding, f"< min(H, W) = {min(H, W)} with pad_mode='reflect'")
    Ho, Wo = (output_size(n, kernel_size, stride, padding, dilation) for n in (H, W))
    if Ho < 1 or Wo < 1:
        raise ConfigError(
            "kernel_size", kernel_size, f"a window (with dilation and padding) that fits in {H}x{W}"
        )
    return Ho, Wo


def _use_triton(backend: str, *tensors: torch.Tensor) -> bool:
    if backend not in BACKENDS:
        raise ConfigError("backend", backend, " | ".join(map(repr, BACKENDS)))
    devices = {t.device for t in tensors}
    if len(devices) > 1:
        raise ConfigError("device", sorted(map(str, devices)), "all inputs on one device")
    cuda = tensors[0].is_cuda
    if backend == "torch" or (backend == "auto" and not (cuda and _triton_installed())):
        return False
    if not _triton_installed():
        raise ConfigError("backend", backend, "'torch' or 'auto' (triton is not installed)")
    if not cuda and not _kernels().INTERPRETED:
        raise ConfigError(
            "backend",
            backend,
            "'torch' or 'auto' for CPU tensors; 'triton' needs CUDA tensors, or TRITON_INTERPRET=1 set "
            "before attnlib.san.kernels is first imported",
        )
    return True


@cache
def _triton_installed() -> bool:
    try:
        import triton  # noqa: F401
    except ImportError:
        return False
    return True


def _kernels():
    from attnlib.san import kernels  # lazy: needs triton

    return kernels


# ---------------------------------------------------------------------------------------------------------------
# Autograd functions (Triton path)


class _Aggregation(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, weight, kernel_size, stride, padding, dilation, reflect):
        ctx.window = (kernel_size, stride, padding, dilation, reflect)
        ctx.save_for_backward(x, weight)
        return _kernels().aggregation_forward(x, weight, *ctx.window)

    @staticmethod
    def backward(ctx, grad_out):
        x, weight = ctx.saved_tensors
        need_x, need_w = ctx.needs_input_grad[:2]
        grads = _kernels().aggregation_backward(grad_out.contiguous(), x, weight, *ctx.window, need_x, need_w)
        return (*grads, None, None, None, None, None)


class _Subtraction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, kernel_size, stride, padding, dilation, reflect, ho, wo):
        ctx.window, ctx.shape = (kernel_size, stride, padding, dilation, reflect), x.shape
        return _kernels().subtraction_forward(x, x, *ctx.window, ho, wo)

    @staticmethod
    def backward(ctx, grad_out):
        grad_x = _kernels().subtraction_backward(grad_out.contiguous(), ctx.shape, *ctx.window, same=True)
        return grad_x, None, None, None, None, None, None, None


class _Subtraction2(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x1, x2, kernel_size, stride, padding, dilation, reflect, ho, wo):
        ctx.window, ctx.shape = (kernel_size, stride, padding, dilation, reflect), x1.shape
        return _kernels().subtraction_forward(x1, x2, *ctx.window, ho, wo)

    @staticmethod
    def backward(ctx, grad_out):
        grads = _kernels().subtraction_backward(grad_out.contiguous(), ctx.shape, *ctx.window, same=False)
        return (*grads, None, None, None, None, None, None, None)


# ---------------------------------------------------------------------------------------------------------------
# Public functions


def aggregation(x, weight, kernel_size, stride=1, padding=0, dilation=1, pad_mode="zeros", backend="auto"):
    """Weighted sum over each K x K window, weights shared by channel groups.

    x (B, C, H, W), weight (B, Cw, K·K, Ho, Wo) with C % Cw == 0 -> (B, C, Ho, Wo):
    out[b, c, i, j] = Σ_{kh,kw} weight[b, c mod Cw, kh·K + kw, i, j] · x[b, c, i·s − p + kh·d, j·s − p + kw·d]
    """
    _check_input("x", x)
    Ho, Wo = _geometry(x, kernel_size, stride, padding, dilation, pad_mode)
    B, C = x.shape[:2]
    if not isinstance(weight, torch.Tensor) or weight.dim() != 5:
        raise ConfigError(
            "weight", getattr(weight, "shape", weight), "a tensor of shape (B, Cw, K*K, Ho, Wo)"
        )
    Cw = weight.shape[1]
    expected = (B, Cw, kernel_size * kernel_size, Ho, Wo)
    if tuple(weight.shape) != expected or Cw == 0 or C % Cw:
        raise ConfigError(
            "weight",
            tuple(weight.shape),
            f"(B={B}, Cw dividing C={C}, K*K={kernel_size**2}, Ho={Ho}, Wo={Wo})",
        )
    if not _use_triton(backend, x, weight):
        return reference.aggregation(x, weight, kernel_size, stride, padding, dilation, pad_mode)
    dtype = torch.promote_types(x.dtype, weight.dtype)
    x, weight = x.to(dtype).contiguous(), weight.to(dtype).contiguous()
    return _Aggregation.apply(x, weight, kernel_size, stride, padding, dilation, pad_mode == "reflect")


def subtraction(x, kernel_size, stride=1, padding=0, dilation=1, pad_mode="zeros", backend="auto"):
    """x (B, C, H, W) -> (B, C, K·K, Ho, Wo): the centre pixel minus each neighbour in its K x K window.

    out[b, c, kh·K + kw, i, j] = x[b, c, centre(i, j)] − x[b, c, i·s − p + kh·d, j·s − p + kw·d]
    """
    _check_input("x", x)
    Ho, Wo = _geometry(x, kernel_size, stride, padding, dilation, pad_mode)
    if not _use_triton(backend, x):
        return reference.subtraction(x, kernel_size, stride, padding, dilation, pad_mode)
    window = (kernel_size, stride, padding, dilation, pad_mode == "reflect")
    return _Subtraction.apply(x.contiguous(), *window, Ho, Wo)


def subtraction2(x1, x2, kernel_size, stride=1, padding=0, dilation=1, pad_mode="zeros", backend="auto"):
    """x1, x2 (B, C, H, W) -> (B, C, K·K, Ho, Wo): x1 at the centre minus x2 at each neighbour.

    out[b, c, kh·K + kw, i, j] = x1[b, c, centre(i, j)] − x2[b, c, i·s − p + kh·d, j·s − p + kw·d]
    """
    _check_input("x1", x1)
    _check_input("x2", x2)
    if x1.shape != x2.shape:
        raise ConfigError("x2", tuple(x2.shape), f"the shape of x1, {tuple(x1.shape)}")
    Ho, Wo = _geometry(x1, kernel_size, stride, padding, dilation, pad_mode)
    if not _use_triton(backend, x1, x2):
        return reference.subtraction2(x1, x2, kernel_size, stride, padding, dilation, pad_mode)
    dtype = torch.promote_types(x1.dtype, x2.dtype)
    window = (kernel_size, stride, padding, dilation, pad_mode == "reflect")
    return _Subtraction2.apply(x1.to(dtype).contiguous(), x2.to(dtype).contiguous(), *window, Ho, Wo)
