"""What a finished run saves of its trained model besides its accuracy: the attention maps of fixed test
images (``attention.npz``) and the single-image inference wall time (Table 3's protocol) on a named device.
"""

from __future__ import annotations

import numpy as np
import torch

from attnlib.util import timed_ms

QUERY_FRACTIONS = ((0.5, 0.5), (0.25, 0.25), (0.25, 0.75), (0.75, 0.5))  # fixed query pixels (row, col)


def device_name(device: torch.device | str) -> str:
    """A human-readable device name: the GPU's name, or the CPU model (`attnlib.train.device.cpu_info`, the one
    reader of /proc/cpuinfo) with the threads in use in words ("(1 thread)"; runs saved before wrote "(1
    threads)", which `attnlib.results.timing.device_words` reads as words)."""
    from attnlib.train.device import cpu_info

    device = torch.device(device)
    if device.type == "cuda":
        return torch.cuda.get_device_name(device)
    threads = torch.get_num_threads()
    return f"{cpu_info()[0]} ({threads} thread{'' if threads == 1 else 's'})"


def pass_times_ms(model: torch.nn.Module, x: torch.Tensor, passes: int) -> list[float]:
    """Milliseconds of each of ``passes`` forward passes of ``x``, synchronising after each: Table 3's timing
    protocol ([Re] main.py), here and in `attnlib.lab.timing`."""
    return [timed_ms(lambda: model(x), x.device) for _ in range(passes)]


@torch.inference_mode()
def inference_wall_time(
    model: torch.nn.Module, device: torch.device | str, reps: int = 300, warmup: int = 10
) -> dict:
    """Table 3's protocol: `warmup` untimed, then `reps` timed forward passes of one 1×3×32×32 image in fp32
    (`pass_times_ms`). Returns mean and std in ms and the device's name."""
    device = torch.device(device)
    model = model.to(device).eval()
    x = torch.randn(1, 3, 32, 32, device=device)
    pass_times_ms(model, x, warmup)
    t = np.asarray(pass_times_ms(model, x, reps))
    return {
        "wall_time_ms": float(t.mean()),
        "wall_time_std_ms": float(t.std()),
        "wall_time_reps": reps,
        "wall_time_warmup": warmup,
        "wall_time_dtype": "float32",
        "wall_time_device": device_name(device),
    }


def _query_tokens(height: int, width: int) -> np.ndarray:
    return np.array([int(fr * height) * width + int(fc * width) for fr, fc in QUERY_FRACTIONS])


def _offset_mean(rows: np.ndarray, height: int, width: int) -> np.ndarray:
    """Mean attention by relative offset: rows (..., N, N) with N = H·W -> (..., 2H−1, 2W−1), entry
    [dy + H − 1, dx + W − 1] = mean over queries q of p(q → q + (dy, dx)) (0 where the key is off-grid)."""
    n = height * width
    q = np.arange(n)
    qy, qx = np.divmod(q, width)
    out = np.zeros((*rows.shape[:-2], 2 * height - 1, 2 * width - 1), dtype=np.float64)
    ky, kx = qy[None, :] - qy[:, None] + height - 1, qx[None, :] - qx[:, None] + width - 1  # (N, N)
    flat = (ky * (2 * width - 1) + kx).reshape(-1)
    lead = int(np.prod(rows.shape[:-2]))
    acc = np.zeros((lead, out.shape[-2] * out.shape[-1]))
    for i, r in enumerate(rows.reshape(lead, n * n)):
        acc[i] = np.bincount(flat, weights=r, minlength=acc.shape[1])
    return (acc / n).reshape(out.shape)


@torch.inference_mode()
def attention_summary(
    model: torch.nn.Module, images: torch.Tensor, n_show: int, device
) -> dict[str, np.ndarray]:
    """Attention maps of fixed test images, small enough for git (float16, well under 1 MB).

    images: the first test images, normalised float (M, 3, 32, 32); maps of the first `n_show` are kept
    per image, all M are averaged. Token maps (paper models, ViT; (B, heads, N, N) per layer, N = H·W):
      queries (Q,) token index of the fixed query pixels (QUERY_FRACTIONS of the grid), grid (2,) = (H, W)
      rows (n_show, L, heads, Q, N)   attention of each fixed query over all keys, per image
      rows_mean (L, heads, Q, N)      the same averaged over the M images
      offset_mean (L, heads, 2H−1, 2W−1)  attention by relative offset, averaged over queries and images
    Window maps (SAN; (B, G, K², H, W) per layer; layer i has its own grid):
      layer{i}_weights (n_show, K², H, W)   aggregation weights averaged over the G groups
      layer{i}_mean (G, K²)                 averaged over pixels and images
    """
    device = torch.device(device)
    model = model.to(device).eval()
    out: dict[str, np.ndarray] = {}
    sums: dict[str, np.ndarray] = {}
    m = images.shape[0]
    for start in range(0, m, 8):
        x = images[start : start + 8].to(device)
        _, maps = model(x, return_attention=True)
        for i, a in enumerate(maps):
            a = a.float()
            if a.dim() == 4:  # (B, heads, N, N)
                n = a.shape[-1]
                side = int(round(n**0.5))
                h, w = (side, side) if side * side == n else (1, n)
                qs = torch.as_tensor(_query_tokens(h, w), device=a.device)
                rows = a[:, :, qs, :]  # (B, heads, Q, N)
                off = _offset_mean(a.mean(0).cpu().numpy(), h, w)  # (heads, 2H−1, 2W−1), this batch
                _accumulate(sums, f"rows_{i}", rows.sum(0).cpu().numpy())
                _accumulate(sums, f"offset_{i}", off * a.shape[0])
                if start == 0:
                    out[f"rows_{i}"] = rows[:n_show].cpu().numpy()
                    out["grid"], out["queries"] = np.array([h, w]), qs.cpu().numpy()
            else:  # (B, G, K², H, W)
                if start == 0:
                    out[f"layer{i:02d}_weights"] = a[:n_show].mean(1).cpu().numpy()
                _accumulate(sums, f"layer{i:02d}_mean", a.mean((3, 4)).sum(0).cpu().numpy())
    layers = sorted(int(k.split("_")[1]) for k in sums if k.startswith("rows_"))
    if layers:
        out["rows"] = np.stack([out.pop(f"rows_{i}") for i in layers], axis=1)
        out["rows_mean"] = np.stack([sums[f"rows_{i}"] / m for i in layers])
        out["offset_mean"] = np.stack([sums[f"offset_{i}"] / m for i in layers])
    out.update({k: v / m for k, v in sums.items() if k.startswith("layer")})
    return {k: (v.astype(np.float16) if v.dtype.kind == "f" else v) for k, v in out.items()}


