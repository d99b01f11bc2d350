"""The training loop: schedule, parameter groups, resume (after a crash, a signal, SIGKILL, a damaged
checkpoint) ending with the uninterrupted history, divergence, quadratic logging.
Its reliability tests (issue 9): a truncated checkpoint, a checkpoint rotation killed halfway."""

from __future__ import annotations

import dataclasses
import errno
import logging
import math
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pandas as pd
import pytest
import torch
from helpers import assert_intact, history, leftovers
from torch import nn

from attnlib.data import Batches, synthetic_cifar10
from attnlib.errors import ConfigError
from attnlib.lab.run import train_run
from attnlib.results.config import run_dir
from attnlib.train import (
    CHECKPOINT_SECONDS,
    CHECKPOINT_SECONDS_ENV,
    Checkpoints,
    Interrupted,
    Schedule,
    TrainConfig,
    TrainingDiverged,
    checkpoint_interval,
    fast_bf16,
    fit,
    make_optimizer,
    resolve_device,
    train_step,
)

CFG = TrainConfig(epochs=3, batch_size=16, lr=0.05, warmup=0.2, bf16=False)


class FakeQuadratic(nn.Module):
    """Stands for QuadraticEncoding: `centers` (heads, 2), `spreads`, `inverse_covariance()` (heads, 2, 2),
    and what it declares to the trainer (no weight decay on both; its logged state)."""

    def __init__(self, heads: int = 3):
        super().__init__()
        self.centers = nn.Parameter(torch.randn(heads, 2))
        self.spreads = nn.Parameter(torch.randn(heads, 2, 2) * 0.1 + torch.eye(2))

    def inverse_covariance(self):
        return self.spreads @ self.spreads.transpose(-1, -2)

    def no_weight_decay(self):
        return {"centers", "spreads"}

    def logged_state(self):
        return {"centers": self.centers, "inverse_covariance": self.inverse_covariance()}


