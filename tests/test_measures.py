"""attnlib.measures against brute-force loops and hand-computed cases."""

import math

import pytest
import torch
from helpers import TINY_PAPER

from attnlib import measures
from attnlib.models import make


def _random_maps(b=3, h=2, side=4, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(b, h, side * side, side * side, generator=g, dtype=torch.float64).softmax(-1)


def test_mean_distance_and_peak_equal_a_loop_over_pairs():
    p = _random_maps()
    b, h, n, _ = p.shape
    dist, top = torch.zeros(h, dtype=torch.float64), torch.zeros(h, dtype=torch.float64)
    for hh in range(h):
        for bb in range(b):
            for q in range(n):
                qy, qx = divmod(q, 4)
                dist[hh] += sum(p[bb, hh, q, k] * math.hypot(k // 4 - qy, k % 4 - qx) for k in range(n))
                top[hh] += n * p[bb, hh, q].max()
    torch.testing.assert_close(measures.mean_distance(p), dist / (b * n), rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(measures.peak(p), top / (b * n), rtol=1e-12, atol=1e-12)
    queries = [0, 5, 15]  # saved results keep a few query rows: the same values from those rows alone
    torch.testing.assert_close(
        measures.mean_distance(p[:, :, queries], queries),
        torch.stack([measures.mean_distance(p[:, :, [q]], [q]) for q in queries]).mean(0),
    )
    with pytest.raises(ValueError, match="B, heads, Q, N"):
        measures.mean_distance(p[:, :, queries], [0, 5])


def test_offset_mean_equals_a_loop_over_pairs():
    height, width = 3, 5  # not square: rows and columns kept apart
    g = torch.Generator().manual_seed(1)
    p = torch.randn(2, 15, 15, generator=g, dtype=torch.float64).softmax(-1)  # (heads, N, N)
    want = torch.zeros(2, 2 * height - 1, 2 * width - 1, dtype=torch.float64)
    for q in range(height * width):
        for k in range(height * width):
            (qy, qx), (ky, kx) = divmod(q, width), divmod(k, width)
            want[:, ky - qy + height - 1, kx - qx + width - 1] += p[:, q, k] / (height * width)
    torch.testing.assert_close(measures.offset_mean(p, height, width), want, rtol=1e-12, atol=1e-15)


def test_hand_computed_cases():
    n = 9
    self_attention = torch.eye(n, dtype=torch.float64).expand(2, 1, n, n)
    assert measures.mean_distance(self_attention).item() == 0
    assert measures.peak(self_attention).item() == pytest.approx(n)
    assert measures.image_dependence(self_attention).item() == 0
    uniform = torch.full((2, 1, n, n), 1 / n, dtype=torch.float64)
    assert measures.peak(uniform).item() == pytest.approx(1)
    d = measures.token_distances(3, 3, dtype=torch.float64)
    assert measures.mean_distance(uniform).item() == pytest.approx(d.mean().item())
    assert measures.layer_similarity(uniform, uniform).item() == pytest.approx(1)
    assert measures.layer_similarity(self_attention, uniform).item() == pytest.approx(1 / n)
    # two images attending to two different keys: each is TV 0.5 away from their mean
    two = torch.zeros(2, 1, n, n, dtype=torch.float64)
    two[0, :, :, 0], two[1, :, :, 1] = 1, 1
    assert measures.image_dependence(two).item() == pytest.approx(0.5)
    assert math.isnan(measures.image_dependence(two[:1]).item())


def test_bad_shapes_are_refused():
    with pytest.raises(ValueError, match="B, heads, N, N"):
        measures.peak(torch.rand(2, 3, 4))
    with pytest.raises(ValueError, match="different shapes"):
        measures.layer_similarity(_random_maps(side=3), _random_maps(side=4))


def test_probe_does_not_depend_on_the_chunk_size_and_sees_content():
    torch.manual_seed(0)
    images = torch.randn(6, 3, 16, 16)
    positional = make("paper", encoding="quadratic_aniso", content=False, **TINY_PAPER).double().train()
    with_content = make("paper", encoding="learned", content=True, **TINY_PAPER).double()
    for p in with_content.parameters():
        p.data.add_(0.3 * torch.randn_like(p))
    a = measures.probe(positional, images.double(), batch=6)
    b = measures.probe(positional, images.double(), batch=4)
    assert positional.training  # mode restored
    assert a.keys() == {
        "distance_0",
        "peak_0",
        "image_dependence_0",
        "distance_1",
        "peak_1",
        "image_dependence_1",
        "similarity_1",
    }
    for k in a:
        assert a[k] == pytest.approx(b[k], rel=1e-9, abs=1e-12), k
    assert a["image_dependence_0"] == pytest.approx(0, abs=1e-12)  # positional only: one map for all
    c = measures.probe(with_content, images.double(), batch=6)
    d = measures.probe(with_content, images.double(), batch=4)
    assert c["image_dependence_0"] > 1e-3
    for k in c:
        assert c[k] == pytest.approx(d[k], rel=1e-9, abs=1e-12), k


def test_centre_displacement_and_spread():
    centers = torch.zeros(3, 2, 4, 2)
    centers[1, 0] = torch.tensor([3.0, 4.0])  # every head of layer 0 moved by 5 at epoch 1
    centers[2, 1, 0] = torch.tensor([0.0, 2.0])  # one of 4 heads of layer 1 moved by 2 at epoch 2
    torch.testing.assert_close(
        measures.centre_displacement(centers), torch.tensor([[0, 0], [5, 0], [0, 0.5]])
    )
    grid = torch.tensor([[-1.0, 0.0], [1.0, 0.0], [0.0, -1.0], [0.0, 1.0]])[None]  # (1 layer, 4 heads, 2)
    torch.testing.assert_close(measures.centre_spread(grid), torch.tensor([1.0]))
