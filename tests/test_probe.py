"""The standard attention probe (probe.npz): its measures against a hand computation on a model with known
weights, the exact values of uniform attention, its isolation from the training RNG, what every run saves,
and the backfill of older runs from their checkpoints."""

import json
import math
import shutil

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from torch import nn

from attnlib import measures
from attnlib.lab.run import backfill_probe, first_test_images, initial_model, train_run, trained_model
from attnlib.measures import PROBE_MEASURES, attention_probe, probe_file
from attnlib.results.config import run_config, run_dir
from attnlib.results.load import inspect_run, load_run
from attnlib.results.validate import PROBE_FILE


class KnownMaps(nn.Module):
    """Token attention from known weights on a side × side grid: in layer l, head h,
    p(q → k) = softmax_k(S[l, h, q, k] + c[l, h] · f_b(k)), f_b(k) the mean colour of image b's pixels under
    token k. `noisy`: the forward draws from the global RNG (as a dropout in training mode would)."""

    def __init__(self, scores: torch.Tensor, content: torch.Tensor, noisy: bool = False):
        super().__init__()
        self.scores, self.content, self.noisy = nn.Parameter(scores), nn.Parameter(content), noisy
        self.side = math.isqrt(scores.shape[-1])
        self.fc = nn.Linear(3, 10).double()

    def features(self, x):  # (B, N)
        return F.adaptive_avg_pool2d(x.mean(1, keepdim=True), self.side).flatten(1)

    def forward(self, x, return_attention: bool = False):
        f = self.features(x)
        maps = [
            torch.softmax(s[None] + c[None, :, None, None] * f[:, None, None, :], -1)
            for s, c in zip(self.scores, self.content, strict=True)
        ]
        logits = self.fc(x.mean((2, 3)))
        if self.noisy:
            logits = logits + 0 * torch.rand(())
        return (logits, maps) if return_attention else logits


def _known(noisy=False, layers=2, heads=3, side=4, seed=0):
    g = torch.Generator().manual_seed(seed)
    n = side * side
    scores = 3 * torch.randn(layers, heads, n, n, generator=g, dtype=torch.float64)
    content = torch.randn(layers, heads, generator=g, dtype=torch.float64) * 4
    content[0, 0] = 0.0  # one positional-only head: the same map for every image
    return KnownMaps(scores, content, noisy)


