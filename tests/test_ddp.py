"""DistributedDataParallel on the CPU: 2 processes with gloo, started by torchrun.

One torchrun launch runs this file as a script on both ranks. Each rank (1) trains a small dropout-free
model with `fit`, recording the batches it saw, and saves what it saw and its final weights; (2) runs the
CLI's `train` on a smoke experiment. The test then checks: the ranks saw disjoint shards that together make
each global batch, they end with identical weights, equal to a single-process run on the same global batches
(gradients are averaged across ranks), and the CLI run wrote one complete result (rank 0 only).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from helpers import TINY_PAPER

from attnlib.data import Batches, synthetic_cifar10
from attnlib.models import make
from attnlib.train import TrainConfig, fit

CFG = TrainConfig(epochs=2, batch_size=16, lr=0.05, warmup=0.1, bf16=False)


def train_small(rank: int = 0, world_size: int = 1, record=None):
    torch.manual_seed(0)
    model = make("paper", **TINY_PAPER)
    data = synthetic_cifar10(64, 32, seed=3)
    kw = dict(seed=0, device="cpu", rank=rank, world_size=world_size)
    out = fit(
        model, Batches(data.train, 16, train=True, **kw), Batches(data.test, 16, train=False, **kw), CFG,
        device="cpu", progress=False, on_step=record,
    )  # fmt: skip
    return model, out


def worker(out_dir: Path) -> None:
    """Runs on every rank under torchrun."""
    from attnlib.lab.cli import main
    from attnlib.train import distributed_session

    torch.set_num_threads(1)
    with distributed_session("cpu") as (info, _):
        seen = []
        model, out = train_small(
            info.rank, info.world_size, lambda e, s, x, y: seen.append((e, s, x.clone(), y.clone()))
        )
        torch.save(
            {"seen": seen, "weights": model.state_dict(), "history": out.history},
            out_dir / f"rank{info.rank}.pt",
        )
        code = main(
            ["train", "quadratic_iso_9h", "--preset", "smoke", "--results-dir", str(out_dir / "results")]
        )
        (out_dir / f"rank{info.rank}.code").write_text(str(code))


@pytest.mark.slow
def test_two_gloo_processes_train_like_one_on_the_global_batches(tmp_path):
    env = {**os.environ, "OMP_NUM_THREADS": "1", "ATTNLIB_DDP_OUT": str(tmp_path)}
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2", __file__]
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    r0, r1 = (torch.load(tmp_path / f"rank{r}.pt", weights_only=True) for r in (0, 1))

    # each rank got its shard of every global batch: disjoint, together the whole batch
    steps = len(r0["seen"])
    assert steps == len(r1["seen"]) == CFG.epochs * (64 // 16)
    data = synthetic_cifar10(64, 32, seed=3)
    full = list(Batches(data.train, 16, train=True, seed=0).epoch(0))
    for (e, s, x0, y0), (_, _, x1, y1) in zip(r0["seen"], r1["seen"], strict=True):
        assert x0.shape[0] == x1.shape[0] == 8 and not torch.equal(x0, x1)
        if e == 0:
            torch.testing.assert_close(torch.cat([x0, x1]).sort(0).values, full[s][0].sort(0).values)
            assert torch.equal(torch.cat([y0, y1]).sort().values, full[s][1].sort().values)

    # identical weights on both ranks, equal to one process on the same global batches
    for k in r0["weights"]:
        assert torch.equal(r0["weights"][k], r1["weights"][k]), k
    single, out = train_small()
    for k, v in single.state_dict().items():
        torch.testing.assert_close(r0["weights"][k], v, rtol=1e-4, atol=1e-5)
    assert [round(r["test_acc"], 6) for r in r0["history"]] == [round(r["test_acc"], 6) for r in out.history]

    # the CLI under torchrun: both ranks succeed, rank 0 wrote one complete result
    assert [(tmp_path / f"rank{r}.code").read_text() for r in (0, 1)] == ["0", "0"]
    folder = tmp_path / "results" / "quadratic_iso_9h" / "smoke"
    metrics = json.loads((folder / "metrics.json").read_text())
    assert metrics["provenance"]["world_size"] == 2 and metrics["provenance"]["test_images"] == 32
    assert not (folder / "run.lock").exists()


if __name__ == "__main__":
    worker(Path(os.environ["ATTNLIB_DDP_OUT"]))
