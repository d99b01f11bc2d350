"""attnlib.analysis.controls and attnlib.models.cost: each new ledger rule against hand-built cases with known
answers (a grid of centres and a scattered one, a pure shift and uniform maps, seeds above and below), and
FLOP counts derived by hand."""

from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest
import torch

from attnlib import measures
from attnlib.analysis import claims, controls
from attnlib.analysis.rules import INCONCLUSIVE, NOT_MEASURED, NOT_REPRODUCED, REPRODUCED, Evidence
from attnlib.models import cost

GRID3 = np.array([(r, c) for r in (-1, 0, 1) for c in (-1, 0, 1)], np.float64)


def _verdict(key, ev):
    return claims.by_key(key).test(ev)


def _run(**files):
    return SimpleNamespace(
        test_accuracy=0.5, history=None, probe=None, **{k: files.get(k) for k in ("attention", "centers")}
    )


def _centres_run(*epochs, width=8):
    """A run whose centres log holds the given (layers, heads, 2) centres per epoch (row 0: initialisation),
    in key positions of a `width` × `width` attention grid (32 / width input px each)."""
    return _run(centers={"centers": np.stack(epochs)}, attention={"grid": np.array([width, width])})


# ------------------------------------------------------------------------------------------ the grid
def test_grid_distance_of_centres_on_and_off_the_grid():
    rng = np.random.default_rng(0)
    assert controls.grid_distance(GRID3[rng.permutation(9)]) == pytest.approx(0)  # heads in any order
    assert controls.grid_distance(GRID3 + [0.1, 0]) == pytest.approx(0.1)  # every head 0.1 off its offset
    near = claims.by_key("centres_grid").params["near_px"]
    assert controls.grid_distance(rng.normal(0, 2, (9, 2))) * 4 > near  # N(0, 2²): scattered
    # one head per offset: nine heads on one offset are far from the grid though each is near an offset
    assert controls.grid_distance(np.zeros((9, 2))) == pytest.approx(np.linalg.norm(GRID3, axis=1).mean())
    # 16 heads: a 4×4 grid half a position off the query, any of the four
    grid4 = np.array([(r, c) for r in range(-2, 2) for c in range(-1, 3)], np.float64)
    assert controls.grid_distance(grid4) == pytest.approx(0)
    assert controls.grid_blocks(8) is None and controls.grid_distance(np.zeros((8, 2))) is None


def test_centres_on_grid_verdict_against_initialisation():
    rng = np.random.default_rng(1)
    scattered = rng.normal(0, 2, (2, 9, 2))
    on_grid = np.stack([GRID3 + 0.05, rng.normal(0, 2, (9, 2))])  # layer 1 on the grid, layer 2 not
    ev = Evidence("x", runs={"quadratic_iso_9h": _centres_run(scattered, on_grid)})
    text, verdict = _verdict("centres_grid", ev)
    assert (  # 0.05 √2 key positions off the grid: 0.28 px on the 8×8 grid (4 px a key position)
        verdict == REPRODUCED
        and "SA quadratic (isotropic), 9 heads: 0.3 / " in text
        and "px per layer (at initialisation" in text
    )
    assert controls.centre_grid(ev.runs["quadratic_iso_9h"])[0][0] == pytest.approx(0.05 * 2**0.5 * 4)
    # 0.2 key positions off: 0.8 px on the 8×8 grid (on it), 1.6 px on a 4×4 grid of 8-px keys (off it)
    near = np.stack([GRID3 + [0.2, 0], rng.normal(0, 2, (9, 2))])
    ev = Evidence("x", runs={"quadratic_iso_9h": _centres_run(scattered, near)})
    assert _verdict("centres_grid", ev)[1] == REPRODUCED
    coarse = _centres_run(scattered, near, width=4)
    assert controls.centre_grid(coarse)[0][0] == pytest.approx(1.6)
    assert _verdict("centres_grid", Evidence("x", runs={"quadratic_iso_9h": coarse}))[1] == NOT_REPRODUCED
    ev.runs["quadratic_iso_9h"] = _centres_run(scattered, scattered + 0.1)  # moved, not onto the grid
    assert _verdict("centres_grid", ev)[1] == NOT_REPRODUCED
    ev.runs["quadratic_iso_9h"] = _centres_run(on_grid, on_grid)  # on the grid from the start: not training
    assert _verdict("centres_grid", ev)[1] == NOT_REPRODUCED
    ev.runs["quadratic_aniso_9h"] = _centres_run(scattered, on_grid)  # one model each way
    assert _verdict("centres_grid", ev)[1] == INCONCLUSIVE
    assert _verdict("centres_grid", Evidence("x"))[1] == NOT_MEASURED


