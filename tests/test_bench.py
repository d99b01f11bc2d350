"""attnlib.bench: the plain formulation equals the library's layer; the benchmark runs and reports."""

import json
from pathlib import Path

import pytest
import torch

from attnlib.attention import MultiHeadSelfAttention2d
from attnlib.attention.ops import dropout_mask
from attnlib.errors import ConfigError
from attnlib.lab import bench, cli, commands, machine
from attnlib.models import make

SMALL = dict(layers=2, hidden=16, mlp=24, heads=3, max_pos=8, downsample=4)  # 8x8 tokens
CONFIGS = {
    "learned+content": dict(encoding="learned", content=True),
    "quadratic_iso": dict(encoding="quadratic_iso", content=False),
    "learned": dict(encoding="learned", content=False),
    "quadratic_aniso+content, HA": dict(encoding="quadratic_aniso", content=True, hierarchical=True),
    "learned+content, HA": dict(encoding="learned", content=True, hierarchical=True),
    "quadratic_iso+content": dict(encoding="quadratic_iso", content=True),
    # the [Re] code's models (block "re"): its learned form with content, and its 16-head value projection
    "[Re] learned+content": dict(encoding="learned", content=True, block="re", learned_form="re"),
    "[Re] learned+content, HA, values": dict(
        encoding="learned", content=True, hierarchical=True, block="re", learned_form="re", value="standard"
    ),
    "[Re] learned, values": dict(encoding="learned", content=False, block="re", value="standard"),
}


def bench_main(argv: list[str]) -> dict:
    """``python -m attnlib bench ARGV`` without its error handling (ConfigError and MachineBusy propagate): the
    report it wrote to ``--out``."""
    args = cli.build_parser().parse_args(["bench", *argv])
    assert commands.cmd_bench(args) == 0
    return json.loads(Path(args.out).read_text())


def _loss_and_grads(model, x, y):
    logits, maps = model(x, return_attention=True)
    loss = torch.nn.functional.cross_entropy(logits * 50, y)  # scaled: gradients well above rounding
    loss.backward()
    return logits, maps, {n: p.grad.clone() for n, p in model.named_parameters()}


@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_plain_formulation_equals_attnlib_outputs_maps_and_gradients(name):
    """In float64: equality of the math, not of float32 summation orders (those differ by machine)."""
    torch.manual_seed(0)
    model = make("paper", **SMALL, **CONFIGS[name]).eval().double()
    for p in model.parameters():  # move away from the near-zero init so every term matters
        p.data.add_(0.3 * torch.randn_like(p))
    plain = bench.plain_copy(model)
    assert any(isinstance(m, bench.PlainAttention) for m in plain.modules())
    assert not any(isinstance(m, MultiHeadSelfAttention2d) for m in plain.modules())
    assert all(type(m) is torch.nn.Dropout for m in plain.modules() if isinstance(m, torch.nn.Dropout))
    x, y = torch.randn(3, 3, 32, 32, dtype=torch.float64), torch.tensor([0, 4, 9])
    logits, maps, grads = _loss_and_grads(model, x, y)
    p_logits, p_maps, p_grads = _loss_and_grads(plain, x, y)
    assert len(maps) == len(p_maps) == 2 and maps[0].shape == p_maps[0].shape == (3, 3, 64, 64)
    assert logits.dtype == p_logits.dtype == torch.float64
    torch.testing.assert_close(p_logits, logits, atol=1e-10, rtol=1e-10)
    for a, b in zip(maps, p_maps, strict=True):
        torch.testing.assert_close(b, a, atol=1e-12, rtol=1e-10)
    assert grads.keys() == p_grads.keys()
    for n in grads:
        torch.testing.assert_close(p_grads[n], grads[n], atol=1e-10, rtol=1e-9, msg=n)


def test_the_comparison_sees_a_changed_weight():
    torch.manual_seed(0)
    model = make("paper", **SMALL, encoding="learned", content=True).eval()
    plain = bench.plain_copy(model)
    x = torch.randn(2, 3, 32, 32)
    with torch.no_grad():
        plain.encoder.blocks[1].attn.encoding.row_embeddings.weight[3] += 1.0  # its own copy of the weights
        assert not torch.allclose(plain(x), model(x), atol=1e-6)


@pytest.mark.parametrize("p", [0.1, 0.5])
def test_dropout_mask_has_rate_p(p):
    torch.manual_seed(0)
    n = 1_000_001  # odd: the last int32 half is cut off
    mask = dropout_mask((n,), p)
    assert mask.dtype == torch.bool and mask.shape == (n,)
    sigma = (p * (1 - p) / n) ** 0.5
    assert abs(mask.float().mean().item() - p) < 5 * sigma
    assert not torch.equal(mask, dropout_mask((n,), p))