class Tiny(nn.Module):
    """A small conv net with dropout (exercises the RNG) and two fake quadratic encodings."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 4, stride=4)
        self.drop = nn.Dropout(0.3)
        self.fc = nn.Linear(8 * 8 * 8, 10)
        self.enc = nn.ModuleList([FakeQuadratic(), FakeQuadratic()])

    def forward(self, x):
        scale = 1 + 0.01 * sum(e.centers.pow(2).sum() + e.inverse_covariance().sum() for e in self.enc)
        return self.fc(self.drop(torch.relu(self.conv(x))).flatten(1)) * scale


def batches(seed: int = 0):
    data = synthetic_cifar10(64, 32, seed=1)
    return Batches(data.train, 16, train=True, seed=seed), Batches(data.test, 16, train=False, seed=seed)


def run(ckpt=None, on_step=None, cfg=CFG, checkpoint_every=None, hook=None):
    """Train Tiny (seed 0) on `batches()`; `hook(model)` is called on the new model before training."""
    torch.manual_seed(0)
    model = Tiny()
    if hook is not None:
        hook(model)
    train_b, test_b = batches()
    out = fit(
        model,
        train_b,
        test_b,
        cfg,
        device="cpu",
        seed=0,
        checkpoint_dir=ckpt,
        progress=False,
        on_step=on_step,
        checkpoint_every=checkpoint_every,
    )
    return model, out


def strip(history):
    """History without the timing columns (which legitimately differ between runs)."""
    return [{k: v for k, v in row.items() if k not in ("seconds", "images_per_s")} for row in history]


@pytest.fixture(scope="module")
def reference():
    model, out = run()
    return {k: v.clone() for k, v in model.state_dict().items()}, out


def same_weights(a: dict, b: dict) -> bool:
    return all(torch.equal(a[k], b[k]) for k in a)


def no_problem(state) -> str:
    """A `Checkpoints.load` check that accepts any contents: these tests save stand-in states."""
    return ""


# ---------------------------------------------------------------------------------------------- pieces
def test_schedule_warmup_then_cosine():
    s = Schedule.from_config(TrainConfig(epochs=10, batch_size=1, lr=1.0, warmup=0.1), steps_per_epoch=10)
    assert s.warmup_steps == 10
    assert [s(t) for t in range(3)] == pytest.approx([0.1, 0.2, 0.3])
    assert s(9) == pytest.approx(1.0) and s(10) == pytest.approx(1.0)
    assert s(55) == pytest.approx(0.5)  # halfway through the cosine part
    assert s(99) == pytest.approx(0.5 * (1 + math.cos(math.pi * 89 / 90)))


def test_schedule_multistep_uses_epoch_fractions():
    cfg = TrainConfig(
        epochs=300, batch_size=1, lr=1.0, warmup=0.0, schedule="multistep", milestones=(80 / 300, 150 / 300)
    )
    s = Schedule.from_config(cfg, steps_per_epoch=2)
    assert s(159) == 1.0 and s(160) == pytest.approx(0.1) and s(300) == pytest.approx(0.01)


def test_no_weight_decay_on_centers_and_spreads():
    model = Tiny()
    opt = make_optimizer(model, CFG)
    decay, no_decay = opt.param_groups
    names = {id(p): n for n, p in model.named_parameters()}
    assert {names[id(p)].rsplit(".", 1)[1] for p in no_decay["params"]} == {"centers", "spreads"}
    assert no_decay["weight_decay"] == 0 and decay["weight_decay"] == CFG.weight_decay
    assert len(decay["params"]) + len(no_decay["params"]) == len(list(model.parameters()))


@pytest.mark.parametrize(
    "field,value",
    [
        ("epochs", 0),
        ("epochs", 1.5),
        ("schedule", "linear"),
        ("warmup", 1.0),
        ("lr", 0),
        ("grad_clip", 0),
    ],
)
def test_bad_train_config_raises_config_error_naming_the_field(field, value):
    kwargs = dict(epochs=1, batch_size=1, lr=0.1) | {field: value}
    with pytest.raises(ConfigError, match=field):
        TrainConfig(**kwargs)


@pytest.mark.parametrize("clip", [None, 1e-3])
def test_train_step_clips_the_global_gradient_norm(clip):
    """With plain SGD (no momentum, no decay) the update is -lr·g, so its norm is lr·min(|g|, clip)."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.Flatten(), nn.Linear(3 * 32 * 32, 10))
    optimizer = torch.optim.SGD(model.parameters(), lr=1.0)
    x, y = torch.randn(8, 3, 32, 32), torch.randint(0, 10, (8,))
    before = torch.cat([p.detach().flatten().clone() for p in model.parameters()])
    _, _, norm = train_step(model, optimizer, x, y, 0.0, False, clip)
    step = torch.cat([p.detach().flatten() for p in model.parameters()]) - before
    assert norm > 10 * 1e-3  # the norm is reported before clipping
    if clip is None:
        torch.testing.assert_close(norm, step.norm(), rtol=1e-4, atol=0)  # lr 1: the update is -g
        assert step.norm() > 10 * 1e-3  # the unclipped update is far larger than the clip below
    else:
        torch.testing.assert_close(step.norm(), torch.tensor(clip), rtol=1e-4, atol=0)


def test_the_reported_gradient_norm_is_the_one_clipping_reports():
    """Without clipping, train_step reports ‖g‖₂ as clip_grad_norm_ does (bitwise): the gradient's norm."""
    norms = []
    for clip in (None, 1e9):
        torch.manual_seed(0)
        model = Tiny().eval()  # no dropout: the same gradients both times
        optimizer = torch.optim.SGD(model.parameters(), lr=0.0)
        x, y = next(iter(batches()[0].epoch(0)))
        norms.append(train_step(model, optimizer, x, y, 0.0, False, clip)[2])
    flat = torch.cat([p.grad.flatten() for p in model.parameters() if p.grad is not None])
    assert torch.equal(norms[0], norms[1])
    torch.testing.assert_close(norms[0], flat.norm(), rtol=1e-6, atol=0)


def test_device_policy_refuses_unknown_and_unavailable_devices():
    assert resolve_device("cpu") == torch.device("cpu")
    with pytest.raises(ConfigError, match="device"):
        resolve_device("tpu")
    if not torch.cuda.is_available():
        with pytest.raises(ConfigError, match="device"):
            resolve_device("cuda")
    assert isinstance(fast_bf16(torch.device("cpu")), bool)