# --------------------------------------------------------------------------- quadratic against learned
def test_quadratic_vs_learned_over_seeds_with_holm():
    learned = {"learned_9h": [0.40, 0.41, 0.42]}
    above = {"quadratic_iso_9h": [0.50, 0.51, 0.52], "quadratic_aniso_9h": [0.49, 0.50, 0.51]}
    text, verdict = _verdict("quadratic_vs_learned", Evidence("x", accuracies=learned | above))
    assert (
        verdict == REPRODUCED
        and "SA quadratic (isotropic), 9 heads − SA learned 2D, 9 heads: +10.0 [" in text
        and "Holm p" in text
    )
    below = above | {"quadratic_aniso_9h": [0.30, 0.31, 0.32]}
    assert _verdict("quadratic_vs_learned", Evidence("x", accuracies=learned | below))[1] == NOT_REPRODUCED
    holds_zero = above | {"quadratic_aniso_9h": [0.35, 0.41, 0.47]}  # its interval holds 0: no verdict
    assert _verdict("quadratic_vs_learned", Evidence("x", accuracies=learned | holds_zero))[1] == INCONCLUSIVE
    # "as well as": a pair a point below, tightly, is within the 2-point margin (the old superiority test
    # called it lower); four points below, tightly, is worse by more than the margin
    tight = {"learned_9h": [0.405, 0.41, 0.415]}
    within = above | {"quadratic_aniso_9h": [0.399, 0.40, 0.401]}
    text, verdict = _verdict("quadratic_vs_learned", Evidence("x", accuracies=tight | within))
    assert verdict == REPRODUCED and "non-inferior within 2" in text and "-1.0 [" in text
    beyond = above | {"quadratic_aniso_9h": [0.369, 0.37, 0.371]}
    assert _verdict("quadratic_vs_learned", Evidence("x", accuracies=tight | beyond))[1] == NOT_REPRODUCED
    one_seed = {"learned_9h": [0.40], "quadratic_iso_9h": [0.5]}  # no interval: inconclusive
    assert _verdict("quadratic_vs_learned", Evidence("x", accuracies=one_seed))[1] == INCONCLUSIVE
    assert _verdict("quadratic_vs_learned", Evidence("x", accuracies=above))[1] == NOT_MEASURED
    # seeds of two presets are not compared
    other = Evidence("x", accuracies=learned | above, seed_presets={"learned_9h": "long"})
    assert _verdict("quadratic_vs_learned", other)[1] == NOT_MEASURED


# ------------------------------------------------------------------------------- positional signature
def _shift_maps(height=4, width=4, shift=(0, 1)):
    """(1, 1, N, N): every query attends to the key `shift` away, or to itself where that key is off-grid."""
    n = height * width
    p = torch.zeros(1, 1, n, n, dtype=torch.float64)
    for q in range(n):
        y, x = divmod(q, width)
        ky, kx = y + shift[0], x + shift[1]
        p[0, 0, q, ky * width + kx if 0 <= ky < height and 0 <= kx < width else q] = 1.0
    return p


def test_offset_share_of_a_pure_shift_and_of_uniform_attention():
    shift = _shift_maps()
    assert float(measures.offset_share(shift)) == pytest.approx(12 / 16)  # 12 of 16 queries have the key
    assert float(measures.offset_share(_shift_maps(shift=(0, 0)))) == pytest.approx(1)
    assert float(measures.offset_share(torch.full((2, 1, 16, 16), 1 / 16))) == pytest.approx(1 / 16)
    # the saved offset means (attention.npz) give the same share
    saved = measures.offset_mean(shift.mean(0), 4, 4).numpy()
    assert saved.max() == pytest.approx(float(measures.offset_share(shift)))


def _offset_run(shares_map: np.ndarray, grid=(8, 8)):
    return _run(attention={"offset_mean": shares_map, "grid": np.array(grid)})


