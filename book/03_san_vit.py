# ---
# jupyter:
#   jupytext:
#     formats: ipynb,py:percent
#     text_representation:
#       extension: .py
#       format_name: percent
#       format_version: '1.3'
#       jupytext_version: 1.19.7
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# (chapter-san-vit)=
# # Two other ways to attend: SAN and ViT
#
# The [Re] report {cite}`varma2021re` tests its Hierarchical Attention ({ref}`chapter-hierarchical`) on two more families of
# attention models besides the paper's: the Self-Attention Networks (SAN) of {cite:t}`zhao2020exploring`,
# which attend inside a small window like a convolution does, and the Vision Transformer (ViT) of
# {cite:t}`dosovitskiy2021image`, which attends globally over image patches. This chapter explains how each
# attends, and the operations and GPU kernels SAN needs. Nothing here needs trained models: the checks run
# live on random tensors, and the attention maps of trained models are in {ref}`chapter-hierarchical` and
# {ref}`appendix-maps`.

# %% tags=["remove-input"]
import pandas as pd
import torch
import torch.nn.functional as F

import attnbook as book
from attnbook import viz
from attnlib.analysis.costs import count_parameters
from attnlib.san import ops
from attnlib.san.model import SANConfig

# %% tags=["parameters"]
preset = "budget"  # paper | budget | smoke: the model sizes counted below
device = "auto"  # auto | cpu | cuda | cuda:N: where the operations run
seed = 0  # seed of the random tensors

# %% tags=["remove-input"]
params = book.check_params(preset=preset, device=device, seed=seed)

# %% tags=["remove-input"]
_ = torch.manual_seed(params.seed)
dev = torch.device(params.device)

# %% tags=["hide-input"]
viz.set_style()
book.show(
    viz.attention_scopes(),
    "fig-scopes",
    "Where one query pixel (filled square) may attend, on a 9 × 9 image (a schematic, no trained model). "
    "Left, SAN: only the K × K window around it (K = 3), with weights computed from the features. Middle, "
    "ViT: every patch token (3 × 3-pixel patches here), the query's own patch outlined, with weights from "
    "content (shade: an example). Right, quadratic heads (chapters 1 and 2): each head attends to a "
    "Gaussian around its own fixed offset Δ from the query, the same for every image.",
)

# %% [markdown]
# ## SAN: attention inside a window
#
# A SAN layer computes, for every pixel $i$ and its $K \times K$ footprint $\mathcal R(i)$,
#
# $$
# y_i = \sum_{j \in \mathcal R(i)} \alpha\big(x_{\mathcal R(i)}\big)_j \odot \beta(x_j),
# $$
#
# where $\beta$ is a $1 \times 1$ convolution (the values) and the weights $\alpha$ are computed from the
# features themselves, one weight per *group* of `share_planes` channels. Two forms of $\alpha$:
#
# - **pairwise**: $\alpha(x_i, x_j) = \mathrm{softmax}_j\, \gamma\big([\varphi(x_i) - \psi(x_j),\, p_i - p_j]\big)$,
#   a relation between the centre pixel and each neighbour (a *subtraction* of query and key features,
#   with the difference of positional encodings $p$), normalised over the window;
# - **patchwise**: $\alpha(x_{\mathcal R(i)}) = \gamma\big([\varphi(x_i), \psi(x_j) \text{ for } j \in \mathcal R(i)]\big)$,
#   a function of the whole patch, able to weigh each neighbour by everything it sees; these weights
#   are not normalised (no softmax over the window, as in the official code).
#
# If $\alpha$ did not depend on the features, the layer would be a convolution whose kernel is shared by
# channel groups: SAN keeps the locality of a convolution and lets its kernel vary with the content, pixel
# by pixel. The [Re] configuration has four stages of two SA bottleneck blocks with $K = 3$.
#
# ### The operations
#
# Both forms reduce to three operations on a window (`attnlib.san.ops`, semantics of the official code):
#
# - `aggregation(x, w)`: $\mathrm{out}[c, i] = \sum_{t} w[c \bmod C_w, t, i]\; x[c, i + t]$ over the $K^2$ taps $t$;
# - `subtraction(x)`: $x[c, i] - x[c, i + t]$ for every tap, a $(C, K^2, H, W)$ tensor;
# - `subtraction2(x_1, x_2)`: $x_1[c, i] - x_2[c, i + t]$ (query minus key features).
#
# Taps outside the image read zero or the mirrored pixel. A check of the statement above: with the same
# weights at every pixel, `aggregation` is a grouped convolution.

