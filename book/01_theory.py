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
# (chapter-theory)=
# # Self-attention can express any convolution
#
# This chapter states the main result of {cite:t}`cordonnier2020relationship` ({prf:ref}`thm-express`),
# follows its constructive proof step by step, and checks every step live with `attnlib.theory`: we build, from a given
# convolution, an attention layer that computes it, measure how close it gets, look at its attention
# maps, and finally let gradient descent discover the construction by itself.
# Nothing here needs trained models; the whole chapter runs in seconds on a CPU. It finds that the
# construction converges to the convolution at the rate the proof predicts ({numref}`fig-alpha`), that its
# heads become one-pixel shifts ({numref}`fig-heads`), and that training reaches the construction only
# with a nudge ({numref}`fig-learn-centres`).
#
# ## Multi-head self-attention on an image
#
# An image with $W \times H$ pixels and $D_{in}$ channels is a matrix $X \in \mathbb{R}^{T \times D_{in}}$ of
# $T = WH$ tokens. A self-attention head $h$ mixes the tokens with a row-stochastic matrix, and a
# multi-head layer concatenates its heads:
#
# $$
# \begin{aligned}
# \mathrm{SA}_h(X)_{q,:} &= \sum_k \mathrm{softmax}\big(A^{(h)}_{q,:}\big)_k \, X_{k,:} W^{(h)}_{val},\\
# \mathrm{MHSA}(X) &= \mathrm{concat}_h\big[\mathrm{SA}_h(X)\big]\, W_{out} + b_{out}.
# \end{aligned}
# $$ (eq-mhsa)
#
# The scores $A^{(h)}_{q,k}$ of query pixel $q$ for key pixel $k$ in {eq}`eq-mhsa` decide which pixels a
# head looks at. With a *relative* positional encoding {cite}`dai2019transformerxl` the scores depend on
# the contents and on the shift $\delta = k - q$ only:
#
# $$
# \begin{aligned}
# A_{q,k} = {}& X_q^\top W_{qry}^\top W_{key} X_k + X_q^\top W_{qry}^\top \widehat W_{key}\, r_\delta \\
#         &+ u^\top W_{key} X_k + v^\top \widehat W_{key}\, r_\delta .
# \end{aligned}
# $$ (eq-relative-scores)
#
# :::{prf:theorem} Attention can express convolution
# :label: thm-express
#
# A multi-head self-attention layer {eq}`eq-mhsa` with $N_h$ heads of dimension $D_h$, output dimension
# $D_{out}$ and a relative positional encoding {eq}`eq-relative-scores` of dimension $D_p \ge 3$ can
# express any convolutional layer of kernel size $\sqrt{N_h} \times \sqrt{N_h}$ and $\min(D_h, D_{out})$
# output channels {cite:p}`cordonnier2020relationship`.
# :::
#
# The proof is constructive, in two lemmas.
#
# :::{prf:lemma} One head per kernel tap
# :label: lem-one-head
#
# Number the $K^2$ shifts of a $K \times K$ kernel,
# $\Delta \in \{-\lfloor K/2 \rfloor, \dots, \lfloor K/2 \rfloor\}^2$, by the heads, $h \mapsto \Delta^{(h)}$.
# If every head puts all of its attention on the single key $q + \Delta^{(h)}$, then
#
# $$
# \mathrm{MHSA}(X)_q = \sum_h X_{q + \Delta^{(h)}} W^{(h)} + b_{out},
# $$ (eq-construction)
#
# where $W^{(h)} = W^{(h)}_{val} W^{(h)}_{out}$ and $W^{(h)}_{out}$ is the $h$-th slice of the output
# projection. Choosing $W^{(h)}$ equal to the kernel
# tap at $\Delta^{(h)}$ gives exactly the convolution $\sum_{\Delta} X_{q+\Delta} K_\Delta + b$.
# :::
#
# :::{prf:lemma} The quadratic encoding attends to one pixel
# :label: lem-quadratic
#
# With $W_{qry} = W_{key} = 0$ in {eq}`eq-relative-scores` and
#
# $$
# \begin{aligned}
# v^{(h)} &= -\alpha^{(h)} \big(1, -2\Delta^{(h)}_1, -2\Delta^{(h)}_2\big), \\
# r_\delta &= \big(\|\delta\|^2, \delta_1, \delta_2\big), \qquad \widehat W_{key} = I,
# \end{aligned}
# $$ (eq-quadratic)
#
# the score of head $h$ is
#
# $$
# A^{(h)}_{q,k} = -\alpha^{(h)} \big(\|\delta - \Delta^{(h)}\|^2 - \|\Delta^{(h)}\|^2\big),
# $$ (eq-quadratic-score)
#
# and as $\alpha^{(h)} \to \infty$ its softmax becomes one-hot at $\delta = \Delta^{(h)}$.
# :::
#
# :::{prf:proof}
# The score {eq}`eq-quadratic-score` is a Gaussian bump centred on the shift $\Delta^{(h)}$ whose last
# term is the same for every key and cancels in the softmax. Every other key is at least one pixel
# further from $\Delta^{(h)}$, so its score is lower by at least $\alpha^{(h)}$ and its softmax weight
# vanishes as $\alpha^{(h)} \to \infty$: the head attends to the single key $q + \Delta^{(h)}$, which is
# the condition of {prf:ref}`lem-one-head`. Giving the $K^2$ heads the $K^2$ shifts of the kernel and
# the filters of {eq}`eq-construction` then computes the convolution, so $K^2$ heads with $D_p = 3$
# suffice, which proves {prf:ref}`thm-express`.
# :::
#
# Two details matter in code. The library evaluates the centred score $-\alpha \|\delta - \Delta\|^2$ of
# {eq}`eq-quadratic-score` directly (better conditioned at large $\alpha$; see `attnlib.attention.QuadraticEncoding`). And a
# convolution pads the image with zeros where attention keeps its size: as the paper remarks, we attend
# over an explicitly zero-padded grid and crop the result back (`attnlib.theory.ConvAttention`).

