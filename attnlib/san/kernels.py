"""Triton kernels for SAN's aggregation and subtraction, forward and backward.

Same semantics as ``attnlib.san.reference`` (read its docstring for the notation). No kernel materialises the
unfolded (B, C, K·K, Ho, Wo) input: each program handles BLOCK elements of a flattened output (or input, for
the input gradients) and walks the K x K taps in registers. Input gradients are *gathered* (each input pixel
sums over the outputs that read it, found by inverting the tap arithmetic, mirror images included under
reflect padding), so there are no atomics and results are deterministic.

Triton compiles these for the GPU at first use. On the CPU they run only under Triton's interpreter, and
``TRITON_INTERPRET=1`` is read when ``@triton.jit`` decorates a function: it must be set before this module is
first imported. ``INTERPRETED`` records whether it was.
"""

from __future__ import annotations

import os

import torch
import triton
import triton.language as tl

INTERPRETED = os.environ.get("TRITON_INTERPRET", "0") == "1"


# ---------------------------------------------------------------------------------------------------------------
# Index arithmetic along one axis, shared by all kernels.


@triton.jit
def _unflatten(idx, C, H, W):
    """(b, c, h, w) of a flat index into a contiguous (B, C, H, W) tensor."""
    return idx // (W * H * C), (idx // (W * H)) % C, (idx // W) % H, idx % W


@triton.jit
def _tap(o, k, size, STRIDE: tl.constexpr, PAD: tl.constexpr, DIL: tl.constexpr, REFLECT: tl.constexpr):
    """Input coordinate read by output coordinate o at tap k, and whether it lies inside the input."""
    i = o * STRIDE - PAD + k * DIL  # i = o·s − p + k·d
    if REFLECT:  # mirror without repeating the edge, as nn.ReflectionPad2d (needs p < size)
        i = tl.where(i < 0, -i, i)
        i = tl.where(i >= size, 2 * (size - 1) - i, i)
    inside = (i >= 0) & (i < size)
    return tl.where(inside, i, 0), inside


@triton.jit
def _reader(
    i, m: tl.constexpr, k, size, out_size, STRIDE: tl.constexpr, PAD: tl.constexpr, DIL: tl.constexpr
):
    """Inverse of _tap: the output coordinate whose tap k reads input coordinate i, and whether it exists.

    m picks the padded position that holds i: 0 is i itself; under reflect padding 1 is its mirror image
    before the start (−i) and 2 its mirror image after the end (2·(size − 1) − i). Only taps with k·d < p can
    reach the first, only taps with (K − 1 − k)·d < p the second: see _mirror_taps.
    """
    if m == 0:
        q = i
        ok = i >= 0
    elif m == 1:
        q = -i
        ok = (i > 0) & (i <= PAD)
    else:
        q = 2 * (size - 1) - i
        ok = (i < size - 1) & (i >= size - 1 - PAD)
    num = q + PAD - k * DIL  # = o·s
    o = num // STRIDE
    ok = ok & (num >= 0) & (num % STRIDE == 0) & (o < out_size)
    return tl.where(ok, o, 0), ok