# %% tags=["hide-input"]
x = torch.randn(2, 8, 12, 12, dtype=torch.float64, device=dev)
kernel = torch.randn(2, 9, dtype=torch.float64, device=dev)  # Cw = 2 weight groups, 3 × 3 taps
weight = kernel.view(1, 2, 9, 1, 1).expand(2, 2, 9, 12, 12)  # the same weights at every pixel
out = ops.aggregation(x, weight, 3, padding=1, backend="torch")
conv = F.conv2d(
    x, kernel.view(2, 3, 3).repeat(4, 1, 1).unsqueeze(1), padding=1, groups=8
)  # channel c: kernel c mod 2
book.glue_text("san_conv_diff", (out - conv).abs().max().item(), "{:.1e}")

# %% [markdown]
# The largest difference between the two is {glue:text}`san_conv_diff` (float64).
#
# ### Kernels that never unfold
#
# The plain PyTorch reference (`attnlib.san.reference`) computes these operations by *unfolding* the
# input into a $(B, C, K^2, H, W)$ tensor: simple and exact, but $K^2 = 9$ times the memory of the input,
# at every layer, kept for the backward pass. The official SAN code avoided this with hand-written CUDA
# kernels compiled through CuPy. `attnlib.san.kernels` does the same in Triton {cite}`tillet2019triton`:
# each program computes a block of output elements and walks the $K \times K$ taps in registers, so the
# unfolded tensor never exists; input gradients are *gathered* (each input pixel sums over the outputs that
# read it) instead of scattered with atomics, so results are deterministic. Triton compiles the kernels for
# the GPU at first use: users need no CUDA toolkit. `backend="auto"` picks Triton for CUDA tensors and the
# reference elsewhere; the tests run the kernels on the CPU through Triton's interpreter.
#
# The memory the reference would unfold for the SA layers of each SAN stage (float32, the [Re] batch of 40):

# %% tags=["hide-input"]
cfg = SANConfig()
rows = []
for stage, (width, k) in enumerate(zip(cfg.widths, cfg.kernels, strict=True)):
    side = 32 // 2 ** (stage + 1)  # a 2 × 2 max-pool before every stage
    mid = width // cfg.mid_reduction  # channels aggregated by the SA layer
    feature = 40 * mid * side * side * 4 / 2**20
    rows.append(
        {
            "stage": stage + 1,
            "grid": f"{side}×{side}",
            "SA channels": mid,
            "input of one SA layer (MiB)": round(feature, 2),
            "unfolded by the reference (MiB)": round(feature * k * k, 2),
        }
    )
book.show_table(pd.DataFrame(rows), caption="Unfolded tensor of SAN's aggregation, per SA layer")

# %% tags=["remove-input"]
if dev.type == "cuda":
    xs = torch.randn(4, 64, 16, 16, device=dev, requires_grad=True)
    ws = torch.randn(4, 8, 9, 16, 16, device=dev).softmax(2).requires_grad_()
    outs = [ops.aggregation(xs, ws, 3, padding=1, backend=b) for b in ("torch", "triton")]
    grads = [torch.autograd.grad(o.square().sum(), (xs, ws)) for o in outs]
    diff = max(
        (outs[0] - outs[1]).abs().max().item(),
        *((a - b).abs().max().item() for a, b in zip(*grads, strict=True)),
    )
    book.glue_text("san_triton_diff", diff, "{:.1e}")