# %% tags=["remove-input"]
import numpy as np
import torch
from torch import nn

import attnbook as book
from attnbook import viz
from attnlib import theory

# %% tags=["parameters"]
seed = 0  # seed of the random convolutions and images
steps = 600  # gradient steps when learning a convolution (last section)

# %% tags=["remove-input"]
params = book.check_params(seed=seed, counts={"steps": steps})

# %% tags=["remove-input"]
viz.set_style()
torch.set_num_threads(1)  # tiny tensors: one thread, no threading overhead
_ = torch.manual_seed(params.seed)

# %% [markdown]
# ## Step 1: the construction equals the convolution as $\alpha$ grows
#
# We draw a random $3 \times 3$ convolution with 4 input and 6 output channels and bias, and a dilated
# $5 \times 5$ one (dilation 2), build their attention layers with `attention_from_conv(conv, alpha)`, and
# compare both on random $12 \times 10$ images in float64, border pixels included.

# %% tags=["hide-input"]
conv3 = nn.Conv2d(4, 6, 3, padding=1, dtype=torch.float64)
conv5 = nn.Conv2d(4, 6, 5, padding=4, dilation=2, dtype=torch.float64)
x = torch.randn(2, 12, 10, 4, dtype=torch.float64)
alphas = np.arange(1.0, 33.0)
errors = {
    "3×3 kernel (9 heads)": theory.alpha_sweep(conv3, alphas, x),
    "5×5 kernel, dilation 2 (25 heads)": theory.alpha_sweep(conv5, alphas, x),
}
err3 = np.asarray(errors["3×3 kernel (9 heads)"])
rate = float(np.exp(np.median(np.log(err3[8:25]) + alphas[8:25])))  # error ≈ rate · e^(−α)
alpha_1e5 = float(alphas[np.argmax(err3 < 1e-5)])
book.glue_text("theory_err_a10", err3[alphas == 10][0], "{:.1e}")
book.glue_text("theory_err_last", err3[-1], "{:.1e}")
book.glue_text("theory_alpha_last", alphas[-1], "{:.0f}")
book.glue_text("theory_rate", rate, "{:.2f}")
book.glue_text("theory_alpha_1e5", alpha_1e5, "{:.0f}")
book.show(
    viz.error_vs_alpha(alphas, errors, tolerance=1e-5),
    "fig-alpha",
    "Relative error of the attention layer built from a convolution (`attention_from_conv`) against the "
    "width parameter α of its quadratic encoding, on random 12 × 10 images in float64; dashed: the rate "
    "$e^{-\\alpha}$ of {prf:ref}`lem-quadratic`, dotted: $10^{-5}$.",
)

