"""What a finished run saves of its trained model besides its accuracy: the attention maps of fixed test
images (``attention.npz``) and the single-image inference wall time (Table 3's protocol) on a named device.
"""

from __future__ import annotations

import platform
import re
from pathlib import Path

import numpy as np
import torch

from attnlib.util import sync, timed_ms

QUERY_FRACTIONS = ((0.5, 0.5), (0.25, 0.25), (0.25, 0.75), (0.75, 0.5))  # fixed query pixels (row, col)


def device_name(device: torch.device | str) -> str:
    """A human-readable device name: the GPU's name, or the CPU model from /proc/cpuinfo."""
    device = torch.device(device)
    if device.type == "cuda":
        return torch.cuda.get_device_name(device)
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                name = line.split(":", 1)[1].strip()
                break
        else:
            name = platform.processor() or platform.machine()
    except OSError:
        name = platform.processor() or platform.machine()
    return f"{name} ({torch.get_num_threads()} threads)"


def cpu_threads(provenance: dict) -> int | None:
    """The CPU threads a run trained with: its provenance's ``threads``, else the count in its device name
    ("AMD EPYC (1 threads)", as runs saved before ``threads`` was recorded say); None for a GPU run, or
    where neither says. Reads validated metrics (``runs.inspect_run`` checks ``threads``)."""
    if provenance.get("threads") is not None:
        return provenance["threads"]
    found = re.search(r"\((\d+) threads\)$", str(provenance.get("device", "")))
    return int(found[1]) if found else None


@torch.inference_mode()
def inference_wall_time(
    model: torch.nn.Module, device: torch.device | str, reps: int = 300, warmup: int = 10
) -> dict:
    """Table 3's protocol ([Re] main.py): `warmup` untimed, then `reps` timed forward passes of one
    1×3×32×32 image in fp32, synchronising after each. Returns mean and std in ms and the device's name."""
    device = torch.device(device)
    model = model.to(device).eval()
    x = torch.randn(1, 3, 32, 32, device=device)
    for _ in range(warmup):
        model(x)
    sync(device)
    t = np.asarray([timed_ms(lambda: model(x), device) for _ in range(reps)])
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
