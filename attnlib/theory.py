"""Theorem 1 made executable: a self-attention layer that computes a given convolution.

Construction (Cordonnier et al., Lemma 1 and Lemma 2). For a K x K convolution with dilation d,
take N_h = K² heads and the isotropic quadratic encoding; head h = a·K + b (kernel tap (a, b)) gets

    Δ^(h) = d · (a − (K−1)/2, b − (K−1)/2),   score −α‖δ − Δ^(h)‖²,   W_qry = W_key = 0.

As α → ∞, softmax(A^(h)_{q,:}) is one-hot at the key q + Δ^(h) (Lemma 1's condition), and with
``values="input"`` (V^(h) = X) the layer computes Σ_h x[q + Δ^(h)] W^(h) + b, where the output slice
W^(h) = kernel[:, :, a, b]ᵀ is Lemma 1's per-head filter. That is exactly the cross-correlation
``F.conv2d`` computes. Zero "same" padding (padding = d·(K−1)/2): the paper notes attention keeps the
image size while a convolution pads, so we attend over an explicitly zero-padded grid and crop back.
In the encoding's parameters α = s²/2, i.e. ``spreads = √(2α)``.
"""

from __future__ import annotations

import copy
import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from attnlib.attention import MultiHeadSelfAttention2d, QuadraticEncoding
from attnlib.checks import check_positive_int
from attnlib.errors import ConfigError


class ConvAttention(nn.Module):
    """pad -> multi-head self-attention -> crop. x (B, H, W, C_in) -> (B, H, W, C_out)."""

    def __init__(self, attn: MultiHeadSelfAttention2d, pad: int):
        super().__init__()
        self.attn, self.pad = attn, pad

    def forward(self, x: Tensor) -> Tensor:
        p, (_, height, width, _) = self.pad, x.shape
        out = self.attn(F.pad(x, (0, 0, p, p, p, p)))  # zero-pad the grid (W and H axes)
        return out[:, p : p + height, p : p + width]

    def probabilities(self, height: int, width: int) -> Tensor:
        """Positional attention (heads, N_p, N_p) on the padded (H + 2p) x (W + 2p) grid."""
        p = self.pad
        return torch.softmax(self.attn.encoding.scores(height + 2 * p, width + 2 * p), dim=-1)


def _check_conv(conv: nn.Module) -> tuple[int, int]:
    """Validate the theorem's conditions; returns (K, dilation)."""
    if not isinstance(conv, nn.Conv2d):
        raise ConfigError("conv", type(conv).__name__, "torch.nn.Conv2d")
    kh, kw = conv.kernel_size
    if kh != kw or kh % 2 == 0:
        raise ConfigError("kernel_size", conv.kernel_size, "an odd square kernel (K, K)")
    if tuple(conv.stride) != (1, 1):
        raise ConfigError("stride", conv.stride, "(1, 1)")
    if conv.groups != 1:
        raise ConfigError("groups", conv.groups, "1")
    dh, dw = conv.dilation
    if dh != dw:
        raise ConfigError("dilation", conv.dilation, "equal dilations (d, d)")
    same = dh * (kh - 1) // 2
    if conv.padding != "same" and tuple(conv.padding) != (same, same):
        raise ConfigError("padding", conv.padding, f"'same' or ({same}, {same}) = dilation·(K−1)/2")
    if conv.padding_mode != "zeros":
        raise ConfigError("padding_mode", conv.padding_mode, "'zeros'")
    return kh, dh