def test_fixed_shift_heads_against_uniform_and_initialisation():
    n = 64
    uniform = np.full((4, 9, 15, 15), 0.0)
    uniform[..., 7, 7] = 1 / n  # uniform attention: 1/N at every offset, at most 1/N
    shifted = uniform.copy()
    shifted[1, 2, 7, 8] = 56 / 64  # one head attends one position to the right
    ev = Evidence("budget", runs={"learned_content_9h": _offset_run(shifted)})
    text, verdict = _verdict("content_shift_heads", ev)
    assert verdict == REPRODUCED and "1 of 36 heads ≥ 0.5 (best 0.88, layer 2 head 3" in text
    assert "uniform 0.016" in text and controls.initial_shares("learned_content_9h", "budget").max() < 0.5
    ev.runs["learned_content_9h"] = _offset_run(uniform)
    assert _verdict("content_shift_heads", ev)[1] == NOT_REPRODUCED
    ev.runs = {"learned_9h": _offset_run(shifted)}  # positional only: not the claim's model
    assert _verdict("content_shift_heads", ev)[1] == NOT_MEASURED


# -------------------------------------------------------------------- HA's layers against its model
def _rows(layers):
    """attention.npz rows (images 2, layers, heads, queries = all 16, N = 16) from per-layer head maps."""
    rows = np.stack([np.stack(heads) for heads in layers])[None].repeat(2, axis=0)
    return {"rows": rows, "grid": np.array([4, 4]), "queries": np.arange(16)}


def test_step_similarity_head_averaged_and_per_head_by_hand():
    n = 16
    self_, flat = np.eye(n), np.full((n, n), 1 / n)
    averaged, per_head, top = controls.step_similarity(_run(attention=_rows([[self_, self_], [self_, flat]])))
    # head means: one-hot, then ½ one-hot + ½ uniform: TV = ½(1 − 1/N); per head: 1 (same) and 1/N (vs one-hot)
    assert averaged == pytest.approx([1 - 0.5 * (1 - 1 / n)]) and per_head == pytest.approx([(1 + 1 / n) / 2])
    assert top == pytest.approx(n)
    # both models near uniform: σ cannot tell patterns apart, so no verdict either way
    near = _run(attention=_rows([[flat, flat], [flat, flat]]))
    ev = Evidence("x", runs={"vit_ha": near, "vit": _run(attention=_rows([[flat, flat], [flat, flat]]))})
    text, verdict = _verdict("ha_layers_differ", ev)
    assert verdict == INCONCLUSIVE and "near uniform" in text


# ------------------------------------------------------------------------------------------------ FLOPs
def test_forward_flops_of_a_tiny_model_by_hand():
    model = torch.nn.Sequential(
        torch.nn.Conv2d(3, 4, 3, padding=1), torch.nn.Flatten(), torch.nn.Linear(4 * 32 * 32, 10)
    )
    conv = 2 * (3 * 3 * 3) * 4 * 32 * 32  # 2 per multiply-add: 27 inputs per output, 4 × 32 × 32 outputs
    linear = 2 * 4096 * 10
    assert cost.forward_flops(model) == conv + linear == 303_104
    assert cost.trainable_parameters(model) == (27 * 4 + 4) + (4096 * 10 + 10)

    class Attention(torch.nn.Module):
        def forward(self, x):
            q = x.reshape(1, 2, 16, 8)
            return torch.nn.functional.scaled_dot_product_attention(q, q, q)

    # two products of (16 × 8)(8 × 16) and (16 × 16)(16 × 8) per head: 2 × 2 × 16 × 16 × 8 per head
    assert cost.forward_flops(Attention(), (1, 256)) == 2 * 2 * 2 * 16 * 16 * 8


def test_table1_cost_counts_and_marks_printed_figures():
    from attnlib.analysis import costs

    table = costs.table1_cost(["quadratic_iso_9h", "resnet18"], "budget")
    assert list(table.columns) == list(costs.COST_COLUMNS)
    row = table.set_index("experiment").loc["quadratic_iso_9h"]
    assert row["params"] == costs.count_parameters("quadratic_iso_9h", "budget") and row["flops"] > 0
    assert row["printed_params"] == row["printed_flops"] == "not found"  # never an estimate
    assert row["derived_params"] == 12_086_844  # the official code's count (research notes A.3), not printed
    assert pd.isna(table.set_index("experiment").loc["resnet18", "derived_params"])
