"""What a built model costs: trainable parameters and the floating-point operations of one forward pass on one
32×32 image, counted by ``torch.utils.flop_counter.FlopCounterMode`` (Table 1 of Cordonnier et al. lists
#params and #FLOPs; the official code counts with ``thop`` on one 1×3×32×32 input). An experiment's cost at a
preset (the registry's model) is `attnlib.analysis.costs`'.

FLOPs as FlopCounterMode counts them: 2 per multiply-add of the matrix products and convolutions (mm, addmm,
bmm, baddbmm, convolution, scaled-dot-product attention, einsum through its bmm); softmax, normalisation,
activations and other elementwise operations are not counted (thop counts multiply-adds, half as many, and
some elementwise work). Scaled-dot-product attention runs on its math backend while counting, so that its two
products are seen on a CPU too (the fused CPU kernel is not counted by FlopCounterMode).

    >>> from attnlib.models.cost import forward_flops
    >>> forward_flops(torch.nn.Linear(4, 3), (1, 4))   # doctest: +SKIP
    24
"""

from __future__ import annotations

import torch

IMAGE = (1, 3, 32, 32)  # one CIFAR-10 image


@torch.no_grad()
def forward_flops(model: torch.nn.Module, shape=IMAGE) -> int:
    """FLOPs of one forward pass of `model` in eval mode on a random input of `shape` (default one 32×32
    image; the count depends on shapes only), as FlopCounterMode counts them (module docstring). The
    model's training mode and the global RNG are left as they were."""
    from torch.nn.attention import SDPBackend, sdpa_kernel
    from torch.utils.flop_counter import FlopCounterMode

    was_training = model.training
    model.eval()
    try:
        with torch.random.fork_rng(devices=[]):
            x = torch.randn(shape)
        with sdpa_kernel(SDPBackend.MATH), FlopCounterMode(display=False) as counter:
            model(x)
    finally:
        model.train(was_training)
    return int(counter.get_total_flops())


def trainable_parameters(model: torch.nn.Module) -> int:
    """Parameters that train (requires_grad)."""
    return sum(p.numel() for p in model.parameters() if p.requires_grad)
