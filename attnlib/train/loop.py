"""One training loop for every experiment: SGD, warm-up + cosine schedule, bf16 autocast, checkpoints, DDP.

`fit` trains a model in place on two batch sources that follow the data contract (`.epoch(e)` yields
`(x, y)` deterministically in `(seed, e)`, `len()` = steps per epoch) and returns the per-epoch history.

Reproducibility: data order depends only on `(seed, epoch)`, the global RNG (dropout) is re-seeded from
`(seed, epoch, rank)` at the start of every epoch, and a checkpoint holds the model, the optimizer, the
schedule position, the history and the RNG states. Checkpoints are written at the end of every epoch, in
the middle of one every CHECKPOINT_SECONDS of training (so that a kill without a signal loses at most
that), and after SIGINT/SIGTERM. A run resumed from any of them ends with the same history as an
uninterrupted run.

Distributed: under `torchrun` (env `WORLD_SIZE` > 1) `init_distributed` joins the process group (gloo on
the CPU, nccl on CUDA) and `fit` wraps the model in DistributedDataParallel; each rank gets its shard of every
global batch from `Batches(..., rank, world_size)`; only rank 0 writes checkpoints.
"""

from __future__ import annotations

import functools
import itertools
import logging
import math
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import nn

from attnlib.config import TrainConfig
from attnlib.errors import ConfigError
from attnlib.models import logged_state
from attnlib.train.checkpoint import (
    Checkpoints,
    _rng_state,
    _set_rng_state,
    checkpoint_interval,
    checkpoint_problem,
)
from attnlib.train.device import autocast, resolve_device, use_bf16
from attnlib.train.distributed import DistInfo, _all_reduce, _StopRequest, current_dist
from attnlib.train.schedule import Schedule, make_optimizer

log = logging.getLogger("attnlib")


class TrainingDiverged(RuntimeError):
    """The loss became NaN or infinite; the last good checkpoint is kept."""


class Interrupted(RuntimeError):
    """SIGINT/SIGTERM arrived; a checkpoint was saved and the run can be resumed by rerunning it."""


@dataclass
class FitResult:
    """history: one dict per epoch (epoch, train_loss, train_acc, test_loss, test_acc, lr, seconds,
    images_per_s, grad_norm: mean global gradient norm before clipping). quadratic: None or, for a model
    whose modules log a state (`attnlib.models.logged_state`: the quadratic encodings), that state over
    training: {"epoch": (E+1,), "centers": (E+1, layers, heads, 2), "inverse_covariance":
    (E+1, layers, heads, 2, 2)}, row 0 = initialisation, row e = after epoch e."""

    history: list[dict]
    quadratic: dict[str, torch.Tensor] | None
    train_seconds: float
    resumed: str | None  # description of the checkpoint resumed from, or None


def _seed_epoch(seed: int, epoch: int, rank: int) -> None:
    # dropout and any other global-RNG use depend only on (seed, epoch, rank)
    torch.manual_seed((seed * 1_000_003 + epoch) * 1_009 + rank)


def train_step(
    model: nn.Module,
    optimizer,
    x: torch.Tensor,
    y: torch.Tensor,
    label_smoothing: float,
    bf16: bool,
    grad_clip: float | None = None,
):
    """One SGD step: forward under autocast, cross-entropy in fp32 (with label smoothing), backward,
    optional clipping of the global gradient norm, update. Without an optimizer (a benchmark timing the
    step), no update: the gradients are freed instead.
    x (B, 3, 32, 32), y (B,) -> (loss (), logits (B, classes), gradient norm () before clipping), detached."""
    with autocast(x.device, bf16):
        logits = model(x)
    loss = F.cross_entropy(logits.float(), y, label_smoothing=label_smoothing)
    if optimizer is not None:
        optimizer.zero_grad(set_to_none=True)
    loss.backward()
    if grad_clip is not None:
        norm = nn.utils.clip_grad_norm_(model.parameters(), grad_clip)  # ‖g‖₂ before g ← g·min(1, c/‖g‖₂)
    else:
        norm = grad_norm(model)
    if optimizer is not None:
        optimizer.step()
    else:
        model.zero_grad(set_to_none=True)
    return loss.detach(), logits.detach(), norm.detach()


def grad_norm(model: nn.Module) -> torch.Tensor:
    """‖g‖₂ over every parameter gradient of `model` (0 when there is none); the gradients are untouched.
    The norm that `clip_grad_norm_` reports, computed the same way (`get_total_norm`)."""
    return nn.utils.get_total_norm([p.grad for p in model.parameters() if p.grad is not None])