# ----------------------------------------------------------------------------------------------- fit
def test_history_and_quadratic_log(reference):
    _, out = reference
    assert [r["epoch"] for r in out.history] == [1, 2, 3]
    for row in out.history:
        assert set(row) == {
            "epoch",
            "train_loss",
            "train_acc",
            "test_loss",
            "test_acc",
            "lr",
            "seconds",
            "images_per_s",
            "grad_norm",
            "bf16",  # the epoch's precision: a resume on another machine may change it
        }
        assert row["bf16"] in (0, 1)
        assert 0 <= row["test_acc"] <= 1 and row["images_per_s"] > 0
        assert math.isfinite(row["grad_norm"]) and row["grad_norm"] > 0
    assert out.history[-1]["train_loss"] < out.history[0]["train_loss"]
    q = out.quadratic
    assert q["centers"].shape == (4, 2, 3, 2) and q["inverse_covariance"].shape == (4, 2, 3, 2, 2)
    assert not torch.equal(q["centers"][0], q["centers"][-1])  # the centres move


def test_resume_after_crash_equals_uninterrupted(tmp_path, reference):
    ref_weights, ref = reference

    def crash(epoch, step, x, y):
        if (epoch, step) == (1, 2):
            raise RuntimeError("simulated crash")

    with pytest.raises(RuntimeError, match="simulated"):
        run(tmp_path, crash)
    state = torch.load(tmp_path / "last.pt", weights_only=True)
    assert (state["epoch"], state["step"]) == (1, 0)
    model, out = run(tmp_path)
    assert out.resumed.startswith("last.pt (epoch 1")
    assert strip(out.history) == strip(ref.history)
    assert same_weights(model.state_dict(), ref_weights)
    assert torch.equal(out.quadratic["centers"], ref.quadratic["centers"])


def test_sigterm_mid_epoch_saves_and_resumes(tmp_path, reference):
    ref_weights, ref = reference

    def signal_self(epoch, step, x, y):
        if (epoch, step) == (1, 1):
            os.kill(os.getpid(), signal.SIGTERM)

    with pytest.raises(Interrupted, match="rerun"):
        run(tmp_path, signal_self)
    state = torch.load(tmp_path / "last.pt", weights_only=True)
    assert (state["epoch"], state["step"]) == (1, 2)  # the step during which the signal came completed
    assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL  # handlers restored
    model, out = run(tmp_path)
    assert strip(out.history) == strip(ref.history)
    assert same_weights(model.state_dict(), ref_weights)


def test_time_based_checkpoint_mid_epoch_then_resume_equals_uninterrupted(tmp_path, reference):
    """A run that checkpoints by time (here after every step) and dies without a signal in the middle of
    epoch 2 resumes from its last mid-epoch checkpoint and ends exactly as the uninterrupted run."""
    ref_weights, ref = reference

    def dies(epoch, step, x, y):
        if (epoch, step) == (1, 3):
            raise RuntimeError("killed")

    with pytest.raises(RuntimeError, match="killed"):
        run(tmp_path, dies, checkpoint_every=0)
    state = torch.load(tmp_path / "last.pt", weights_only=True)
    assert (state["epoch"], state["step"]) == (1, 3)  # steps 0-2 of epoch 2 kept: nothing lost
    model, out = run(tmp_path)
    assert out.resumed == "last.pt (epoch 1, step 3)"
    assert strip(out.history) == strip(ref.history)
    assert same_weights(model.state_dict(), ref_weights)
    assert torch.equal(out.quadratic["centers"], ref.quadratic["centers"])


def test_cpu_time_counts_work_not_waiting(tmp_path):
    """train_cpu_seconds is what the process used: a run that waits (here 0.1 s per step, as it would for a
    core another job holds) has that wait in its wall time but not in its CPU time."""
    _, out = run(tmp_path, lambda epoch, step, x, y: time.sleep(0.1))
    waited = 0.1 * CFG.epochs * len(batches()[0])
    assert out.train_seconds >= waited
    assert 0 < out.train_cpu_seconds < out.train_seconds - 0.8 * waited