def test_quick_benchmark_writes_the_report(tmp_path, capsys):
    out = tmp_path / "bench" / "cpu.json"
    saved = bench_main(["--quick", "--out", str(out), "--device", "cpu"])
    assert out.exists() and not list(out.parent.glob(".*tmp"))  # atomic: no temporary left behind
    assert saved["machine"]["cpu"] and saved["machine"]["torch"] == torch.__version__
    assert saved["machine"]["usable_cores"] >= 1 and saved["machine"]["torch_threads"] >= 1
    assert set(saved["matmul_peak"]) == {"fp32", "bf16"}
    for dt, p in saved["matmul_peak"].items():  # utilisation divides by the better of start and end
        assert p["best"] == max(p["start"]["gflops"], p["end"]["gflops"]) > 0
        assert all(r["peak_gflops"] == p["best"] for r in saved["rows"] if r["dtype"] == dt)
    assert {"load_before", "load_after", "shared"} <= set(saved["peak_load"]["start"])
    assert isinstance(saved["load"]["peak_shared"], bool) and saved["machine"]["cpu_flags"] is not None
    rows = saved["rows"]
    assert {(r["model"], r["dtype"], r["impl"]) for r in rows} == {
        (m, d, i) for m in bench.MODELS for d in bench.DTYPES for i in bench.IMPLS
    }
    for r in rows:
        for field in (
            "images_per_s",
            "infer_images_per_s",
            "gflop_per_image",
            "achieved_gflops",
            "utilisation",
        ):
            assert r[field] > 0, field
        assert "peak_mem_mb" in r and r["batch"] == 4
    assert all("speedup_vs_plain" in r for r in rows if r["impl"] == "attnlib")
    assert "images_per_s" in capsys.readouterr().out  # the table was printed


@pytest.mark.parametrize(
    "argv, parameter",
    [
        (["--dtypes", "fp16"], "dtypes"),
        (["--models", "vit"], "models"),
        (["--shapes", "huge"], "shapes"),
        (["--repeats", "0"], "repeats"),
    ],
)
def test_bad_arguments_raise_config_error(argv, parameter, tmp_path):
    with pytest.raises(ConfigError) as err:
        bench_main(["--quick", "--out", str(tmp_path / "x.json")] + argv)
    assert err.value.parameter == parameter
    assert not (tmp_path / "x.json").exists()


def test_fast_dropout_module_keeps_the_expectation():
    from attnlib.attention.ops import Dropout

    torch.manual_seed(0)
    drop = Dropout(0.25)
    x = torch.full((400_000,), 2.0)
    y = drop(x)
    values = torch.unique(y)
    assert len(values) == 2 and values[0] == 0 and torch.isclose(values[1], torch.tensor(2.0 / 0.75))
    assert abs((y == 0).float().mean().item() - 0.25) < 0.005
    assert abs(y.mean().item() - 2.0) < 0.02
    assert torch.equal(drop.eval()(x), x)


def test_matmul_peak_is_the_fastest_call_over_sizes(monkeypatch):
    """Best of sizes and timed blocks: a block slowed by other work does not lower the peak."""
    blocks = iter([[0.5, 0.25, 0.4], [2.0, 1.0, 3.0]])  # seconds per call of each timed block: n=64, n=128
    monkeypatch.setattr(bench, "block_times", lambda fn, min_run_time: next(blocks))
    p = bench.matmul_peak(torch.float32, torch.device("cpu"), (64, 128))
    by = {64: 2 * 64**3 / 0.25 / 1e9, 128: 2 * 128**3 / 1.0 / 1e9}
    assert p["by_size"] == pytest.approx(by) and p["n"] == 128 and p["gflops"] == pytest.approx(by[128])


def test_shared_cores_are_refused_unless_forced(monkeypatch, tmp_path, cli):
    monkeypatch.setattr(machine.os, "getloadavg", lambda: (6.0, 5.0, 4.0))
    timed = []
    monkeypatch.setattr(bench, "matmul_peak", lambda *a, **k: timed.append(a) or {"gflops": 1.0})
    out = tmp_path / "b.json"
    for argv in (["--shapes", "budget", "--models", "quadratic_iso_9h"], ["--peak-only"]):
        with pytest.raises(machine.MachineBusy, match="--force"):
            bench_main([*argv, "--device", "cpu", "--out", str(out)])
    assert not timed and not out.exists()  # refused before measuring anything
    code, _, err = cli(["bench", "--peak-only", "--device", "cpu", "--out", str(out)])
    assert code == 6 and err.count("\n") == 1 and "refused: the load average" in err


def test_peak_only_writes_its_report_with_the_load(monkeypatch, tmp_path, capsys):
    monkeypatch.setattr(machine.os, "getloadavg", lambda: (0.1, 0.1, 0.1))
    out = tmp_path / "peak" / "cpu.json"
    saved = bench_main(["--peak-only", "--quick", "--device", "cpu", "--out", str(out)])
    assert saved["load"]["shared"] is False and saved["load"]["load_before"] == [0.1, 0.1, 0.1]
    assert set(saved["matmul_peak"]) == {"fp32", "bf16"} and saved["machine"]["torch_threads"] == 1
    assert saved["rows"] == [] and all(  # the benchmark's protocol, no model: the better of start and end
        p["best"] == max(p["start"]["gflops"], p["end"]["gflops"]) > 0 for p in saved["matmul_peak"].values()
    )
    printed = capsys.readouterr().out
    assert "matmul peak" in printed and "cores shared" not in printed and f"written {out}" in printed