def _hand(model: KnownMaps, images: torch.Tensor) -> dict:
    """The probe's measures by explicit loops over images, heads, queries and keys (numpy, float64)."""
    side = model.side
    n = side * side
    pos = [(k // side, k % side) for k in range(n)]
    scale = images.shape[-1] / side
    f = model.features(images).detach().numpy()
    s, c = model.scores.detach().numpy(), model.content.detach().numpy()
    layers, heads = c.shape
    out = {k: np.zeros((layers, heads)) for k in ("distance", "peak", "image_dependence")}
    out["similarity"] = np.full(layers, np.nan)
    maps = []
    for layer in range(layers):
        logits = s[layer][None] + c[layer][None, :, None, None] * f[:, None, None, :]
        p = np.exp(logits - logits.max(-1, keepdims=True))
        p /= p.sum(-1, keepdims=True)  # (B, h, N, N)
        maps.append(p)
        mean = p.mean(0)
        for h in range(heads):
            d = peak = dep = 0.0
            for b in range(len(images)):
                for q in range(n):
                    d += sum(
                        p[b, h, q, k] * math.hypot(pos[k][0] - pos[q][0], pos[k][1] - pos[q][1])
                        for k in range(n)
                    )
                    peak += n * p[b, h, q].max()
                    dep += 0.5 * np.abs(p[b, h, q] - mean[h, q]).sum()
            count = len(images) * n
            out["distance"][layer, h] = d / count * scale
            out["peak"][layer, h] = peak / count
            out["image_dependence"][layer, h] = dep / count
        if layer:
            a, b = p.mean(1), maps[layer - 1].mean(1)
            out["similarity"][layer] = 1 - 0.5 * np.abs(a - b).sum(-1).mean()
    return out


def test_probe_equals_a_hand_computation_on_known_weights():
    torch.manual_seed(1)
    model = _known()
    images = torch.randn(5, 3, 32, 32, dtype=torch.float64)
    got = attention_probe(model, images, "cpu")
    want = _hand(model, images)
    for k in PROBE_MEASURES:
        np.testing.assert_allclose(got[k], want[k], rtol=1e-10, atol=1e-12, err_msg=k)
    assert got["distance"].shape == (2, 3) and got["similarity"].shape == (2,)
    assert tuple(got["grid"]) == (4, 4) and float(got["scale"]) == 8.0
    assert got["image_dependence"][0, 0] == pytest.approx(0, abs=1e-15)  # the positional-only head
    assert (got["image_dependence"][1] > 1e-3).all()
    # chunks of the images give the same numbers; the head average is the per-epoch probe's columns
    chunked = measures.probe_heads(model, images, batch=2)
    for k in PROBE_MEASURES:
        np.testing.assert_allclose(chunked[k].numpy(), got[k], rtol=1e-12, atol=1e-14)
    flat = measures.probe(model, images)
    assert flat["distance_1"] == pytest.approx(want["distance"][1].mean(), rel=1e-12)
    assert flat["peak_0"] == pytest.approx(want["peak"][0].mean(), rel=1e-12)
    assert flat["similarity_1"] == pytest.approx(want["similarity"][1], rel=1e-12)
    assert "similarity_0" not in flat


@pytest.mark.parametrize("height,width", [(2, 2), (2, 3), (4, 4), (8, 8)])
def test_uniform_reference_is_exact(height, width):
    """Uniform attention: d̄ = the mean distance over all ordered pairs of grid positions (brute force with
    math.hypot), peak 1, image dependence 0, similarity 1; a model attending uniformly measures the same."""
    cells = [(y, x) for y in range(height) for x in range(width)]
    brute = sum(math.hypot(a[0] - b[0], a[1] - b[1]) for a in cells for b in cells) / len(cells) ** 2
    ref = measures.uniform_reference(height, width, scale=4.0)
    assert ref["distance"] == pytest.approx(4 * brute, rel=1e-14)
    assert (ref["peak"], ref["image_dependence"], ref["similarity"]) == (1.0, 0.0, 1.0)
    if (height, width) == (2, 2):
        assert ref["distance"] == pytest.approx(4 * (2 + math.sqrt(2)) / 4, rel=1e-15)
    if height == width:
        n = height * width
        flat = KnownMaps(torch.zeros(2, 3, n, n, dtype=torch.float64), torch.zeros(2, 3, dtype=torch.float64))
        got = attention_probe(flat, torch.randn(3, 3, 32, 32, dtype=torch.float64), "cpu")
        scale = 32 / width
        np.testing.assert_allclose(got["distance"], ref["distance"] / 4 * scale, rtol=1e-12)
        assert (got["peak"] == 1.0).all() and (got["image_dependence"] == 0).all()
        assert got["similarity"][1] == 1.0


def test_probe_consumes_nothing_of_the_global_rng():
    model = _known(noisy=True)
    images = torch.randn(4, 3, 32, 32, dtype=torch.float64)
    torch.manual_seed(7)
    before = torch.get_rng_state()
    model(images)  # the model does draw from the global RNG ...
    assert not torch.equal(before, torch.get_rng_state())
    torch.set_rng_state(before)
    attention_probe(model, images, "cpu")  # ... but not under the probe
    assert torch.equal(before, torch.get_rng_state())


def test_probe_file_layout_and_models_without_token_maps():
    model = _known()
    images = torch.randn(3, 3, 32, 32, dtype=torch.float64)
    init, end = attention_probe(model, images, "cpu"), attention_probe(_known(seed=1), images, "cpu")
    z = probe_file(3, init, end)
    assert set(z) == {
        "images",
        "token_layers",
        "grid",
        "pixels_per_token",
        *(f"{w}_{k}" for w in ("init", "end", "uniform") for k in PROBE_MEASURES),
    }
    assert int(z["images"]) == 3 and int(z["token_layers"]) == 2 and float(z["pixels_per_token"]) == 8.0
    assert z["init_peak"].shape == z["end_distance"].shape == (2, 3) and z["end_similarity"].shape == (2,)
    assert all(z[f"uniform_{k}"].shape == () for k in PROBE_MEASURES)
    assert all(v.dtype == np.float64 for k, v in z.items() if k not in ("images", "token_layers", "grid"))
    assert set(probe_file(3, None, None)) == {"images", "token_layers"}  # ResNet18, SAN
    assert int(probe_file(3, None, None)["token_layers"]) == 0
    with pytest.raises(ValueError, match="initialisation"):
        probe_file(3, None, end)
    resnet = nn.Sequential(nn.Flatten(), nn.Linear(3 * 32 * 32, 10))
    resnet.forward = lambda x, return_attention=False: (torch.zeros(len(x), 10), [])
    assert attention_probe(resnet, images.float(), "cpu") is None
    # SAN's window weights (B, G, K², H, W) have no token probe
    san = nn.Linear(1, 1)
    san.forward = lambda x, return_attention=False: (
        torch.zeros(len(x), 10),
        [torch.rand(len(x), 2, 9, 4, 4)],
    )
    assert attention_probe(san, images.float(), "cpu") is None


# ------------------------------------------------------------------------------------------- saved runs
@pytest.fixture(scope="module")
def smoke_run(tmp_path_factory):
    root = tmp_path_factory.mktemp("results")
    train_run("learned_content_9h", "smoke", results_dir=root, progress=False)
    return root


def _strip(history):
    return history.drop(columns=["seconds", "images_per_s"])


def test_every_run_saves_the_probe_at_init_and_at_the_end(smoke_run):
    run = load_run(run_dir(smoke_run, "learned_content_9h", "smoke"))
    assert PROBE_FILE in run.metrics["files"] and run.probe is not None
    p, config = run.probe, run.config
    assert "probe" not in json.dumps({k: v for k, v in config.items() if k != "model_resolved"})
    assert config["fingerprint"] == run_config("learned_content_9h", "smoke")["fingerprint"]
    assert int(p["images"]) == config["attention_mean_images"] == 4
    layers, heads = config["model_resolved"]["layers"], config["model_resolved"]["heads"]
    assert int(p["token_layers"]) == layers and p["init_distance"].shape == (layers, heads)
    from attnlib.data import load_dataset

    images = first_test_images(load_dataset(config["data"]), 4)
    init = attention_probe(initial_model(config), images, "cpu")  # the seed's model before the first step
    for k in PROBE_MEASURES:
        np.testing.assert_array_equal(p[f"init_{k}"], init[k])
    end = attention_probe(trained_model(run), images, "cpu")
    for k in PROBE_MEASURES:
        np.testing.assert_array_equal(p[f"end_{k}"], end[k])
    assert not np.array_equal(p["init_peak"], p["end_peak"])  # one epoch moved something
    ref = measures.uniform_reference(*p["grid"], float(p["pixels_per_token"]))
    assert float(p["uniform_distance"]) == ref["distance"] and float(p["uniform_peak"]) == 1.0


def test_a_run_probed_at_init_trains_exactly_as_one_that_is_not(smoke_run, tmp_path, monkeypatch):
    from attnlib.lab import run as runs

    monkeypatch.setattr(runs, "attention_probe", lambda *a, **k: None)
    bare = train_run("learned_content_9h", "smoke", results_dir=tmp_path, progress=False)
    probed = load_run(run_dir(smoke_run, "learned_content_9h", "smoke"))
    assert int(bare.probe["token_layers"]) == 0
    assert _strip(bare.history).equals(_strip(probed.history))
    a, b = (
        torch.load(r.path / "checkpoints" / "last.pt", weights_only=True)["model"] for r in (bare, probed)
    )
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


def test_the_end_probe_is_the_last_epoch_of_a_long_run(tmp_path, monkeypatch):
    """At a preset that logs the measures every epoch, the per-epoch columns are the same function on the
    same images: the last row is the end probe averaged over heads."""
    import dataclasses

    from attnlib import experiments

    smoke = experiments.PRESET_TABLE["smoke"]
    tiny = {k: dataclasses.replace(p, probe_images=p.attention_mean_images) for k, p in smoke.items()}
    monkeypatch.setitem(experiments.PRESET_TABLE, "long", tiny)
    monkeypatch.setitem(experiments.MODELS_OF, "long", "smoke")
    run = train_run("learned_9h", "long", results_dir=tmp_path, progress=False)
    last = run.history.iloc[-1]
    for layer in range(int(run.probe["token_layers"])):
        for k in ("distance", "peak", "image_dependence"):
            assert last[f"{k}_{layer}"] == pytest.approx(run.probe[f"end_{k}"][layer].mean(), rel=1e-12)


def test_backfill_adds_the_probe_to_an_older_run(smoke_run, tmp_path, cli):
    root = tmp_path / "results"
    shutil.copytree(smoke_run, root)
    path = run_dir(root, "learned_content_9h", "smoke")
    saved = dict(np.load(path / PROBE_FILE))
    metrics = json.loads((path / "metrics.json").read_text())
    del metrics["files"][PROBE_FILE]  # as saved before runs had the probe
    (path / "metrics.json").write_text(json.dumps(metrics))
    (path / PROBE_FILE).unlink()
    assert inspect_run(path)[0] == "complete" and load_run(path).probe is None  # still complete
    fingerprint = metrics["fingerprint"]
    code, out, err = cli(["probe", "learned_content_9h", "--preset", "smoke", "--results-dir", str(root)])
    assert code == 0, err
    assert "layer 0: distance" in out and "uniform" in out
    again = load_run(path)
    assert again.metrics["fingerprint"] == fingerprint and inspect_run(path)[0] == "complete"
    assert set(again.probe) == set(saved)
    for k, v in saved.items():  # the rebuilt initial model is the one training started from
        np.testing.assert_array_equal(again.probe[k], v, err_msg=k)
    assert backfill_probe("learned_content_9h", "smoke", results_dir=root) == path / PROBE_FILE
    (path / "checkpoints" / "last.pt").unlink()
    code, _, err = cli(["probe", "learned_content_9h", "--preset", "smoke", "--results-dir", str(root)])
    assert code == 1 and "last.pt is missing" in err
    code, _, err = cli(["probe", "vit", "--preset", "smoke", "--results-dir", str(root)])
    assert code == 1 and "no complete result" in err


def test_a_run_without_token_maps_saves_an_empty_probe(tmp_path):
    run = train_run("resnet18", "smoke", results_dir=tmp_path, progress=False)
    assert {k: int(v) for k, v in run.probe.items()} == {"images": 4, "token_layers": 0}