@torch.no_grad()
def evaluate(model: nn.Module, batches, device: torch.device, bf16: bool, info: DistInfo | None = None):
    """(mean cross-entropy, accuracy) over every test batch (all ranks' shards together)."""
    info = info or current_dist()
    model.eval()
    stats = torch.zeros(3, dtype=torch.float64, device=device)  # loss sum, correct, count
    for x, y in batches.epoch(0):
        if y.numel() == 0:  # a rank's empty shard of the last partial batch
            continue
        with autocast(device, bf16):
            logits = model(x)
        stats[0] += F.cross_entropy(logits.float(), y, reduction="sum")
        stats[1] += (logits.argmax(1) == y).sum()
        stats[2] += y.numel()
    _all_reduce(stats, info)
    loss, correct, n = stats.tolist()
    return loss / max(n, 1), correct / max(n, 1)


def fit(
    model: nn.Module,
    train_batches,
    test_batches,
    cfg: TrainConfig,
    *,
    device: torch.device | str | None = None,
    seed: int = 0,
    checkpoint_dir: str | Path | None = None,
    fingerprint: str = "",
    progress: bool | None = None,
    desc: str = "train",
    on_step: Callable[[int, int, torch.Tensor, torch.Tensor], None] | None = None,
    probe: Callable[[nn.Module], dict[str, float]] | None = None,
    checkpoint_every: float | None = None,
) -> FitResult:
    """Train `model` (in place) for `cfg.epochs` epochs, resuming from `checkpoint_dir` when it holds a
    checkpoint with the same `fingerprint` and, for a model with a config dataclass `model.cfg`, the same
    resolved model configuration (`Checkpoints`).

    Checkpoints are written at the end of every epoch and, mid-epoch, once `checkpoint_every` seconds
    (`checkpoint_interval`: default CHECKPOINT_SECONDS) have passed since the last one; a run resumed from
    a mid-epoch checkpoint continues with the same data, RNG states and running sums.

    train_batches / test_batches: objects with `.epoch(e)` -> iterator of (x (B, 3, 32, 32), y (B,)) on
    `device` and `len()`; under DDP each yields this rank's shard of every global batch.
    on_step(epoch, step, x, y) is called before every optimisation step (tests use it to record or
    interrupt). probe(model) is called after every epoch's evaluation; its columns join the epoch's history
    row (attnlib.measures.probe: per-layer attention measures). The test set is evaluated and probed after
    every epoch for the history only: the run always trains `cfg.epochs` epochs, no decision reads it.
    Raises TrainingDiverged on a non-finite loss and Interrupted after SIGINT/SIGTERM (both leave the last
    good checkpoint in place).
    """
    if progress is None:
        progress = bool(getattr(sys.stderr, "isatty", lambda: False)())
    run = _Run(model, train_batches, cfg, resolve_device(device), desc, progress, on_step)
    config = getattr(model, "cfg", None)  # the model's config dataclass: its resolved fields are checked too
    ckpt = Checkpoints(checkpoint_dir, fingerprint, config) if checkpoint_dir is not None else None
    interval = checkpoint_interval(checkpoint_every) if ckpt is not None else math.inf
    state = run.restore(ckpt)
    resumed_complete = bool(state.history) and state.epoch >= cfg.epochs  # nothing left to train
    state.last_saved = time.monotonic()
    with _StopRequest() as stop:
        for epoch in range(state.epoch, cfg.epochs):  # every epoch: nothing here reads the test set to stop
            stats, clock = run.train_epoch(epoch, state, ckpt, stop, interval, seed)
            row = run.record(epoch, state, stats, clock, test_batches, probe)
            run.log_row(row)
            run.save(ckpt, state, epoch + 1, 0)
            state.last_saved = time.monotonic()
            if stop.signum is not None:  # signal during evaluation: the epoch checkpoint is already saved
                raise Interrupted(
                    f"{desc}: interrupted after epoch {epoch + 1}; checkpoint saved; rerun to resume"
                )
    if resumed_complete:  # a checkpoint's history is not trusted for the result: evaluate its weights
        run.reevaluate(state, test_batches)
    model.eval()
    return FitResult(state.history, state.logged_over_epochs(), state.train_seconds, state.resumed)