def _mirror_taps(kernel_size: int, padding: int, dilation: int) -> int:
    """How many taps can read a mirror image (MIRROR_TAPS): the k with k·d < p (and as many at the other end)."""
    return min(kernel_size, -(-padding // dilation))


# ---------------------------------------------------------------------------------------------------------------
# Aggregation: out[b, c, i, j] = Σ_{kh,kw} w[b, c mod Cw, kh·K + kw, i, j] · x[b, c, i·s − p + kh·d, j·s − p + kw·d]


@triton.jit
def _aggregation_fwd(
    x_ptr, w_ptr, out_ptr, N, C, CW, H, W, HO, WO,
    K: tl.constexpr, STRIDE: tl.constexpr, PAD: tl.constexpr, DIL: tl.constexpr, REFLECT: tl.constexpr,
    BLOCK: tl.constexpr, ACC: tl.constexpr,
):  # fmt: skip
    idx = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)  # flat index into out (B, C, HO, WO)
    live = idx < N
    b, c, i, j = _unflatten(idx, C, HO, WO)
    x_base = (b * C + c) * H * W
    w_base = (b * CW + c % CW) * (K * K * HO * WO) + i * WO + j
    acc = tl.zeros([BLOCK], ACC)
    for kh in tl.static_range(K):
        h, h_in = _tap(i, kh, H, STRIDE, PAD, DIL, REFLECT)
        for kw in tl.static_range(K):
            w, w_in = _tap(j, kw, W, STRIDE, PAD, DIL, REFLECT)
            xv = tl.load(x_ptr + x_base + h * W + w, mask=live & h_in & w_in, other=0.0)
            wv = tl.load(w_ptr + w_base + (kh * K + kw) * HO * WO, mask=live, other=0.0)
            acc += xv.to(ACC) * wv.to(ACC)
    tl.store(out_ptr + idx, acc.to(out_ptr.dtype.element_ty), mask=live)


@triton.jit
def _aggregation_bwd_x(
    gout_ptr, w_ptr, gx_ptr, N, C, CW, H, W, HO, WO,
    K: tl.constexpr, STRIDE: tl.constexpr, PAD: tl.constexpr, DIL: tl.constexpr, MIRRORS: tl.constexpr,
    MIRROR_TAPS: tl.constexpr, BLOCK: tl.constexpr, ACC: tl.constexpr,
):  # fmt: skip
    # dx[b, c, h, w] = Σ over (i, j, kh, kw) whose tap reads (h, w) of w[b, c mod Cw, kh·K + kw, i, j] · dout[b, c, i, j]
    idx = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)  # flat index into x (B, C, H, W)
    live = idx < N
    b, c, h, w = _unflatten(idx, C, H, W)
    g_base = (b * C + c) * HO * WO
    w_base = (b * CW + c % CW) * (K * K * HO * WO)
    acc = tl.zeros([BLOCK], ACC)
    SKIP: tl.constexpr = K - MIRROR_TAPS  # taps m = 1 (2) leaves out at the end (start)
    for mh in tl.static_range(MIRRORS):
        for kh in tl.static_range(mh // 2 * SKIP, K - mh % 2 * SKIP):
            i, i_ok = _reader(h, mh, kh, H, HO, STRIDE, PAD, DIL)
            for mw in tl.static_range(MIRRORS):
                for kw in tl.static_range(mw // 2 * SKIP, K - mw % 2 * SKIP):
                    j, j_ok = _reader(w, mw, kw, W, WO, STRIDE, PAD, DIL)
                    ok = live & i_ok & j_ok
                    gv = tl.load(gout_ptr + g_base + i * WO + j, mask=ok, other=0.0)
                    wv = tl.load(w_ptr + w_base + (kh * K + kw) * HO * WO + i * WO + j, mask=ok, other=0.0)
                    acc += gv.to(ACC) * wv.to(ACC)
    tl.store(gx_ptr + idx, acc.to(gx_ptr.dtype.element_ty), mask=live)


@triton.jit
def _aggregation_bwd_w(
    gout_ptr, x_ptr, gw_ptr, N, C, CW, H, W, HO, WO,
    K: tl.constexpr, STRIDE: tl.constexpr, PAD: tl.constexpr, DIL: tl.constexpr, REFLECT: tl.constexpr,
    BLOCK: tl.constexpr, ACC: tl.constexpr,
):  # fmt: skip
    # dw[b, g, kh·K + kw, i, j] = Σ_{c ≡ g mod Cw} dout[b, c, i, j] · x[b, c, i·s − p + kh·d, j·s − p + kw·d]
    idx = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)  # flat index into (B, Cw, HO, WO)
    live = idx < N
    b, g, i, j = _unflatten(idx, CW, HO, WO)
    for kh in tl.static_range(K):
        h, h_in = _tap(i, kh, H, STRIDE, PAD, DIL, REFLECT)
        for kw in tl.static_range(K):
            w, w_in = _tap(j, kw, W, STRIDE, PAD, DIL, REFLECT)
            acc = tl.zeros([BLOCK], ACC)
            for r in range(0, C // CW):
                c = r * CW + g
                gv = tl.load(gout_ptr + ((b * C + c) * HO + i) * WO + j, mask=live, other=0.0)
                xv = tl.load(x_ptr + ((b * C + c) * H + h) * W + w, mask=live & h_in & w_in, other=0.0)
                acc += gv.to(ACC) * xv.to(ACC)
            out = gw_ptr + ((b * CW + g) * (K * K) + kh * K + kw) * (HO * WO) + i * WO + j
            tl.store(out, acc.to(gw_ptr.dtype.element_ty), mask=live)


# ---------------------------------------------------------------------------------------------------------------
# Subtraction: out[b, c, kh·K + kw, i, j] = x1[b, c, centre(i, j)] − x2[b, c, i·s − p + kh·d, j·s − p + kw·d]
# (subtraction is x1 = x2 = x).


@triton.jit
def _subtraction_fwd(
    x1_ptr, x2_ptr, out_ptr, N, C, H, W, HO, WO,
    K: tl.constexpr, STRIDE: tl.constexpr, PAD: tl.constexpr, DIL: tl.constexpr, REFLECT: tl.constexpr,
    BLOCK: tl.constexpr,
):  # fmt: skip
    idx = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)  # flat index into (B, C, HO, WO)
    live = idx < N
    j = idx % WO
    i = (idx // WO) % HO
    bc = idx // (WO * HO)  # b·C + c
    x_base = bc * H * W
    ch, ch_in = _tap(i, (K - 1) // 2, H, STRIDE, PAD, DIL, REFLECT)
    cw, cw_in = _tap(j, (K - 1) // 2, W, STRIDE, PAD, DIL, REFLECT)
    centre = tl.load(x1_ptr + x_base + ch * W + cw, mask=live & ch_in & cw_in, other=0.0)
    out_base = bc * (K * K * HO * WO) + i * WO + j
    for kh in tl.static_range(K):
        h, h_in = _tap(i, kh, H, STRIDE, PAD, DIL, REFLECT)
        for kw in tl.static_range(K):
            w, w_in = _tap(j, kw, W, STRIDE, PAD, DIL, REFLECT)
            xv = tl.load(x2_ptr + x_base + h * W + w, mask=live & h_in & w_in, other=0.0)
            tl.store(out_ptr + out_base + (kh * K + kw) * HO * WO, centre - xv, mask=live)


@triton.jit
def _subtraction_bwd(
    gout_ptr, gx1_ptr, gx2_ptr, N, C, H, W, HO, WO,
    K: tl.constexpr, STRIDE: tl.constexpr, PAD: tl.constexpr, DIL: tl.constexpr, MIRRORS: tl.constexpr,
    MIRROR_TAPS: tl.constexpr, SAME: tl.constexpr, BLOCK: tl.constexpr, ACC: tl.constexpr,
):  # fmt: skip
    # dx1[b, c, h, w] = Σ over (i, j) whose centre reads (h, w) of Σ_t dout[b, c, t, i, j]
    # dx2[b, c, h, w] = −Σ over (i, j, kh, kw) whose tap reads (h, w) of dout[b, c, kh·K + kw, i, j]
    # SAME (subtraction, x1 = x2): store dx1 + dx2 into gx1_ptr.
    idx = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)  # flat index into x (B, C, H, W)
    live = idx < N
    w = idx % W
    h = (idx // W) % H
    bc = idx // (W * H)
    g_base = bc * (K * K * HO * WO)
    acc1 = tl.zeros([BLOCK], ACC)
    acc2 = tl.zeros([BLOCK], ACC)
    SKIP: tl.constexpr = K - MIRROR_TAPS
    for mh in tl.static_range(MIRRORS):
        for kh in tl.static_range(mh // 2 * SKIP, K - mh % 2 * SKIP):
            i, i_ok = _reader(h, mh, kh, H, HO, STRIDE, PAD, DIL)
            for mw in tl.static_range(MIRRORS):
                for kw in tl.static_range(mw // 2 * SKIP, K - mw % 2 * SKIP):
                    j, j_ok = _reader(w, mw, kw, W, WO, STRIDE, PAD, DIL)
                    ok = live & i_ok & j_ok
                    offset = g_base + i * WO + j
                    acc2 -= tl.load(gout_ptr + offset + (kh * K + kw) * HO * WO, mask=ok, other=0.0).to(ACC)
                    if kh == (K - 1) // 2:
                        if kw == (K - 1) // 2:  # (i, j) reads (h, w) at its centre
                            for t in tl.static_range(K * K):
                                acc1 += tl.load(gout_ptr + offset + t * HO * WO, mask=ok, other=0.0).to(ACC)
    if SAME:
        tl.store(gx1_ptr + idx, (acc1 + acc2).to(gx1_ptr.dtype.element_ty), mask=live)
    else:
        tl.store(gx1_ptr + idx, acc1.to(gx1_ptr.dtype.element_ty), mask=live)
        tl.store(gx2_ptr + idx, acc2.to(gx2_ptr.dtype.element_ty), mask=live)


# ---------------------------------------------------------------------------------------------------------------
# Launchers. Arguments are validated by attnlib.san.ops; tensors must be contiguous and on one device.


def _mirrors(reflect: bool, padding: int) -> int:
    """Padded positions that can hold an input pixel (see _reader): itself, and its two mirror images."""
    return 3 if reflect and padding > 0 else 1


def _acc(dtype: torch.dtype):
    return tl.float64 if dtype == torch.float64 else tl.float32


def _grid(n: int, *tensors: torch.Tensor) -> tuple[tuple[int], int]:
    """(grid, BLOCK) for a flat range of n elements. The interpreter runs programs one at a time: one big block."""
    if max(n, *(t.numel() for t in tensors)) >= 2**31:
        raise ValueError("attnlib.san.kernels index with int32: tensors must have fewer than 2**31 elements")
    block = min(triton.next_power_of_2(max(n, 1)), 1 << 16 if INTERPRETED else 256)
    return (triton.cdiv(n, block),), block


def aggregation_forward(x, weight, kernel_size, stride, padding, dilation, reflect) -> torch.Tensor:
    """x (B, C, H, W), weight (B, Cw, K·K, Ho, Wo) -> (B, C, Ho, Wo)."""
    B, C, H, W = x.shape
    Cw, _, Ho, Wo = weight.shape[1:]
    out = x.new_empty(B, C, Ho, Wo)
    grid, block = _grid(out.numel(), x, weight)
    _aggregation_fwd[grid](
        x, weight, out, out.numel(), C, Cw, H, W, Ho, Wo,
        K=kernel_size, STRIDE=stride, PAD=padding, DIL=dilation, REFLECT=reflect, BLOCK=block, ACC=_acc(x.dtype),
    )  # fmt: skip
    return out


def aggregation_backward(
    grad_out, x, weight, kernel_size, stride, padding, dilation, reflect, need_x, need_w
):
    """Gradients (dx or None, dweight or None) of aggregation_forward."""
    B, C, H, W = x.shape
    Cw, _, Ho, Wo = weight.shape[1:]
    geometry = dict(K=kernel_size, STRIDE=stride, PAD=padding, DIL=dilation, ACC=_acc(x.dtype))
    grad_x = grad_w = None
    if need_x:
        grad_x = torch.empty_like(x)
        grid, block = _grid(grad_x.numel(), weight)
        _aggregation_bwd_x[grid](
            grad_out, weight, grad_x, grad_x.numel(), C, Cw, H, W, Ho, Wo,
            MIRRORS=_mirrors(reflect, padding), MIRROR_TAPS=_mirror_taps(kernel_size, padding, dilation), BLOCK=block,
            **geometry,
        )  # fmt: skip
    if need_w:
        grad_w = torch.empty_like(weight)
        n = B * Cw * Ho * Wo
        grid, block = _grid(n, x, weight)
        _aggregation_bwd_w[grid](
            grad_out, x, grad_w, n, C, Cw, H, W, Ho, Wo, REFLECT=reflect, BLOCK=block, **geometry
        )  # fmt: skip
    return grad_x, grad_w


def subtraction_forward(x1, x2, kernel_size, stride, padding, dilation, reflect, ho, wo) -> torch.Tensor:
    """x1, x2 (B, C, H, W) -> (B, C, K·K, Ho, Wo): x1 at the centre minus x2 at each tap."""
    B, C, H, W = x1.shape
    out = x1.new_empty(B, C, kernel_size * kernel_size, ho, wo)
    n = B * C * ho * wo
    grid, block = _grid(n, out)
    _subtraction_fwd[grid](
        x1, x2, out, n, C, H, W, ho, wo,
        K=kernel_size, STRIDE=stride, PAD=padding, DIL=dilation, REFLECT=reflect, BLOCK=block,
    )  # fmt: skip
    return out


def subtraction_backward(grad_out, shape, kernel_size, stride, padding, dilation, reflect, same):
    """Gradients of subtraction_forward: dx (same=True, x1 = x2) or the pair (dx1, dx2)."""
    B, C, H, W = shape
    Ho, Wo = grad_out.shape[-2:]
    grad_x1 = grad_out.new_empty(shape)
    grad_x2 = grad_x1 if same else grad_out.new_empty(shape)
    grid, block = _grid(grad_x1.numel(), grad_out)
    _subtraction_bwd[grid](
        grad_out, grad_x1, grad_x2, grad_x1.numel(), C, H, W, Ho, Wo,
        K=kernel_size, STRIDE=stride, PAD=padding, DIL=dilation, MIRRORS=_mirrors(reflect, padding),
        MIRROR_TAPS=_mirror_taps(kernel_size, padding, dilation), SAME=same, BLOCK=block, ACC=_acc(grad_out.dtype),
    )  # fmt: skip
    return grad_x1 if same else (grad_x1, grad_x2)