def _accumulate(sums: dict, key: str, value: np.ndarray) -> None:
    sums[key] = sums[key] + value if key in sums else value.astype(np.float64)


# ------------------------------------------------------------------------------------- the standard probe
PROBE_MEASURES = ("distance", "peak", "image_dependence", "similarity")


def attention_probe(model: torch.nn.Module, images: torch.Tensor, device) -> dict[str, np.ndarray] | None:
    """The standard probe of `model` at one moment (`attnlib.measures.probe_heads` on `device`, every query of
    the fixed `images`): {"distance", "peak", "image_dependence": (L, h), "similarity": (L,), "grid": (2,),
    "scale": ()} as numpy float64 arrays, or None for a model without token attention maps.

    Runs under `torch.random.fork_rng`: it consumes nothing of the global RNG streams (CPU, and the device's
    on CUDA), so that a run probed at initialisation trains exactly as one that is not."""
    device = torch.device(device)
    model = model.to(device)
    with torch.random.fork_rng(devices=[device] if device.type == "cuda" else []):
        from attnlib.measures import probe_heads

        m = probe_heads(model, images.to(device))
    if m is None:
        return None
    return {k: v.detach().cpu().numpy() for k, v in m.items()}


def probe_file(images: int, init: dict | None, end: dict | None) -> dict[str, np.ndarray]:
    """The arrays of probe.npz, the standard attention probe that every run saves: the measures of its
    token attention on the first `images` test images (every query), per layer (one entry per application
    of attention, as the model returns its maps) and per head, at initialisation (`init`, before the first
    step) and at the end (`end`), each an `attention_probe`, beside their values for uniform attention on
    the same grid (`attnlib.measures.uniform_reference`, exact):

      images ()                                  P, the number of test images (the first P)
      token_layers ()                            L; 0 for a model without token maps: ResNet18, and SAN,
                                                 whose window aggregation weights have no token probe
      grid (2,), pixels_per_token ()             the token grid (H, W) and the input pixels per token
      init_distance, end_distance (L, h)         mean attended distance d̄ in input pixels
      init_peak, end_peak (L, h)                 peak π as a multiple of uniform (mean over queries of N·max p)
      init_image_dependence, end_... (L, h)      image dependence ι (TV from the layer's mean map over P images)
      init_similarity, end_similarity (L,)       σ with the previous layer (NaN for the first)
      uniform_distance, uniform_peak, uniform_image_dependence, uniform_similarity ()
    All floats float64. A probe missing at one moment (`init` None for a model with maps) is an error."""
    from attnlib.measures import uniform_reference

    out = {"images": np.asarray(images, dtype=np.int64)}
    if end is None:
        if init is not None:
            raise ValueError("a probe at initialisation without one at the end")
        return {**out, "token_layers": np.asarray(0, dtype=np.int64)}
    if init is None:
        raise ValueError("a probe at the end without one at initialisation")
    grid, scale = np.asarray(end["grid"], np.int64), float(end["scale"])
    out.update(
        token_layers=np.asarray(end["distance"].shape[0], dtype=np.int64),
        grid=grid,
        pixels_per_token=np.asarray(scale, np.float64),
    )
    for when, m in (("init", init), ("end", end)):
        out.update({f"{when}_{k}": np.asarray(m[k], np.float64) for k in PROBE_MEASURES})
    uniform = uniform_reference(int(grid[0]), int(grid[1]), scale)
    out.update({f"uniform_{k}": np.asarray(uniform[k], np.float64) for k in PROBE_MEASURES})
    return out


# ---------------------------------------------------------------- a run's fixed images and initial model
def first_test_images(dataset, n: int, device="cpu") -> torch.Tensor:
    """The first `n` (at least 1) test images of `dataset`, normalised, on `device`: the fixed images of the
    saved attention maps, the standard probe and the per-epoch measures."""
    from attnlib.data import Batches

    images, _ = next(Batches(dataset.test, max(1, n), train=False, device=device).epoch(0))
    return images


def initial_model(config: dict) -> torch.nn.Module:
    """The model of a saved run as its training built it before the first step: the global RNG seeded with
    the run's seed, then the network of its config.json (every resolved field where recorded), as
    `train_run` does (`torch.manual_seed(seed)`, then `make`). The global RNG is left as it was."""
    from attnlib.models import make
    from attnlib.results.config import RESOLVED

    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(config.get("seed", 0))
        return make(config["family"], **config.get(RESOLVED, config["model"]))