@dataclass
class _State:
    """What a checkpoint carries across epochs: the history so far, where to start (epoch, and step within
    it for a mid-epoch checkpoint with this rank's running sums in `partial`), the training time, the
    logged model state per epoch (`attnlib.models.logged_state`), and the checkpoint resumed from."""

    history: list[dict] = field(default_factory=list)
    epoch: int = 0
    step: int = 0
    partial: dict | None = None
    train_seconds: float = 0.0
    logged: dict[str, list[torch.Tensor]] | None = None
    resumed: str | None = None
    last_saved: float = 0.0  # time.monotonic() of the last checkpoint

    def logged_over_epochs(self) -> dict[str, torch.Tensor] | None:
        if self.logged is None:
            return None
        epochs = len(next(iter(self.logged.values())))
        return {"epoch": torch.arange(epochs), **{k: torch.stack(v) for k, v in self.logged.items()}}


class _EpochClock:
    """Seconds of one epoch so far, counting those spent before a mid-epoch resume (`prior`)."""

    def __init__(self, prior: float = 0.0):
        self.prior, self.start = prior, time.perf_counter()
        self.train = 0.0  # seconds of training, without the evaluation (set at the end of the steps)

    def __call__(self) -> float:
        return self.prior + time.perf_counter() - self.start