def test_cpu_time_survives_a_mid_epoch_resume_and_is_unknown_after_an_older_checkpoint(tmp_path):
    """A run killed mid-epoch and resumed adds its CPU time to the checkpoint's (which it saved, with the
    epoch's own so far); a checkpoint saved before CPU time was recorded leaves the run's CPU time unknown
    (None), never a part passed off as the whole."""

    def dies(epoch, step, x, y):
        if (epoch, step) == (1, 3):
            raise RuntimeError("killed")

    with pytest.raises(RuntimeError, match="killed"):
        run(tmp_path / "a", dies, checkpoint_every=0)
    state = torch.load(tmp_path / "a" / "last.pt", weights_only=True)
    before = state["train_cpu_seconds"] + state["ranks"][0]["partial"]["cpu_seconds"]
    assert state["train_cpu_seconds"] > 0 and state["ranks"][0]["partial"]["cpu_seconds"] > 0
    _, out = run(tmp_path / "a")
    assert out.train_cpu_seconds > before
    with pytest.raises(RuntimeError, match="killed"):
        run(tmp_path / "b", dies, checkpoint_every=0)
    state = torch.load(tmp_path / "b" / "last.pt", weights_only=True)
    del state["train_cpu_seconds"], state["ranks"][0]["partial"]["cpu_seconds"]  # as saved before
    torch.save(state, tmp_path / "b" / "last.pt")
    _, out = run(tmp_path / "b")
    assert out.resumed == "last.pt (epoch 1, step 3)" and out.train_cpu_seconds is None


@pytest.mark.parametrize("every", [0, 3600])
def test_checkpoint_interval_decides_mid_epoch_saves_and_changes_no_result(
    tmp_path, reference, monkeypatch, every
):
    """Interval 0: a checkpoint after every step but an epoch's last (the end-of-epoch one follows);
    a long interval: end-of-epoch checkpoints only. Either way the run is the uninterrupted one."""
    ref_weights, ref = reference
    saved = []
    save = Checkpoints.save

    def record(self, state):
        saved.append((state["epoch"], state["step"]))
        save(self, state)

    monkeypatch.setattr(Checkpoints, "save", record)
    model, out = run(tmp_path, checkpoint_every=every)
    steps = 4  # 64 images, batch 16
    ends = [(e + 1, 0) for e in range(CFG.epochs)]
    if every == 0:
        assert saved == [p for e in range(CFG.epochs) for p in [(e, s) for s in range(1, steps)] + [ends[e]]]
    else:
        assert saved == ends
    assert strip(out.history) == strip(ref.history)
    assert same_weights(model.state_dict(), ref_weights)


def test_checkpoint_interval_setting(monkeypatch):
    monkeypatch.delenv(CHECKPOINT_SECONDS_ENV, raising=False)
    assert checkpoint_interval() == CHECKPOINT_SECONDS == 120
    assert checkpoint_interval(0) == 0 and checkpoint_interval(2.5) == 2.5
    monkeypatch.setenv(CHECKPOINT_SECONDS_ENV, "30")
    assert checkpoint_interval() == 30 and checkpoint_interval(5) == 5  # the argument wins
    for bad in ("soon", "-1", "nan"):
        monkeypatch.setenv(CHECKPOINT_SECONDS_ENV, bad)
        with pytest.raises(
            ConfigError, match=f"{CHECKPOINT_SECONDS_ENV}: got .*; allowed: a number of seconds >= 0"
        ):
            checkpoint_interval()
    monkeypatch.delenv(CHECKPOINT_SECONDS_ENV)
    for bad in (-1, True, "5"):
        with pytest.raises(ConfigError, match="checkpoint_every"):
            checkpoint_interval(bad)


def test_checkpoint_on_a_full_disk_names_the_file_and_keeps_the_last_one(tmp_path, monkeypatch):
    """A checkpoint write that hits ENOSPC (its fsync fails so; a temporary file linked to /dev/full is no
    longer written through: test_store) raises an OSError naming last.pt, leaves no temporary file, and the
    previous last.pt is still the newest usable checkpoint."""
    state = {"model": {}, "optimizer": {}, "scheduler": {}, "epoch": 1, "step": 0, "history": []}
    checkpoints = Checkpoints(tmp_path, "f")
    checkpoints.save(state)

    def full(fd):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr("attnlib.util.os.fsync", full)
    with pytest.raises(OSError) as err:
        checkpoints.save({**state, "epoch": 2})
    assert err.value.errno == errno.ENOSPC and err.value.filename == str(tmp_path / "last.pt")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["last.pt"]
    assert checkpoints.load(no_problem)[0]["epoch"] == 1