# %% [markdown]
# The relative error $\|\mathrm{MHSA}(X) - \mathrm{Conv}(X)\| / \|\mathrm{Conv}(X)\|$ ({numref}`fig-alpha`) falls as
# {glue:text}`theory_rate` $\cdot\, e^{-\alpha}$, a straight line on the logarithmic axis: it is
# {glue:text}`theory_err_a10` at $\alpha = 10$, drops under $10^{-5}$ from $\alpha =$
# {glue:text}`theory_alpha_1e5` on, and reaches {glue:text}`theory_err_last` at $\alpha =$
# {glue:text}`theory_alpha_last`, the rounding level of float64. The rate is what {prf:ref}`lem-quadratic`
# predicts: the
# keys nearest to the target shift are one pixel further, so their scores are lower by $\alpha$ and the
# softmax leaks a mass of order $e^{-\alpha}$ to them. Dilation changes nothing: the heads sit further
# apart, but each one still competes with keys one pixel away.
#
# ## Step 2: every head attends to one shifted pixel
#
# {prf:ref}`lem-one-head` asks each head to look at a single pixel, at its own shift. {numref}`fig-heads` shows the
# attention probabilities of the nine heads of the $3 \times 3$ construction for one query pixel, at a
# small and at a large $\alpha$.

# %% tags=["hide-input"]
height, width, query = 9, 9, (4, 4)
rows = np.stack(
    [
        theory.head_attention_maps(theory.attention_from_conv(conv3, a), height, width, query)
        .reshape(9, -1)
        .numpy()
        for a in (1.0, 20.0)
    ]
)
leak = 1.0 - rows[1].max(axis=1)  # attention mass off each head's main pixel at α = 20
book.glue_text("theory_leak", float(leak.max()), "{:.0e}")
book.show(
    viz.attention_grid(
        rows,
        (height, width),
        query,
        layer_names=["α = 1", "α = 20"],
    ),
    "fig-heads",
    "Attention probabilities of the nine heads of the constructed 3 × 3 layer for one query pixel "
    "(outlined) on a 9 × 9 grid, at α = 1 (top two rows) and α = 20 (bottom two rows); the last panel of "
    "each is the mean over heads. Colour: multiple of uniform attention 1/81, one log scale for all panels.",
)

# %% [markdown]
# At $\alpha = 1$ each head is a blurred bump; at $\alpha = 20$ every head puts all but
# {glue:text}`theory_leak` of its attention on one pixel, and the nine pixels are exactly the nine
# taps of the kernel around the query: the layer has become a convolution. The average over heads (last
# column) is the kernel's footprint.
#
# ## Step 3: gradient descent finds the construction
#
# The construction is only an existence proof. Does a quadratic attention layer *learn* to be a
# convolution? We train a positional-only layer with nine isotropic quadratic heads, centres drawn from
# $\mathcal N(0, 1)$, to reproduce a random $3 \times 3$ convolution on fresh random $8 \times 8$ images
# (`attnlib.theory.learn_convolution`, AdamW, {glue:text}`theory_steps` steps, in float64: without weight
# decay the end of the run is chaotic in float32, where another CPU's rounding changes its last loss
# threefold).
#
# There is a subtlety. For interior pixels, *any* invertible mixture of the nine taps can be undone by the
# per-head filters $W^{(h)}$ of {eq}`eq-construction`, so blurred, overlapping heads can fit the convolution as well as one-hot ones,
# and the loss alone gives the centres no reason to reach the grid. Decoupled weight decay on the filters
# (not on centres and widths) breaks the tie: the one-to-one assignment of heads to taps is the
# best-conditioned mixture, with the smallest filters. We train twice, with and without that weight decay.

# %% tags=["hide-input"]
conv = nn.Conv2d(3, 8, 3, padding=1)
fits = {
    "weight decay 1 on the filters": theory.learn_convolution(conv, steps=steps, seed=params.seed),
    "no weight decay": theory.learn_convolution(conv, steps=steps, seed=params.seed, weight_decay=0.0),
}


