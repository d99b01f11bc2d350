"""The tests of the claims that issue 29 §2–3 added to the ledger, each judged against a control: the quadratic
centres on a grid (against initialisation), quadratic against learned (over seeds, Holm across the pairs),
HA's layers against its own normal model's (σ head-averaged and per head), and the fixed-shift heads of the
content models (a per-head positional signature, against uniform attention and initialisation). Their
thresholds are in claims.yaml, beside the claims; `attnlib.analysis.claims` reads them.
"""

from __future__ import annotations

import itertools
import math

import numpy as np

from attnlib import experiments, measures
from attnlib.analysis.claims_file import Experiment, Experiments
from attnlib.analysis.rules import (
    INCONCLUSIVE,
    NOT_MEASURED,
    NOT_REPRODUCED,
    REPRODUCED,
    Evidence,
    _fmt_layers,
    display,
    key_pixels,
    verdict_of,
)


# ------------------------------------------------------------------------------- centres on a grid
def grid_blocks(heads: int) -> list[np.ndarray] | None:
    """The K×K blocks of integer offsets (row, column) around the query that K² heads can take, one head per
    offset (Paper A's Δ_K): for odd K the centred block {−⌊K/2⌋ … ⌊K/2⌋}², for even K the four blocks whose
    centre lies half a position from the query; None when `heads` is not a square."""
    k = math.isqrt(heads)
    if k * k != heads:
        return None
    starts = [-(k // 2)] if k % 2 else [-(k // 2), -(k // 2) + 1]
    return [
        np.array([(r, c) for r in range(a, a + k) for c in range(b, b + k)], np.float64)
        for a, b in itertools.product(starts, starts)
    ]


def grid_distance(centres) -> float | None:
    """Mean distance (key positions, the centres' own unit) of h centres (h, 2) from the offsets of a K×K grid
    around the query,
    heads matched one-to-one to offsets (Hungarian assignment of the distances), the best of `grid_blocks`;
    0 for centres exactly on the grid. None when h is not a square."""
    from scipy.optimize import linear_sum_assignment

    centres = np.asarray(centres, np.float64)
    blocks = grid_blocks(centres.shape[0])
    if blocks is None:
        return None
    best = math.inf
    for block in blocks:
        cost = np.linalg.norm(centres[:, None, :] - block[None, :, :], axis=-1)
        rows, cols = linear_sum_assignment(cost)
        best = min(best, float(cost[rows, cols].mean()))
    return best


def centre_grid(run) -> tuple[list[float], list[float]] | None:
    """(end, init): `grid_distance` of each layer's centres after the last epoch and at initialisation, in
    input pixels (× `key_pixels`), from a saved run's centres log; None without one (or without an attention
    grid to convert it, or with a head count that is not a square)."""
    centres, scale = measures.logged_centres(run), key_pixels(run)
    if centres is None or scale is None or grid_blocks(centres.shape[2]) is None:
        return None
    return [grid_distance(c) * scale for c in centres[-1]], [grid_distance(c) * scale for c in centres[0]]


def centres_on_grid(ev: Evidence, models: Experiments, near_px: float):
    """A model passes when some layer ends on the grid (below `near_px`) that was not on it at initialisation."""
    parts, passes = [], []
    for name in models:
        found = centre_grid(ev.runs.get(name))
        if found is None:
            continue
        end, init = found
        passes.append(any(e < near_px <= i for e, i in zip(end, init, strict=True)))
        parts.append(
            f"{ev.name(name)}: {_fmt_layers(end, '{:.1f}')} px per layer "
            f"(at initialisation {_fmt_layers(init, '{:.1f}')} px)"
        )
    if not passes:
        return "no quadratic centres log saved", NOT_MEASURED
    return "; ".join(parts), verdict_of(passes)


# ------------------------------------------------------------------- quadratic against learned
def quadratic_vs_learned(ev: Evidence, base: Experiment, models: Experiments, margin: float):
    """Each quadratic model of `models` against the learned model `base` over the saved seeds of one preset, as a
    non-inferiority claim ("as well as or better"): one-sided Welch tests of quadratic − learned against
    −`margin` points (`stats.noninferiority`), Holm's adjustment across the pairs for each
    direction; a pair passes when non-inferiority survives the adjustment, fails when "worse by more than the
    margin" does, and is inconclusive otherwise. The two-sided interval is shown beside it."""
    from attnlib.analysis import stats

    learned = ev.accuracies.get(base) or []
    pairs = [n for n in models if ev.accuracies.get(n) and learned]
    pairs = [n for n in pairs if ev.seed_presets.get(n, ev.preset) == ev.seed_presets.get(base, ev.preset)]
    if not pairs:
        return f"{display(base)} or the quadratic models not saved at one preset", NOT_MEASURED
    tests = {n: stats.noninferiority(learned, ev.accuracies[n], margin) for n in pairs}
    above = dict(zip(pairs, stats.holm([t[0] for t in tests.values()]), strict=True))
    below = dict(zip(pairs, stats.holm([t[1] for t in tests.values()]), strict=True))
    parts, passes = [], []
    for name in pairs:
        w = stats.welch(learned, ev.accuracies[name])
        alpha = 1 - w.level
        ok, worse = above[name], below[name]
        passes.append(None if ok is None else True if ok < alpha else False if worse < alpha else None)
        held = "" if ok is None else f", non-inferior within {margin:g}: Holm p {stats.p_text(ok)}"
        parts.append(
            f"{ev.seeds_name(name)} − {display(base)}: {w.difference} points (n = {w.n[1]}/{w.n[0]}{held})"
        )
    preset = ev.seed_presets.get(base, ev.preset)
    names = (*pairs, base) if preset in experiments.PRESETS else ()
    epochs = {n: experiments.preset_for(n, preset).train.epochs for n in names}
    if len(set(epochs.values())) > 1:  # "A and B trained for 4 epochs, C for 8 (each as its protocol ...)"
        by_epochs: dict[int, list[str]] = {}
        for n, e in epochs.items():
            by_epochs.setdefault(e, []).append(display(n))
        groups = enumerate(by_epochs.items())
        said = [f"{' and '.join(ns)} {'trained ' * (not i)}for {e} epochs" for i, (e, ns) in groups]
        parts.append(", ".join(said) + f" (each as its protocol sets at {preset})")
    verdict = NOT_REPRODUCED if False in passes else REPRODUCED if all(passes) else INCONCLUSIVE
    return "; ".join(parts), verdict


# -------------------------------------------------------------- HA's layers against its normal model
def step_similarity(run) -> tuple[list[float], list[float], float] | None:
    """(σ head-averaged, σ per head, top peak) of a saved run's token attention over its saved query pixels
    of the first test images (attention.npz): per step l ≥ 1, `measures.layer_similarity` of layers l and
    l − 1, and the mean over heads h of layer l of the similarity E(1 − TV) of head h with the most alike
    head of layer l − 1 (1: the pattern was already there); top peak: the largest layer peak (× uniform)."""
    import torch

    att = None if run is None else run.attention
    if not att or "rows" not in att:
        return None
    rows = torch.as_tensor(np.asarray(att["rows"], np.float64))  # (images, L, heads, Q, N)
    if rows.shape[1] < 2:
        return None
    averaged, per_head = [], []
    for layer in range(1, rows.shape[1]):
        now, before = rows[:, layer], rows[:, layer - 1]
        averaged.append(float(measures.layer_similarity(now, before)))
        tv = 0.5 * (now[:, :, None] - before[:, None, :]).abs().sum(-1).mean((0, 3))  # (h, h')
        per_head.append(float((1 - tv).amax(-1).mean()))
    top = max(float(measures.peak(rows[:, i]).max()) for i in range(rows.shape[1]))
    return averaged, per_head, top


def initial_similarity(run) -> list[float] | None:
    """σ per step (head-averaged) at initialisation, from a saved run's standard probe (probe.npz: the same
    test images and every query); None where no probe was saved. Shown beside the end values: HA's shared
    block starts with its layers alike (σ near 1), so a low σ at the end is what training made."""
    probe = getattr(run, "probe", None)
    if not probe or "init_similarity" not in probe:
        return None
    return [float(v) for v in np.asarray(probe["init_similarity"], np.float64)[1:]]


def _sigma_text(ev: Evidence, name: str, found) -> str:
    """ "<name>: σ a / b / c, per head d / e / f (at initialisation g / h / i)"."""
    init = initial_similarity(ev.runs.get(name))
    start = "" if init is None else f" (at initialisation {_fmt_layers(init)})"
    return f"{ev.name(name)}: σ {_fmt_layers(found[0])}, per head {_fmt_layers(found[1])}{start}"


def layers_differ(ev: Evidence, pairs: Experiments, left_out: Experiments, margin: float, flat_peak: float):
    """Every HA model of `pairs` with token maps (but those `left_out`: alike by construction) against its own
    normal model: both sides' σ per step, head-averaged and per head; a pair passes when HA's most alike step is
    within `margin` of its model's or below on both, fails when above on both, and is inconclusive when the two
    disagree or both models' maps are near uniform (every layer peaks below `flat_peak` × uniform: σ ≈ 1
    whatever the pattern)."""
    parts, passes = [], []
    for base in (b for b in pairs if b not in left_out):
        ha, normal = step_similarity(ev.runs.get(base + "_ha")), step_similarity(ev.runs.get(base))
        if ha is None or normal is None:
            continue
        flat = max(ha[2], normal[2]) < flat_peak
        both = [max(ha[i]) <= max(normal[i]) + margin for i in (0, 1)]
        passes.append(None if flat or both[0] != both[1] else both[0])
        parts.append(
            f"{_sigma_text(ev, base + '_ha', ha)}; its model {_sigma_text(ev, base, normal)}"
            + (f" (both near uniform: peaks ≤ {max(ha[2], normal[2]):.2f}×)" if flat else "")
        )
    if not passes:
        return "no HA model and its normal model both saved with token attention", NOT_MEASURED
    return "; ".join(parts), verdict_of(passes)


# ------------------------------------------------------------------------ fixed-shift heads
def shift_shares(run) -> np.ndarray | None:
    """(L, h) the positional signature of each head of a saved run: the largest share of its attention mass
    at one relative offset, over every query and the saved test images (the maximum of attention.npz's
    `offset_mean`; 1 for a head that attends to one fixed shift, 1/N for uniform attention)."""
    att = None if run is None else run.attention
    if not att or "offset_mean" not in att:
        return None
    return np.asarray(att["offset_mean"], np.float64).max(axis=(-2, -1))


# initial_shares' answers: {(name, preset, ids of the registry objects behind them): (shares, those objects)}
_INITIAL: dict[tuple, tuple[np.ndarray, tuple]] = {}


def initial_shares(name: str, preset: str) -> np.ndarray:
    """(L, h) `measures.offset_share` of a freshly built model of `name` at `preset` (seed 0) on 8 random
    images: where its heads start. Deterministic, computed once per process per registry entry."""
    import torch

    sources = (experiments.EXPERIMENTS.get(name), experiments.PRESET_TABLE.get(preset))
    key = (name, preset, *map(id, sources))
    if key not in _INITIAL:
        with torch.random.fork_rng(devices=[]), torch.no_grad():
            torch.manual_seed(0)
            model = experiments.build_model(name, preset).eval()
            maps = model(torch.randn(8, 3, 32, 32), return_attention=True)[1]
        shares = np.stack([measures.offset_share(m).numpy() for m in maps if m.dim() == 4])
        _INITIAL[key] = (shares, sources)
    return _INITIAL[key][0].copy()


def _shift_line(ev: Evidence, name: str, shares: np.ndarray, init: np.ndarray | None, share: float) -> str:
    layer, head = np.unravel_index(int(shares.argmax()), shares.shape)
    count = int((shares >= share).sum())
    text = f"{ev.name(name)}: {count} of {shares.size} heads ≥ {share:g} (best {shares.max():.2f}, layer "
    text += f"{layer + 1} head {head + 1}"
    return text + (")" if init is None else f"; at initialisation best {init.max():.2f})")


def fixed_shift_heads(ev: Evidence, models: Experiments, shift_share: float):
    """Paper A's content model still has heads at a fixed shift: a model passes when some head puts at least
    `shift_share` of its mass at one relative offset over queries and images and did not at initialisation;
    uniform attention's share (1/N) is named beside them."""
    parts, passes, uniform = [], [], None
    for name in models:
        shares = shift_shares(ev.runs.get(name))
        if shares is None:
            continue
        init = initial_shares(name, ev.preset_of(name))
        start = init if init.shape == shares.shape else np.full(shares.shape, init.max())  # per head if alike
        passes.append(bool(((shares >= shift_share) & (start < shift_share)).any()))
        parts.append(_shift_line(ev, name, shares, init, shift_share))
        grid = np.asarray(ev.runs[name].attention["grid"])
        uniform = 1 / int(np.prod(grid))
    if not passes:
        missing = " and ".join(map(display, models))
        return f"no learned-with-content run saved for today's configuration ({missing})", NOT_MEASURED
    return "; ".join(parts) + f"; uniform {uniform:.3f}", verdict_of(passes)