class _Run:
    """The pieces of one `fit`: the model (and its DDP wrapper), optimizer, schedule, device and dtype
    policy, and the steps of the loop: restore, train an epoch, record its row, save."""

    def __init__(self, model, train_batches, cfg: TrainConfig, device, desc: str, progress: bool, on_step):
        self.model, self.train_batches, self.cfg, self.device = model.to(device), train_batches, cfg, device
        self.desc, self.progress, self.on_step = desc, progress, on_step
        self.info = current_dist()
        self.bf16 = use_bf16(cfg.bf16, device)
        self.steps = len(train_batches)
        if self.steps < 1:
            raise ConfigError("batch_size", cfg.batch_size, "at most the number of training images")
        self.optimizer = make_optimizer(model, cfg)
        self.schedule = Schedule.from_config(cfg, self.steps)
        self.scheduler = torch.optim.lr_scheduler.LambdaLR(self.optimizer, self.schedule)
        self.ddp_model = model
        self.check_every = 1 if device.type == "cpu" else 20  # steps between checks of the flags

    # ---- restore
    def restore(self, ckpt: Checkpoints | None) -> _State:
        """A fresh state, or the newest usable checkpoint's (read by rank 0, broadcast to every rank),
        loaded into the model, optimizer and schedule; then the DDP wrapper."""
        info = self.info
        first = logged_state(self.model)
        state = _State(logged=None if first is None else {k: [v] for k, v in first.items()})
        check = functools.partial(
            checkpoint_problem,
            model=self.model,
            epochs=self.cfg.epochs,
            steps=self.steps,
            optimizer=self.optimizer,
        )
        saved, resumed = (
            (ckpt.load(check=check) if ckpt is not None else (None, None)) if info.is_main else (None, None)
        )
        if info.enabled:  # rank 0 read the checkpoint; every rank gets the same state
            box = [saved, resumed]
            dist.broadcast_object_list(box, src=0)
            saved, resumed = box
        if saved is not None:
            self._load(saved, state, resumed)
        if info.enabled:
            self.ddp_model = nn.parallel.DistributedDataParallel(
                self.model,
                device_ids=[self.device.index] if self.device.type == "cuda" else None,
                # a model with parameters its forward never uses says so (the hierarchical SAN)
                find_unused_parameters=getattr(self.model, "find_unused_parameters", False),
            )
        return state

    def _load(self, saved: dict, state: _State, resumed: str) -> None:
        info = self.info
        self.model.load_state_dict(saved["model"])
        self.optimizer.load_state_dict(saved["optimizer"])
        self.scheduler.load_state_dict(saved["scheduler"])
        state.history, state.epoch, state.step = list(saved["history"]), saved["epoch"], saved["step"]
        state.train_seconds, state.resumed = saved.get("train_seconds", 0.0), resumed
        if state.logged is not None and saved.get("quadratic"):
            state.logged = {k: list(v) for k, v in saved["quadratic"].items()}
        ranks = saved.get("ranks") or []
        if state.step and len(ranks) == info.world_size:  # mid-epoch: this rank's RNG and running sums
            _set_rng_state(ranks[info.rank]["rng"])
            state.partial = ranks[info.rank]["partial"]
        elif state.step:  # saved with another number of processes: redo that epoch from its start
            log.warning(
                "%s: checkpoint saved mid-epoch by %d processes; restarting epoch %d",
                self.desc,
                len(ranks),
                state.epoch + 1,
            )
            state.step = 0
        log.info("%s: resuming from %s", self.desc, resumed)

    # ---- save
    def save(self, ckpt: Checkpoints | None, state: _State, epoch: int, step: int, partial=None) -> None:
        """Checkpoint at (epoch, step); collective under DDP (every rank sends its RNG state and running
        sums), written by rank 0. Weights that are not finite are never saved: TrainingDiverged, the last
        good checkpoint kept (every rank holds the same weights, so every rank raises)."""
        if not all(bool(torch.isfinite(p).all()) for p in self.model.parameters()):
            where = f" ({ckpt.last})" if ckpt is not None and ckpt.last.exists() else ""
            raise TrainingDiverged(
                f"{self.desc}: the weights became non-finite in epoch {epoch + (1 if step else 0)}; the last "
                f"good checkpoint is kept{where}. Try a lower lr."
            )
        mine = {"rng": _rng_state(), "partial": partial}
        if self.info.enabled:
            ranks = [None] * self.info.world_size
            dist.all_gather_object(ranks, mine)
        else:
            ranks = [mine]
        if ckpt is not None and self.info.is_main:
            ckpt.save(
                {
                    "model": self.model.state_dict(),
                    "optimizer": self.optimizer.state_dict(),
                    "scheduler": self.scheduler.state_dict(),
                    "epoch": epoch,
                    "step": step,
                    "history": state.history,
                    "train_seconds": state.train_seconds,
                    "quadratic": state.logged,
                    "ranks": ranks,
                    "world_size": self.info.world_size,
                }
            )

    # ---- one epoch
    def train_epoch(self, epoch: int, state: _State, ckpt, stop: _StopRequest, interval: float, seed: int):
        """Train one epoch from its first step (or the resumed one); checks every `check_every` steps for
        a non-finite loss, a stop signal, or a due time-based checkpoint (rank 0's clock decides).
        -> (summed stats over every rank: loss, correct, count, gradient norm, all weighted by batch size;
        the epoch's clock)."""
        cfg, info, device, steps = self.cfg, self.info, self.device, self.steps
        first_step = state.step if epoch == state.epoch else 0
        if first_step == 0:
            _seed_epoch(seed, epoch, info.rank)
        self.ddp_model.train()
        stats, prior_seconds = self._running_sums(first_step, state.partial)
        clock = _EpochClock(prior_seconds)
        desc, enabled = f"{self.desc} {epoch + 1}/{cfg.epochs}", self.progress and info.is_main
        from tqdm.auto import tqdm  # here, not at import: in a notebook without ipywidgets it warns on import

        bar = tqdm(total=steps, desc=desc, disable=not enabled, leave=False, dynamic_ncols=True)
        batches = itertools.islice(self.train_batches.epoch(epoch), first_step, None)  # resumed: same order
        for step, (x, y) in zip(range(first_step, steps), batches, strict=False):
            if self.on_step is not None:
                self.on_step(epoch, step, x, y)
            loss, logits, norm = train_step(
                self.ddp_model, self.optimizer, x, y, cfg.label_smoothing, self.bf16, cfg.grad_clip
            )
            self.scheduler.step()
            stats += torch.stack(
                [
                    loss.double() * y.numel(),
                    (logits.argmax(1) == y).sum().double(),
                    y.new_tensor(y.numel()).double(),
                    norm.double().to(device) * y.numel(),
                ]
            )
            bar.update(1)
            if (step + 1) % self.check_every == 0 or step + 1 == steps:
                due = step + 1 < steps and time.monotonic() - state.last_saved >= interval
                self._check_flags(loss, stop, due, bar, ckpt, state, epoch, step, stats, clock)
        bar.close()
        clock.train = clock()
        _all_reduce(stats, info)
        return stats.tolist(), clock

    def _running_sums(self, first_step: int, partial: dict | None) -> tuple[torch.Tensor, float]:
        """(loss sum, correct, count, gradient-norm sum) and the seconds spent before a mid-epoch resume.
        Checkpoints written before the gradient norm was logged hold 3 sums."""
        stats = torch.zeros(4, dtype=torch.float64, device=self.device)
        if not (first_step and partial is not None):
            return stats, 0.0
        saved = torch.tensor(partial["stats"], dtype=torch.float64, device=self.device)
        stats[: len(saved)] += saved
        if len(saved) < len(stats):
            stats[3] = math.nan  # the norms of the steps before the resume are unknown
        return stats, partial["seconds"]

    def _check_flags(self, loss, stop, due: bool, bar, ckpt, state: _State, epoch, step, stats, clock):
        """Agree across ranks on a non-finite loss (raise TrainingDiverged), a stop signal (checkpoint,
        raise Interrupted) and a due time-based checkpoint (a kill without a signal loses at most
        `interval` seconds)."""
        flags = torch.tensor(
            [
                float(not math.isfinite(loss.item())),
                float(stop.signum is not None),
                float(due and self.info.is_main),  # rank 0's clock decides for every rank
            ],
            device=self.device,
        )
        _all_reduce(flags, self.info, dist.ReduceOp.MAX if self.info.enabled else None)
        desc = self.desc
        if flags[0]:
            bar.close()
            where = f" ({ckpt.last})" if ckpt is not None and ckpt.last.exists() else ""
            raise TrainingDiverged(
                f"{desc}: the training loss became {loss.item()} at epoch {epoch + 1}, step "
                f"{step + 1}; the last good checkpoint is kept{where}. Try a lower lr."
            )
        if flags[1]:
            bar.close()
            self.save(ckpt, state, epoch, step + 1, {"stats": stats.tolist(), "seconds": clock()})
            where = f" in {ckpt.last}" if ckpt is not None else ""
            raise Interrupted(
                f"{desc}: interrupted at epoch {epoch + 1}, step {step + 1}; checkpoint saved{where}; "
                "rerun the same command to resume"
            )
        if flags[2]:
            self.save(ckpt, state, epoch, step + 1, {"stats": stats.tolist(), "seconds": clock()})
            state.last_saved = time.monotonic()

    # ---- the epoch's row
    def record(self, epoch: int, state: _State, stats, clock: _EpochClock, test_batches, probe) -> dict:
        """Evaluate, append the epoch's history row (and the probe's columns, the logged model state)."""
        loss_sum, correct, count, norm_sum = stats
        test_loss, test_acc = evaluate(self.model, test_batches, self.device, self.bf16, self.info)
        if not math.isfinite(test_loss):  # the epoch's last update made the weights useless
            raise TrainingDiverged(
                f"{self.desc}: the test loss became {test_loss} after epoch {epoch + 1}; the last good "
                "checkpoint is kept. Try a lower lr."
            )
        epoch_seconds = clock()
        state.train_seconds += epoch_seconds
        row = {
            "epoch": epoch + 1,
            "train_loss": loss_sum / count,
            "train_acc": correct / count,
            "test_loss": test_loss,
            "test_acc": test_acc,
            "lr": self.cfg.lr * self.schedule((epoch + 1) * self.steps - 1),  # lr of the epoch's last step
            "seconds": epoch_seconds,
            "images_per_s": count / clock.train,
            "grad_norm": norm_sum / count,  # mean ‖g‖₂ before clipping over the epoch's steps
        }
        if probe is not None:
            row.update(probe(self.model))
        state.history.append(row)
        if state.logged is not None:
            for k, v in logged_state(self.model).items():
                state.logged[k].append(v)
        return row

    def reevaluate(self, state: _State, test_batches) -> None:
        """The last history row's test loss and accuracy measured again on the restored weights (a run
        resumed from its final checkpoint: the result must not rest on what the checkpoint says)."""
        test_loss, test_acc = evaluate(self.model, test_batches, self.device, self.bf16, self.info)
        if not math.isfinite(test_loss):
            raise TrainingDiverged(f"{self.desc}: the test loss of the final weights is {test_loss}")
        last = state.history[-1]
        if (last.get("test_loss"), last.get("test_acc")) != (test_loss, test_acc) and self.info.is_main:
            log.warning(
                "%s: the checkpoint's history says test accuracy %s; its weights give %.4f (kept)",
                self.desc,
                last.get("test_acc"),
                test_acc,
            )
        state.history[-1] = {**last, "test_loss": test_loss, "test_acc": test_acc}

    def log_row(self, row: dict) -> None:
        if self.info.is_main:
            log.info(
                "%s epoch %d/%d: train loss %.4f acc %.4f | test loss %.4f acc %.4f | %.0f img/s | ‖g‖ %.2f",
                self.desc,
                row["epoch"],
                self.cfg.epochs,
                row["train_loss"],
                row["train_acc"],
                row["test_loss"],
                row["test_acc"],
                row["images_per_s"],
                row["grad_norm"],
            )
