"""What a run saves of its model: attention maps of fixed test images, small enough for git
(attnlib.measures.attention_summary), and the single-image inference wall time
(attnlib.lab.measure.inference_wall_time)."""

from __future__ import annotations

import numpy as np
import torch
from torch import nn

from attnlib.lab.measure import inference_wall_time
from attnlib.measures import attention_summary
from attnlib.results.timing import threads_words
from attnlib.util import write_npz


class TokenMaps(nn.Module):
    """Fake model with `layers` positional-only maps over an h x w grid: probabilities (B, heads, N, N)."""

    def __init__(self, layers=2, heads=3, h=4, w=4):
        super().__init__()
        n = h * w
        self.logits = nn.Parameter(torch.randn(layers, heads, n, n) * 3)

    def forward(self, x, return_attention=False):
        maps = [torch.softmax(s + x.mean() * 0, -1).expand(x.shape[0], -1, -1, -1) for s in self.logits]
        maps = [m * (1 + 0.1 * x[:, :1, :1, :1]) / (1 + 0.1 * x[:, :1, :1, :1]) for m in maps]
        return (x.mean((1, 2, 3)), maps) if return_attention else x.mean((1, 2, 3))


class WindowMaps(nn.Module):
    """Fake SAN: aggregation weights (B, G, K², H, W) at two resolutions."""

    def forward(self, x, return_attention=False):
        b = x.shape[0]
        maps = [torch.softmax(torch.randn(b, 2, 9, 8, 8), 2), torch.softmax(torch.randn(b, 2, 9, 4, 4), 2)]
        return x.mean((1, 2, 3)), maps


def test_attention_summary_token_maps():
    model = TokenMaps()
    x = torch.randn(10, 3, 32, 32)
    s = attention_summary(model, x, n_show=2, device="cpu")
    assert s["rows"].shape == (2, 2, 3, 4, 16) and s["rows_mean"].shape == (2, 3, 4, 16)
    assert s["offset_mean"].shape == (2, 3, 7, 7) and tuple(s["grid"]) == (4, 4)
    probs = torch.softmax(model.logits.detach(), -1).numpy()
    np.testing.assert_allclose(s["rows"][0], probs[:, :, s["queries"]], atol=1e-3)
    np.testing.assert_allclose(s["rows_mean"], probs[:, :, s["queries"]], atol=1e-3)
    np.testing.assert_allclose(s["offset_mean"].astype(np.float64).sum((-2, -1)), 1.0, atol=1e-2)
    # offset (0, 0) is the mean self-attention p(q -> q)
    np.testing.assert_allclose(s["offset_mean"][..., 3, 3], np.diagonal(probs, 0, -2, -1).mean(-1), atol=1e-3)
    assert s["rows"].dtype == np.float16


def test_attention_summary_window_maps():
    s = attention_summary(WindowMaps(), torch.randn(5, 3, 32, 32), n_show=2, device="cpu")
    assert s["layer00_weights"].shape == (2, 9, 8, 8) and s["layer01_weights"].shape == (2, 9, 4, 4)
    assert s["layer00_mean"].shape == (2, 9)
    np.testing.assert_allclose(s["layer00_mean"].astype(np.float64).sum(-1), 1.0, atol=1e-2)


def test_attention_file_of_a_paper_size_model_stays_small(tmp_path):
    """6 layers, 16 heads, 16x16 tokens, 3 images shown: well under 1 MB even for incompressible maps."""
    s = attention_summary(TokenMaps(layers=6, heads=16, h=16, w=16), torch.randn(8, 3, 32, 32), 3, "cpu")
    write_npz(tmp_path / "attention.npz", s)
    assert (tmp_path / "attention.npz").stat().st_size < 1_000_000


def test_inference_wall_time():
    t = inference_wall_time(nn.Conv2d(3, 4, 3), "cpu", reps=5, warmup=2)
    assert t["wall_time_ms"] > 0 and t["wall_time_std_ms"] >= 0 and t["wall_time_reps"] == 5
    # the threads in words: "(1 thread)", "(2 threads)" (runs saved before wrote "(1 threads)")
    assert t["wall_time_device"].endswith(f" ({threads_words(torch.get_num_threads())})")