else:  # the build machine has no GPU: the kernels are checked by the tests, through Triton's interpreter
    book.glue_str("san_triton_diff", "not measured (no GPU in this build)")

# %% [markdown]
# The Triton kernels against the reference, values and gradients on a GPU, largest difference:
# {glue:text}`san_triton_diff`. The kernel benchmark (`python -m attnlib san-bench`) times both backends side by side
# at the shapes of every stage.
#
# ## ViT: global attention over patches
#
# ViT cuts the image into $p \times p$ patches, embeds each linearly, adds a learned *absolute* position
# embedding, and applies pre-norm transformer blocks ($x + \mathrm{MHSA}(\mathrm{LN}(x))$, then
# $x + \mathrm{MLP}(\mathrm{LN}(x))$). Its attention is content-only: $q \cdot k / \sqrt{d}$, with no relative
# positional term, so unlike the paper's models it has no built-in notion of "the pixel one step to the
# left"; any locality must be learned through the position embeddings. The [Re] configuration feeds ViT
# the output of a small ResNet stem and takes $2 \times 2$ patches, a $16 \times 16$ token grid like the
# paper's models, with 6 layers, 9 heads, hidden size 400 and MLP 512. Our runs are the network as the [Re]
# code runs it: each residual added to the *normalised* input, $\mathrm{LN}(x) + \mathrm{MHSA}(\mathrm{LN}(x))$,
# no final layer norm, PyTorch's default initialisation, and a "cls" slot of fresh uniform noise drawn at
# every forward, attending like a patch and averaged with the patches by the classifier (the intended
# forms are options of `attnlib.models.vit`).
#
# ## Sizes, and what HA saves
#
# Parameter counts of the models and their Hierarchical-Attention variants ({ref}`chapter-hierarchical`), at the paper's
# settings and at the chosen preset, counted from the registry:

# %% tags=["hide-input"]
names = ["san_pairwise", "san_pairwise_ha", "san_patchwise", "san_patchwise_ha", "vit", "vit_ha"]
presets = list(dict.fromkeys(["paper", params.preset]))
sizes = pd.DataFrame(
    {f"parameters at preset {p}": [count_parameters(n, p) for n in names] for p in presets},
    index=[book.title(n) for n in names],
)
book.show_table(
    sizes.map(lambda v: f"{v:,}").reset_index(names="model"),  # whole counts: HA's small ones differ too
    caption="Trainable parameters of SAN, ViT and their HA variants, counted from the registry.",
)
ratio = sizes.iloc[1::2].to_numpy() / sizes.iloc[0::2].to_numpy()
book.glue_text("san_vit_ha_ratio_min", float(ratio[:, 0].min()))
book.glue_text("san_vit_ha_ratio_max", float(ratio[:, 0].max()))

# %% [markdown]
# At the paper's settings the HA variants keep between {glue:text}`san_vit_ha_ratio_min` and
# {glue:text}`san_vit_ha_ratio_max` of the parameters: SAN's HA is the [Re] hierarchical network, one
# layer of two bottlenecks at a constant 256 channels applied in 4 passes without pooling ({ref}`chapter-hierarchical`), and
# ViT's shares one block across all layers.
#
# ## Findings
#
# SAN keeps the locality of a convolution and lets its kernel vary with the content: with weights that do
# not depend on the pixel, its aggregation is a grouped convolution (largest difference
# {glue:text}`san_conv_diff` in float64). Its plain formulation unfolds every window, at $K^2$ times the
# memory of its input per layer, which attnlib's Triton kernels avoid (their largest difference from the
# reference: {glue:text}`san_triton_diff`). ViT attends globally and has no relative positional term, so
# any locality it shows must be learned. Their Hierarchical-Attention variants keep
# {glue:text}`san_vit_ha_ratio_min` to {glue:text}`san_vit_ha_ratio_max` of the parameters at the paper's
# settings; {ref}`chapter-hierarchical` measures what that costs in accuracy.