def test_truncated_checkpoint_falls_back_to_previous(tmp_path, reference, caplog):
    ref_weights, ref = reference

    def crash(epoch, step, x, y):
        if epoch == 2:
            raise RuntimeError("simulated crash")

    with pytest.raises(RuntimeError):
        run(tmp_path, crash)
    last = tmp_path / "last.pt"
    last.write_bytes(last.read_bytes()[: last.stat().st_size // 2])  # truncated, as by a full disk
    with caplog.at_level(logging.WARNING, logger="attnlib"):
        model, out = run(tmp_path)
    assert "damaged" in caplog.text and "previous" in caplog.text
    assert out.resumed.startswith("previous.pt (epoch 1")
    assert strip(out.history) == strip(ref.history)
    assert same_weights(model.state_dict(), ref_weights)


def test_foreign_checkpoint_is_not_resumed(tmp_path, caplog):
    Checkpoints(tmp_path, fingerprint="other").save(
        {"model": {}, "optimizer": {}, "scheduler": {}, "epoch": 1, "step": 0, "history": []}
    )
    with caplog.at_level(logging.WARNING, logger="attnlib"):
        _, out = run(tmp_path)
    assert out.resumed is None and "different configuration" in caplog.text
    assert len(out.history) == CFG.epochs


def test_checkpoint_of_another_resolved_model_is_not_resumed(tmp_path, caplog):
    """A checkpoint records its model's resolved configuration (every field of its config dataclass):
    one whose model differs (here: a default changed, same fingerprint) is not resumed, and the warning
    names the field; one written before checkpoints recorded it is checked by its fingerprint only."""
    from attnlib.models.vit import ViTConfig

    @dataclasses.dataclass
    class Changed(ViTConfig):
        attn_dropout: float = 0.3  # another default

    state = {"model": {}, "optimizer": {}, "scheduler": {}, "epoch": 1, "step": 0, "history": []}
    Checkpoints(tmp_path, "f", ViTConfig()).save(state)
    assert Checkpoints(tmp_path, "f", ViTConfig()).load(no_problem)[0]["epoch"] == 1
    with caplog.at_level(logging.WARNING, logger="attnlib"):
        assert Checkpoints(tmp_path, "f", Changed()).load(no_problem) == (None, None)
    assert "different configuration (model_resolved.attn_dropout: 0.1 saved, 0.3 now)" in caplog.text
    Checkpoints(tmp_path, "f").save(state)  # no model configuration recorded (an older checkpoint)
    assert "model_resolved" not in torch.load(tmp_path / "last.pt", weights_only=True)
    assert Checkpoints(tmp_path, "f", Changed()).load(no_problem)[0]["epoch"] == 1


def test_nan_loss_stops_and_keeps_last_good_checkpoint(tmp_path):
    def poison(epoch, step, x, y):
        if epoch == 1 and step == 1:
            x.fill_(float("nan"))

    with pytest.raises(TrainingDiverged, match="epoch 2, step 2"):
        run(tmp_path, poison)
    state = torch.load(tmp_path / "last.pt", weights_only=True)
    assert state["epoch"] == 1 and all(torch.isfinite(v).all() for v in state["model"].values())


# --------------------------------------------------------------------------------------------- SIGKILL
WORKER = textwrap.dedent(
    """
    import sys, time, torch
    sys.path.insert(0, {tests!r})
    from test_train import run
    torch.set_num_threads(1)
    def stall(epoch, step, x, y):
        if (epoch, step) == ({epoch}, {step}):
            open({marker!r}, "w").close()
            time.sleep(600)
    run({ckpt!r}, stall, checkpoint_every={every})
    """
)


def _kill_worker(tmp_path, ckpt, epoch: int, step: int = 1, every=None) -> None:
    """Run `run` in a child until it reaches (epoch, step) and stalls there, then SIGKILL it."""
    marker = tmp_path / f"marker{epoch}"
    code = WORKER.format(
        tests=os.path.dirname(__file__),
        epoch=epoch,
        step=step,
        marker=str(marker),
        ckpt=str(ckpt),
        every=every,
    )
    proc = subprocess.Popen([sys.executable, "-c", code])
    deadline = time.time() + 120
    while not marker.exists() and proc.poll() is None and time.time() < deadline:
        time.sleep(0.05)
    assert marker.exists(), "worker did not reach the kill point"
    proc.send_signal(signal.SIGKILL)
    proc.wait()


@pytest.mark.slow
def test_sigkill_twice_then_resume_equals_uninterrupted(tmp_path, reference):
    """Killed by SIGKILL in epoch 2 and again in epoch 3: at most the current epoch is lost each time."""
    ref_weights, ref = reference
    ckpt = tmp_path / "ckpt"
    for epoch in (1, 2):
        _kill_worker(tmp_path, ckpt, epoch, every=3600)
        state = torch.load(ckpt / "last.pt", weights_only=True)
        assert (state["epoch"], state["step"]) == (epoch, 0)
    model, out = run(ckpt)
    assert strip(out.history) == strip(ref.history)
    assert same_weights(model.state_dict(), ref_weights)


@pytest.mark.slow
def test_sigkill_mid_epoch_loses_only_the_time_since_the_last_checkpoint(tmp_path, reference):
    """As a notebook kernel whose parent died: killed without a signal it could catch, in the middle of
    epoch 2. With time-based checkpoints (interval 0 here: after every step) the steps before the kill
    are kept, and the resumed run ends exactly as the uninterrupted one."""
    ref_weights, ref = reference
    _kill_worker(tmp_path, tmp_path / "ckpt", epoch=1, step=3, every=0)
    state = torch.load(tmp_path / "ckpt" / "last.pt", weights_only=True)
    assert (state["epoch"], state["step"]) == (1, 3)
    model, out = run(tmp_path / "ckpt")
    assert out.resumed == "last.pt (epoch 1, step 3)"
    assert strip(out.history) == strip(ref.history)
    assert same_weights(model.state_dict(), ref_weights)


def test_every_run_trains_all_its_epochs_whatever_the_test_set_says(tmp_path, monkeypatch):
    """No decision of the loop reads the test set: with the evaluation (and the probe) returning anything,
    flat or rising, the run trains every epoch and ends with the same weights and training history; the
    test columns of the history are all that changes. A resume of the finished run trains nothing."""
    import attnlib.train.loop as loop

    # long enough for the former plateau rule (10 epochs) to have fired
    cfg = dataclasses.replace(CFG, epochs=12)
    outcomes = {}
    for name, accuracy in (
        ("flat", lambda e: 0.5),
        ("rising", lambda e: 0.1 * e),
        ("nan", lambda e: math.nan),
    ):
        calls = iter(range(1, 100))
        monkeypatch.setattr(
            loop, "evaluate", lambda *a, accuracy=accuracy, calls=calls, **k: (1.0, accuracy(next(calls)))
        )
        model, out = run(tmp_path / name, cfg=cfg)
        assert len(out.history) == cfg.epochs, name
        outcomes[name] = ({k: v.clone() for k, v in model.state_dict().items()}, out)
    train_columns = ("epoch", "train_loss", "train_acc", "lr", "grad_norm")
    (ref_w, ref), *others = outcomes.values()
    for weights, out in others:
        assert same_weights(weights, ref_w)
        assert [{k: r[k] for k in train_columns} for r in out.history] == [
            {k: r[k] for k in train_columns} for r in ref.history
        ]
    steps = []
    _, again = run(tmp_path / "flat", cfg=cfg, on_step=lambda *a: steps.append(a))
    assert steps == [] and len(again.history) == cfg.epochs


def test_the_loop_has_no_stopping_rule():
    """The plateau stop is gone from the library, not left unused."""
    import attnlib.train as trainer

    for gone in ("converged", "late_gain", "PLATEAU_WINDOW", "PLATEAU_MIN_EPOCHS"):
        assert not hasattr(trainer, gone), gone
    with pytest.raises(TypeError):
        TrainConfig(epochs=1, batch_size=1, lr=0.1, plateau=0.005)


def test_probe_columns_join_every_history_row():
    torch.manual_seed(0)
    train_b, test_b = batches()
    calls = []

    def probe(model):
        calls.append(model.training)
        return {"distance_0": 1.5, "peak_0": 2.0}

    out = fit(Tiny(), train_b, test_b, CFG, device="cpu", progress=False, probe=probe)
    assert calls == [False] * CFG.epochs  # after the evaluation, in eval mode
    assert all(row["distance_0"] == 1.5 and row["peak_0"] == 2.0 for row in out.history)


# --------------------------------------------------------------------------- reliability: damaged checkpoints
def _crash_in_epoch(n: int):
    def crash(epoch, step, x, y):
        if epoch == n:
            raise RuntimeError("simulated crash")

    return crash


@pytest.mark.parametrize("damaged", [("last.pt",), ("last.pt", "previous.pt")])
def test_truncated_checkpoint_falls_back_or_restarts_saying_so(tmp_path, damaged, caplog):
    """A run that crashed in epoch 3 left last.pt (epoch 2) and previous.pt (epoch 1). With last.pt
    truncated the rerun resumes from previous.pt; with both truncated it trains from scratch; either way it
    says so and ends with the uninterrupted history."""
    ref = train_run("resnet18", "smoke", epochs=3, results_dir=tmp_path / "ref")
    with pytest.raises(RuntimeError, match="simulated"):
        train_run("resnet18", "smoke", epochs=3, results_dir=tmp_path, on_step=_crash_in_epoch(2))
    checkpoints = run_dir(tmp_path, "resnet18", "smoke") / "checkpoints"
    for name in damaged:
        raw = (checkpoints / name).read_bytes()
        (checkpoints / name).write_bytes(raw[: len(raw) // 3])  # as by a full disk
    with caplog.at_level(logging.INFO, logger="attnlib"):
        result = train_run("resnet18", "smoke", epochs=3, results_dir=tmp_path)
    said = [r.getMessage() for r in caplog.records if "last.pt is damaged" in r.getMessage()]
    assert len(said) == 1 and "\n" not in said[0], said  # what is wrong and where it goes on from: one line
    resumed = result.metrics["provenance"]["resumed_from"]
    if len(damaged) == 1:
        assert said[0].endswith("; resuming from previous.pt (epoch 1)")
        assert resumed.startswith("previous.pt (epoch 1")
    else:
        assert "previous.pt is damaged" in said[0] and said[0].endswith("; training from scratch")
        assert resumed is None
    pd.testing.assert_frame_equal(history(result), history(ref), check_exact=True)
    assert_intact(result.path, result.config)


def test_checkpoint_rotation_always_leaves_a_last_checkpoint(tmp_path, monkeypatch):
    """Killed between keeping the old last.pt as previous.pt and renaming the new one onto last.pt, the
    folder still holds a complete last.pt (the old one): nothing to fall back from."""
    from attnlib.train import Checkpoints

    def state(epoch):
        return {"model": {}, "optimizer": {}, "scheduler": {}, "epoch": epoch, "step": 0, "history": []}

    checkpoints = Checkpoints(tmp_path, "f")
    checkpoints.save(state(1))
    replace = os.replace

    def killed_before_the_last_rename(src, dst, **folders):
        if Path(dst).name == "last.pt":
            raise KeyboardInterrupt("killed")
        replace(src, dst, **folders)

    monkeypatch.setattr(os, "replace", killed_before_the_last_rename)
    with pytest.raises(KeyboardInterrupt):
        checkpoints.save(state(2))
    monkeypatch.undo()
    loaded, where = checkpoints.load(no_problem)
    assert loaded["epoch"] == 1 and where == "last.pt (epoch 1)"
    assert leftovers(tmp_path) == []
    checkpoints.save(state(2))
    assert checkpoints.load(no_problem)[0]["epoch"] == 2
    assert torch.load(checkpoints.previous, weights_only=True)["epoch"] == 1


def test_fit_refuses_training_batches_that_yield_no_step():
    """fit takes any object with .epoch(e) and len(): one with no batch (a batch larger than the data) is a
    ConfigError naming batch_size, before any training or checkpoint."""

    class NoSteps:
        def __len__(self):
            return 0

        def epoch(self, e):
            return iter(())

    _, test_b = batches()
    with pytest.raises(ConfigError, match="batch_size"):
        fit(Tiny(), NoSteps(), test_b, CFG, device="cpu", progress=False)