def kernel_centers(kernel_size: int, dilation: int = 1) -> Tensor:
    """Δ^(h) for h = a·K + b: d·(a − (K−1)/2, b − (K−1)/2), shape (K², 2), row shift first."""
    r = (torch.arange(kernel_size) - (kernel_size - 1) // 2) * dilation
    return torch.cartesian_prod(r, r).to(torch.get_default_dtype())


@torch.no_grad()
def attention_from_conv(conv: nn.Conv2d, alpha: float, content: bool = False) -> ConvAttention:
    """A self-attention layer with K² heads whose output equals ``conv`` (Theorem 1).

    conv: ``nn.Conv2d`` with an odd square kernel K, stride 1, any (equal) dilation d, groups 1,
    bias or not, zero padding d·(K−1)/2 (or ``"same"``). Otherwise ConfigError names the attribute.
    alpha: width α of the quadratic score −α‖δ − Δ‖² (larger is closer to the convolution).
    content: build the layer with a content term whose query / key weights are zero (the theorem's
    W_qry = W_key = 0) instead of a positional-only layer; the output is the same.

    Returns a module mapping x (B, H, W, C_in) to ≈ conv(x.permute(0, 3, 1, 2)).permute(0, 2, 3, 1),
    in conv's dtype and device, in eval mode.
    """
    k, d = _check_conv(conv)
    if not isinstance(alpha, int | float) or not math.isfinite(alpha) or alpha <= 0:
        raise ConfigError("alpha", alpha, "a finite number > 0")
    c_out, c_in = conv.out_channels, conv.in_channels
    heads = k * k
    encoding = QuadraticEncoding(heads, isotropic=True)
    attn = MultiHeadSelfAttention2d(
        c_in, heads, encoding=encoding, content=content, attn_dropout=0.0, values="input", out_dim=c_out
    )
    attn = attn.to(device=conv.weight.device, dtype=conv.weight.dtype)
    encoding.centers.copy_(kernel_centers(k, d))
    encoding.spreads.fill_(math.sqrt(2.0 * alpha))  # α = s²/2
    if content:
        for lin in (attn.query, attn.key):
            lin.weight.zero_()
            lin.bias.zero_()
    # out.weight[o, h·C_in + c] = kernel[o, c, a, b], h = a·K + b   (Lemma 1: W^(h) = kernel slice)
    attn.out.weight.copy_(conv.weight.permute(0, 2, 3, 1).reshape(c_out, heads * c_in))
    if conv.bias is not None:
        attn.out.bias.copy_(conv.bias)
    else:
        attn.out.bias.zero_()
    return ConvAttention(attn, pad=d * (k - 1) // 2).eval()


def conv_reference(conv: nn.Conv2d, x: Tensor) -> Tensor:
    """The convolution on channels-last input: x (B, H, W, C_in) -> (B, H, W, C_out)."""
    return conv(x.permute(0, 3, 1, 2)).permute(0, 2, 3, 1)


@torch.no_grad()
def conv_relative_error(conv: nn.Conv2d, alpha: float, x: Tensor, content: bool = False) -> float:
    """‖MHSA(x) − Conv(x)‖_F / ‖Conv(x)‖_F for the constructed layer; x (B, H, W, C_in)."""
    ref = conv_reference(conv, x)
    out = attention_from_conv(conv, alpha, content)(x)
    return (torch.linalg.vector_norm(out - ref) / torch.linalg.vector_norm(ref)).item()


def alpha_sweep(conv: nn.Conv2d, alphas, x: Tensor) -> list[float]:
    """Relative error (see ``conv_relative_error``) for each α in ``alphas``: the error falls as α grows."""
    return [conv_relative_error(conv, float(a), x) for a in alphas]


@torch.no_grad()
def head_attention_maps(
    layer: ConvAttention, height: int, width: int, query: tuple[int, int] | None = None
) -> Tensor:
    """Attention of every head for one query pixel: (heads, H, W) on the unpadded image.

    query: (row, col) in the H x W image (default: its centre). Keys in the zero padding are dropped
    (their value is zero); at large α each map is one-hot at query + Δ^(h).
    """
    p = layer.pad
    qi, qj = (height // 2, width // 2) if query is None else query
    if not (0 <= qi < height and 0 <= qj < width):
        raise ConfigError("query", query, f"a pixel (row, col) inside {height}x{width}")
    hp, wp = height + 2 * p, width + 2 * p
    probs = layer.probabilities(height, width)[:, (qi + p) * wp + (qj + p)]  # (heads, N_p)
    return probs.reshape(-1, hp, wp)[:, p : p + height, p : p + width]


# ---------------------------------------------------------------------------------------------------------
# Learning a convolution (the theory chapter's last experiment; added for the book)
@dataclass
class ConvImitation:
    """Trace of ``learn_convolution``: recorded ``steps`` (T,), relative error ``loss`` (T,), head
    ``centers`` (T, heads, 2) as (row, column) shifts, widths ``alpha`` (T, heads), the kernel grid
    ``targets`` (K², 2) and the trained ``layer``."""

    steps: Tensor
    loss: Tensor
    centers: Tensor
    alpha: Tensor
    targets: Tensor
    layer: ConvAttention


def learn_convolution(
    conv: nn.Conv2d,
    *,
    steps: int = 600,
    image_size: int = 8,
    batch: int = 8,
    lr: float = 0.05,
    weight_decay: float = 1.0,
    center_std: float = 1.0,
    seed: int = 0,
    record_every: int = 10,
    dtype: torch.dtype = torch.float64,
) -> ConvImitation:
    """Train a positional-only, isotropic quadratic attention layer with K² heads to imitate ``conv``.

    Loss on fresh Gaussian images x (batch, image_size, image_size, C_in) at every step:
        ‖MHSA(x) − Conv(x)‖² / ‖Conv(x)‖²,
    minimised with AdamW (learning rate ``lr``). Interior pixels are matched exactly by *any* invertible
    mixture P of the kernel taps (Σ_h P_h(t) W^(h) = kernel tap t), so the loss alone does not pull the
    centres onto the grid; decoupled weight decay on the filters W^(h) (``weight_decay``; none on centres
    and spreads) prefers the best-conditioned mixture, a one-to-one assignment of heads to taps, i.e. the
    paper's construction. Centres start from N(0, center_std²). Uses its own RNG (``seed``). Runs in
    ``dtype`` (``conv`` is copied, not changed): float64 by default, because without weight decay the flat
    directions let a 1e-7 change of the kernel move the final loss by 3x in float32 (another CPU's summation
    order does as much: 1.2e-4 on an AVX-512 machine, 7.3e-4 on an AVX2 one), while in float64 a 1e-12 change
    moves it by 0.2%.
    """
    k, d = _check_conv(conv)
    _check_counts(steps=steps, image_size=image_size, batch=batch, record_every=record_every)
    heads = k * k
    conv = copy.deepcopy(conv).to(dtype)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        encoding = QuadraticEncoding(heads, isotropic=True, center_std=center_std)
        attn = MultiHeadSelfAttention2d(
            conv.in_channels,
            heads,
            encoding=encoding,
            content=False,
            attn_dropout=0.0,
            values="input",
            out_dim=conv.out_channels,
        )
        layer = ConvAttention(attn, pad=d * (k - 1) // 2).to(dtype)
        optimizer = torch.optim.AdamW(
            [
                {"params": [encoding.centers, encoding.spreads], "weight_decay": 0.0},
                {"params": attn.out.parameters(), "weight_decay": weight_decay},
            ],
            lr=lr,
        )

        def loss() -> Tensor:
            x = torch.randn(batch, image_size, image_size, conv.in_channels, dtype=dtype)
            with torch.no_grad():
                target = conv_reference(conv, x)
            return (layer(x) - target).pow(2).sum() / target.pow(2).sum()

        def heads_now() -> tuple[Tensor, Tensor]:
            return encoding.centers.detach().clone(), encoding.alpha().detach().clone()

        rec_steps, rec_loss, rec_centers, rec_alpha = _optimise(
            optimizer, loss, heads_now, steps, record_every
        )
    return ConvImitation(
        torch.tensor(rec_steps),
        torch.tensor(rec_loss),
        torch.stack(rec_centers),
        torch.stack(rec_alpha),
        kernel_centers(k, d).to(dtype),
        layer.eval(),
    )


def _check_counts(**counts) -> None:
    for name, value in counts.items():
        check_positive_int(name, value)


def _optimise(optimizer, loss, recorded, steps: int, record_every: int) -> tuple[list, ...]:
    """`steps` updates of `optimizer` on `loss()` (fresh data at every call). At every `record_every`-th
    step and after the last update: the step, the loss and the values of `recorded()` (a tuple), returned
    as columns: (steps, losses, *recorded columns). On one CPU thread (restored after): the tensors are
    tiny, so a second thread only adds a barrier per operation, which costs seconds per run where the cores
    are shared (48 s against 2.6 s for `learn_shift` in a Jupyter kernel beside two trainings), and the
    result no longer depends on the caller's thread count."""
    rows = []
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        for step in range(steps + 1):
            value = loss()
            if step % record_every == 0 or step == steps:
                rows.append((step, value.item(), *recorded()))
            if step == steps:
                break
            optimizer.zero_grad()
            value.backward()
            optimizer.step()
    finally:
        torch.set_num_threads(threads)
    return tuple(list(column) for column in zip(*rows, strict=True))


# ---------------------------------------------------------------------------------------------------------
# Learning a shift from the paper's small initialisation (chapter 2: why budget-trained learned maps are flat)
INITS = ("paper", "default")


@dataclass
class ShiftLearning:
    """Trace of ``learn_shift``: recorded ``steps`` (T,), relative error ``loss`` (T,) and ``target``
    (T,), the attention probability the middle pixel puts on the pixel at the shift (uniform: 1/N)."""

    steps: Tensor
    loss: Tensor
    target: Tensor


def learn_shift(
    *,
    shift: tuple[int, int] = (0, 1),
    init: str = "paper",
    steps: int = 600,
    size: int = 8,
    dim: int = 16,
    batch: int = 16,
    lr: float = 0.1,
    momentum: float = 0.9,
    seed: int = 0,
    record_every: int = 5,
    dtype: torch.dtype = torch.float64,
) -> ShiftLearning:
    """Train one positional-only learned-2D attention head to copy, at every pixel, the pixel at ``shift``.

    Target out[i, j] = x[i + δ₁, j + δ₂] on fresh Gaussian images x (batch, size, size, dim), pixels whose
    source lies outside the image not scored; loss ‖out − target‖² / ‖target‖², SGD with momentum (the
    budget's optimiser). ``init="paper"``: every weight from N(0, 0.02²) as in the paper's models
    (``init_bert_weights``), so the head scores w_hᵀ r_δ multiply two small factors and start near zero
    (uniform attention); ``"default"``: PyTorch's default initialisation. Uses its own RNG (``seed``).
    Runs in ``dtype`` (weights drawn as above, then cast): float64 by default, so that the curve does not
    depend on the CPU's summation order (in float32 an AVX2 and an AVX-512 machine drew different figures).
    """
    from attnlib.attention import Learned2DEncoding
    from attnlib.models.paper import init_bert_weights

    if init not in INITS:
        raise ConfigError("init", init, list(INITS))
    _check_counts(steps=steps, size=size, dim=dim, batch=batch, record_every=record_every)
    if len(shift) != 2 or not all(isinstance(s, int) and abs(s) < size for s in shift):
        raise ConfigError("shift", shift, f"two integers (row, column) in -{size - 1}..{size - 1}")
    d1, d2 = shift
    rows, cols = slice(max(0, -d1), size - max(0, d1)), slice(max(0, -d2), size - max(0, d2))
    source_rows, source_cols = slice(rows.start + d1, rows.stop + d1), slice(cols.start + d2, cols.stop + d2)
    query = (size // 2) * size + size // 2
    key = (size // 2 + d1) * size + size // 2 + d2
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        encoding = Learned2DEncoding(1, dim, max_pos=size)
        layer = MultiHeadSelfAttention2d(dim, 1, encoding=encoding, content=False, attn_dropout=0.0)
        if init == "paper":
            layer.apply(init_bert_weights)
        layer = layer.to(dtype)
        optimizer = torch.optim.SGD(layer.parameters(), lr=lr, momentum=momentum)

        def loss() -> Tensor:
            x = torch.randn(batch, size, size, dim, dtype=dtype)
            target = x[:, source_rows, source_cols]
            out = layer(x)[:, rows, cols]  # out[i, j] ≈ x[i + δ₁, j + δ₂]
            return (out - target).pow(2).sum() / target.pow(2).sum()

        @torch.no_grad()
        def target_probability() -> tuple[float]:
            return (encoding.scores(size, size).softmax(-1)[0, query, key].item(),)

        rec_steps, rec_loss, rec_target = _optimise(optimizer, loss, target_probability, steps, record_every)
    return ShiftLearning(
        torch.tensor(rec_steps), torch.tensor(rec_loss, dtype=dtype), torch.tensor(rec_target, dtype=dtype)
    )