def tap_summary(fit):
    """Distance of each final centre to its nearest kernel tap, and how many taps are covered."""
    distance = torch.cdist(fit.centers[-1], fit.targets)
    return float(distance.min(1).values.max()), len(set(distance.argmin(1).tolist()))


(dist_wd, taps_wd), (dist_0, taps_0) = (tap_summary(f) for f in fits.values())
wd = fits["weight decay 1 on the filters"]
book.glue_text("theory_steps", steps, "{:d}")
book.glue_text("theory_fit_loss", float(wd.loss[-1]), "{:.1e}")
book.glue_text("theory_fit_dist", dist_wd, "{:.2f}")
book.glue_text("theory_fit_taps", taps_wd, "{:d}")
book.glue_text("theory_fit_alpha_min", float(wd.alpha[-1].min()), "{:.1f}")
book.glue_text("theory_fit_alpha_max", float(wd.alpha[-1].max()), "{:.1f}")
book.glue_text("theory_fit0_loss", float(fits["no weight decay"].loss[-1]), "{:.1e}")
book.glue_text("theory_fit0_dist", dist_0, "{:.2f}")
book.glue_text("theory_fit0_taps", taps_0, "{:d}")
book.glue_str("theory_fit0_compare", "lower" if fits["no weight decay"].loss[-1] < wd.loss[-1] else "higher")
trajectories = torch.stack([f.centers for f in fits.values()], dim=1)  # (T, 2 runs, heads, 2)
book.show(
    viz.centre_trajectories(
        trajectories,
        targets=wd.targets,
        layer_names=list(fits),
        x_label="step",
        x_values=wd.steps,
    ),
    "fig-learn-centres",
    f"Centres of nine quadratic heads while a positional-only attention layer learns a random 3 × 3 "
    f"convolution ({steps} AdamW steps), with weight decay on the filters (left) and without (right): "
    "each line runs from a head's random start (hollow) to its end (filled); crosses are the kernel's taps.",
)

# %% [markdown]
# With weight decay on the filters, the centres travel from their random start onto the taps of the
# kernel ({numref}`fig-learn-centres`, left): {glue:text}`theory_fit_taps` of the 9 taps end up with a head, every
# centre ends within {glue:text}`theory_fit_dist` pixel of a tap, the widths grow to
# $\alpha \in$ [{glue:text}`theory_fit_alpha_min`, {glue:text}`theory_fit_alpha_max`], and the relative
# squared error is {glue:text}`theory_fit_loss` ({numref}`fig-learn-loss`). Without it the heads stay blurred and off the grid (a
# centre as far as {glue:text}`theory_fit0_dist` pixel from every tap; only {glue:text}`theory_fit0_taps`
# taps are the nearest tap of some head), and the error ends at {glue:text}`theory_fit0_loss`,
# {glue:text}`theory_fit0_compare` than with weight decay. The loss alone does not steer the heads to the
# construction: the theorem says attention *can* be a convolution, not that training must make it one.

# %% tags=["hide-input"]
book.show(
    viz.loss_curve(
        {k: f.steps for k, f in fits.items()},
        {k: f.loss for k, f in fits.items()},
        y_label="relative squared error",
    ),
    "fig-learn-loss",
    "Relative squared error of the attention layer learning a 3 × 3 convolution, with weight decay on the "
    "filters (solid) and without (dash-dotted), against the gradient step.",
)

# %% [markdown]
# ## What this chapter found
#
# The constructive proof holds in code, border pixels and dilation included: the attention layer built
# from a convolution computes it to {glue:text}`theory_err_last` at $\alpha =$ {glue:text}`theory_alpha_last`,
# and its error shrinks as $e^{-\alpha}$, as {prf:ref}`lem-quadratic` predicts. Trained from a random start, the same
# layer reaches the construction, one head per kernel tap, only when its filters carry weight decay;
# without it, blurred heads fit the convolution almost as well. So the theorem guarantees that attention
# *can* express a convolution, and says nothing about whether training will find one:
# {numref}`Chapter %s <chapter-reproduction>` looks at
# what the heads of models trained on images do.
