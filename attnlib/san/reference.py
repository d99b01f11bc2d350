"""SAN's aggregation and subtraction in plain PyTorch (unfold-based, autograd, any device): the ground truth.

Notation (Zhao, Jia & Koltun 2020, official ``lib/sa/functions``): input x (B, C, H, W), a K x K footprint with
stride s, padding p and dilation d. Output pixel (i, j) reads at tap (kh, kw) the padded input at
(i·s − p + kh·d, j·s − p + kw·d); taps are numbered t = kh·K + kw. Padding is zeros, or the mirror image of
``nn.ReflectionPad2d`` (``pad_mode="reflect"``). The *centre* of output pixel (i, j) is its centre tap
kh = kw = (K − 1) // 2, read through the same padding: the official forward kernels' definition, which is
x[i·s, j·s] whenever p = d·(K − 1) / 2, the padding SAN always uses.

These functions assume valid arguments; ``attnlib.san.ops`` validates them and dispatches between this
reference and the Triton kernels.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

PAD_MODES = ("zeros", "reflect")


def output_size(size: int, kernel_size: int, stride: int, padding: int, dilation: int) -> int:
    """Output length along one axis: ⌊(n + 2p − d·(K − 1) − 1) / s⌋ + 1 (as ``nn.Unfold``)."""
    return (size + 2 * padding - dilation * (kernel_size - 1) - 1) // stride + 1


def pad(x: torch.Tensor, padding: int, pad_mode: str = "zeros") -> torch.Tensor:
    """(B, C, H, W) -> (B, C, H + 2p, W + 2p), padded with zeros or by reflection (``nn.ReflectionPad2d``)."""
    if padding == 0:
        return x
    return F.pad(x, (padding,) * 4, mode="reflect" if pad_mode == "reflect" else "constant")


def unfold(x, kernel_size, stride=1, padding=0, dilation=1, pad_mode="zeros") -> torch.Tensor:
    """(B, C, H, W) -> (B, C, K·K, Ho, Wo): the padded input read by output (i, j) at tap kh·K + kw."""
    B, C, H, W = x.shape
    Ho, Wo = (output_size(n, kernel_size, stride, padding, dilation) for n in (H, W))
    cols = F.unfold(pad(x, padding, pad_mode), kernel_size, dilation=dilation, stride=stride)
    return cols.view(B, C, kernel_size * kernel_size, Ho, Wo)


def centre(x, kernel_size, stride=1, padding=0, dilation=1, pad_mode="zeros") -> torch.Tensor:
    """(B, C, H, W) -> (B, C, Ho, Wo): the padded input at each output pixel's centre tap ((K − 1) // 2)."""
    H, W = x.shape[-2:]
    Ho, Wo = (output_size(n, kernel_size, stride, padding, dilation) for n in (H, W))
    start = (kernel_size - 1) // 2 * dilation
    xp = pad(x, padding, pad_mode)
    return xp[
        ..., start : start + (Ho - 1) * stride + 1 : stride, start : start + (Wo - 1) * stride + 1 : stride
    ]


def aggregation(x, weight, kernel_size, stride=1, padding=0, dilation=1, pad_mode="zeros") -> torch.Tensor:
    """x (B, C, H, W), weight (B, Cw, K·K, Ho, Wo) with C % Cw == 0 -> (B, C, Ho, Wo).

    out[b, c, i, j] = Σ_t weight[b, c mod Cw, t, i, j] · unfold(x)[b, c, t, i, j]
    """
    B, C = x.shape[:2]
    Cw, KK, Ho, Wo = weight.shape[1:]
    cols = unfold(x, kernel_size, stride, padding, dilation, pad_mode)  # (B, C, K·K, Ho, Wo)
    out = (cols.view(B, C // Cw, Cw, KK, Ho, Wo) * weight.unsqueeze(1)).sum(
        3
    )  # channel c = g·Cw + (c mod Cw)
    return out.view(B, C, Ho, Wo)


def subtraction2(x1, x2, kernel_size, stride=1, padding=0, dilation=1, pad_mode="zeros") -> torch.Tensor:
    """x1, x2 (B, C, H, W) -> (B, C, K·K, Ho, Wo): x1 at the centre minus x2 at each tap."""
    return centre(x1, kernel_size, stride, padding, dilation, pad_mode).unsqueeze(2) - unfold(
        x2, kernel_size, stride, padding, dilation, pad_mode
    )


def subtraction(x, kernel_size, stride=1, padding=0, dilation=1, pad_mode="zeros") -> torch.Tensor:
    """x (B, C, H, W) -> (B, C, K·K, Ho, Wo): the centre pixel minus each neighbour."""
    return subtraction2(x, x, kernel_size, stride, padding, dilation, pad_mode)
