"""One training loop for every experiment: SGD, warm-up + cosine schedule, bf16 autocast, checkpoints, DDP.

`fit` trains a model in place on two batch sources that follow the data contract (`.epoch(e)` yields
`(x, y)` deterministically in `(seed, e)`, `len()` = steps per epoch) and returns the per-epoch history.

Reproducibility: data order depends only on `(seed, epoch)`, the global RNG (dropout) is re-seeded from
`(seed, epoch, rank)` at the start of every epoch, and a checkpoint holds the model, the optimizer, the
schedule position, the history, the RNG states and, mid-epoch, the epoch's running sums. Checkpoints are
written at the end of every epoch, in the middle of one every `checkpoint_every` seconds of training
(`checkpoint_interval`: default CHECKPOINT_SECONDS, so that a kill without a signal loses at most that), and
after SIGINT/SIGTERM. A run resumed from any of them ends with the same history as an uninterrupted run.

Distributed: under `torchrun` (env `WORLD_SIZE` > 1) `distributed_session` joins the process group (gloo on
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
from dataclasses import dataclass
from pathlib import Path

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import nn

from attnlib.checks import resolve_device
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
from attnlib.train.device import autocast, use_bf16
from attnlib.train.distributed import DistInfo, _all_reduce, _stop_request, current_dist
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
    # CPU time of this process over the same spans (time.process_time: every thread of it, not the time it
    # waited for a core), summed across resumes; None where a checkpoint it resumed from did not record it
    train_cpu_seconds: float | None = None


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
    else:  # the norm that clip_grad_norm_ reports, computed the same way; 0 without gradients
        norm = nn.utils.get_total_norm([p.grad for p in model.parameters() if p.grad is not None])
    if optimizer is not None:
        optimizer.step()
    else:
        model.zero_grad(set_to_none=True)
    return loss.detach(), logits.detach(), norm.detach()


@torch.no_grad()
def evaluate(model: nn.Module, batches, device: torch.device, bf16: bool, info: DistInfo):
    """(mean cross-entropy, accuracy) over every test batch (all ranks' shards together)."""
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
    resolved model configuration (`Checkpoints`; when and what it checkpoints: the module's docstring).

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
    config = getattr(model, "cfg", None)  # the model's config dataclass: its resolved fields are checked too
    ckpt = Checkpoints(checkpoint_dir, fingerprint, config) if checkpoint_dir is not None else None
    interval = checkpoint_interval(checkpoint_every) if ckpt is not None else math.inf
    run = _Run(model, train_batches, cfg, resolve_device(device), desc, progress, on_step, ckpt)
    run.restore()
    resumed_complete = bool(run.history) and run.epoch >= cfg.epochs  # nothing left to train
    run.last_saved = time.monotonic()
    with _stop_request() as stop:
        for epoch in range(run.epoch, cfg.epochs):  # every epoch: nothing here reads the test set to stop
            stats, train_seconds = run.train_epoch(epoch, stop, interval, seed)
            row = run.record(epoch, stats, train_seconds, test_batches, probe)
            run.log_row(row)
            run.save(epoch + 1, 0)
            if stop.signum is not None:  # signal during evaluation: the epoch checkpoint is already saved
                raise Interrupted(
                    f"{desc}: interrupted after epoch {epoch + 1}; checkpoint saved; rerun to resume"
                )
    if resumed_complete:  # a checkpoint's history is not trusted for the result: evaluate its weights
        run.reevaluate(test_batches)
    model.eval()
    return FitResult(
        run.history, run.logged_over_epochs(), run.train_seconds, run.resumed, run.train_cpu_seconds
    )


class _Run:
    """The pieces of one `fit`: the model (and its DDP wrapper), optimizer, schedule, device and dtype
    policy, the steps of the loop (restore, train an epoch, record its row, save) and what a checkpoint
    carries across epochs: the history so far, where to start (epoch, and step within it for a mid-epoch
    checkpoint with this rank's running sums in `partial`), the training time, the logged model state per
    epoch (`attnlib.models.logged_state`) and the checkpoint resumed from."""

    def __init__(self, model, train_batches, cfg: TrainConfig, device, desc, progress, on_step, ckpt):
        self.model, self.train_batches, self.cfg, self.device = model.to(device), train_batches, cfg, device
        self.desc, self.progress, self.on_step, self.ckpt = desc, progress, on_step, ckpt
        self.info = current_dist()
        self.bf16 = use_bf16(cfg.bf16, device)
        self.steps = len(train_batches)
        if self.steps < 1:  # fit takes any batches with len(): an empty one is a batch larger than the data
            raise ConfigError("batch_size", cfg.batch_size, "at most the number of training images")
        self.optimizer = make_optimizer(model, cfg)
        self.schedule = Schedule.from_config(cfg, self.steps)
        self.scheduler = torch.optim.lr_scheduler.LambdaLR(self.optimizer, self.schedule)
        self.ddp_model = model
        self.check_every = 1 if device.type == "cpu" else 20  # steps between checks of the flags
        self.history, self.epoch, self.step, self.partial = [], 0, 0, None
        self.train_seconds, self.resumed = 0.0, None
        self.train_cpu_seconds: float | None = 0.0  # None: a resumed checkpoint did not record it
        self.last_saved = 0.0  # time.monotonic() of the last checkpoint
        self.epoch_start = 0.0  # time.perf_counter() at the epoch's start, less the seconds before a resume
        self.epoch_cpu_start: float | None = 0.0  # time.process_time() likewise (None: not known)
        first = logged_state(self.model)
        self.logged = None if first is None else {k: [v] for k, v in first.items()}

    def logged_over_epochs(self) -> dict[str, torch.Tensor] | None:
        if self.logged is None:
            return None
        epochs = len(next(iter(self.logged.values())))
        return {"epoch": torch.arange(epochs), **{k: torch.stack(v) for k, v in self.logged.items()}}

    # ---- restore
    def restore(self) -> None:
        """The newest usable checkpoint (read by rank 0, broadcast to every rank) loaded into the model,
        optimizer, schedule and the run's state; then the DDP wrapper."""
        info = self.info
        check = functools.partial(
            checkpoint_problem,
            model=self.model,
            epochs=self.cfg.epochs,
            steps=self.steps,
            optimizer=self.optimizer,
        )
        saved, resumed = (
            self.ckpt.load(check=check) if self.ckpt is not None and info.is_main else (None, None)
        )
        if info.enabled:  # rank 0 read the checkpoint; every rank gets the same state
            box = [saved, resumed]
            dist.broadcast_object_list(box, src=0)
            saved, resumed = box
        if saved is not None:
            self._load(saved, resumed)
        if info.enabled:
            self.ddp_model = nn.parallel.DistributedDataParallel(
                self.model,
                device_ids=[self.device.index] if self.device.type == "cuda" else None,
                # a model with parameters its forward never uses says so (the hierarchical SAN)
                find_unused_parameters=getattr(self.model, "find_unused_parameters", False),
            )

    def _load(self, saved: dict, resumed: str) -> None:
        info = self.info
        self.model.load_state_dict(saved["model"])
        self.optimizer.load_state_dict(saved["optimizer"])
        self.scheduler.load_state_dict(saved["scheduler"])
        self.history, self.epoch, self.step = list(saved["history"]), saved["epoch"], saved["step"]
        self.train_seconds, self.resumed = saved.get("train_seconds", 0.0), resumed
        self.train_cpu_seconds = saved.get("train_cpu_seconds")  # None in checkpoints saved before it was
        if self.logged is not None and saved.get("quadratic"):
            self.logged = {k: list(v) for k, v in saved["quadratic"].items()}
        ranks = saved.get("ranks") or []
        if self.step and len(ranks) == info.world_size:  # mid-epoch: this rank's RNG and running sums
            _set_rng_state(ranks[info.rank]["rng"])
            self.partial = ranks[info.rank]["partial"]
        elif self.step:  # saved with another number of processes: redo that epoch from its start
            log.warning(
                "%s: checkpoint saved mid-epoch by %d processes; restarting epoch %d",
                self.desc,
                len(ranks),
                self.epoch + 1,
            )
            self.step = 0
        log.info("%s: resuming from %s", self.desc, resumed)

    # ---- save
    def save(self, epoch: int, step: int, partial=None) -> None:
        """Checkpoint at (epoch, step); collective under DDP (every rank sends its RNG state and running
        sums), written by rank 0. Weights that are not finite are never saved: TrainingDiverged, the last
        good checkpoint kept (every rank holds the same weights, so every rank raises)."""
        ckpt = self.ckpt
        if not all(bool(torch.isfinite(p).all()) for p in self.model.parameters()):
            raise self._diverged(f"the weights became non-finite in epoch {epoch + (1 if step else 0)}")
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
                    "history": self.history,
                    "train_seconds": self.train_seconds,
                    "train_cpu_seconds": self.train_cpu_seconds,
                    "quadratic": self.logged,
                    "ranks": ranks,  # one entry per process: a resume by another number redoes the epoch
                }
            )
        self.last_saved = time.monotonic()

    def _diverged(self, what: str) -> TrainingDiverged:
        """The one divergence error: what became non-finite, and the last good checkpoint, which is kept."""
        where = f" ({self.ckpt.last})" if self.ckpt is not None and self.ckpt.last.exists() else ""
        return TrainingDiverged(
            f"{self.desc}: {what}; the last good checkpoint is kept{where}. Try a lower lr."
        )

    # ---- one epoch
    def train_epoch(self, epoch: int, stop, interval: float, seed: int):
        """Train one epoch from its first step (or the resumed one); checks every `check_every` steps for
        a non-finite loss, a stop signal, or a due time-based checkpoint (rank 0's clock decides).
        -> (summed stats over every rank: loss, correct, count, gradient norm, all weighted by batch size;
        the seconds of training in the epoch, without its evaluation)."""
        cfg, info, device, steps = self.cfg, self.info, self.device, self.steps
        first_step = self.step if epoch == self.epoch else 0
        if first_step == 0:  # dropout and any other global-RNG use depend only on (seed, epoch, rank)
            torch.manual_seed((seed * 1_000_003 + epoch) * 1_009 + info.rank)
        self.ddp_model.train()
        stats = torch.zeros(4, dtype=torch.float64, device=device)  # loss sum, correct, count, norm sum
        prior_seconds, prior_cpu = 0.0, 0.0
        if first_step and self.partial is not None:  # a mid-epoch resume: the sums of the steps before it
            stats += torch.tensor(self.partial["stats"], dtype=torch.float64, device=device)
            prior_seconds, prior_cpu = self.partial["seconds"], self.partial.get("cpu_seconds")
        self.epoch_start = time.perf_counter() - prior_seconds
        self.epoch_cpu_start = None if prior_cpu is None else time.process_time() - prior_cpu
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
                due = step + 1 < steps and time.monotonic() - self.last_saved >= interval
                self._check_flags(loss, stop, due, bar, epoch, step, stats)
        bar.close()
        train_seconds = time.perf_counter() - self.epoch_start
        _all_reduce(stats, info)
        return stats.tolist(), train_seconds

    def _check_flags(self, loss, stop, due: bool, bar, epoch: int, step: int, stats) -> None:
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
        if flags[0]:
            bar.close()
            raise self._diverged(
                f"the training loss became {loss.item()} at epoch {epoch + 1}, step {step + 1}"
            )
        if flags[1] or flags[2]:  # a mid-epoch checkpoint holds the running sums and seconds so far
            partial = {
                "stats": stats.tolist(),
                "seconds": time.perf_counter() - self.epoch_start,
                "cpu_seconds": self._epoch_cpu_seconds(),
            }
            self.save(epoch, step + 1, partial)
        if flags[1]:
            bar.close()
            where = f" in {self.ckpt.last}" if self.ckpt is not None else ""
            raise Interrupted(
                f"{self.desc}: interrupted at epoch {epoch + 1}, step {step + 1}; checkpoint saved{where}; "
                "rerun the same command to resume"
            )

    # ---- the epoch's row
    def _test(self, test_batches, when: str) -> tuple[float, float]:
        """(test loss, accuracy) of the weights (all ranks); a non-finite loss (an update made the weights
        useless) is TrainingDiverged."""
        test_loss, test_acc = evaluate(self.model, test_batches, self.device, self.bf16, self.info)
        if not math.isfinite(test_loss):
            raise self._diverged(f"the test loss became {test_loss} {when}")
        return test_loss, test_acc

    def _epoch_cpu_seconds(self) -> float | None:
        """This process's CPU seconds in the epoch so far (None where a resume could not say)."""
        return None if self.epoch_cpu_start is None else time.process_time() - self.epoch_cpu_start

    def record(self, epoch: int, stats, train_seconds: float, test_batches, probe) -> dict:
        """Evaluate, append the epoch's history row (and the probe's columns, the logged model state)."""
        loss_sum, correct, count, norm_sum = stats
        test_loss, test_acc = self._test(test_batches, f"after epoch {epoch + 1}")  # its last update too
        epoch_seconds = time.perf_counter() - self.epoch_start
        self.train_seconds += epoch_seconds
        epoch_cpu = self._epoch_cpu_seconds()
        known = self.train_cpu_seconds is not None and epoch_cpu is not None
        self.train_cpu_seconds = self.train_cpu_seconds + epoch_cpu if known else None
        row = {
            "epoch": epoch + 1,
            "train_loss": loss_sum / count,
            "train_acc": correct / count,
            "test_loss": test_loss,
            "test_acc": test_acc,
            "lr": self.cfg.lr * self.schedule((epoch + 1) * self.steps - 1),  # lr of the epoch's last step
            "seconds": epoch_seconds,
            "images_per_s": count / train_seconds,
            "grad_norm": norm_sum / count,  # mean ‖g‖₂ before clipping over the epoch's steps
        }
        if probe is not None:
            row.update(probe(self.model))
        self.history.append(row)
        if self.logged is not None:
            for k, v in logged_state(self.model).items():
                self.logged[k].append(v)
        return row

    def reevaluate(self, test_batches) -> None:
        """The last history row's test loss and accuracy measured again on the restored weights (a run
        resumed from its final checkpoint: the result must not rest on what the checkpoint says)."""
        test_loss, test_acc = self._test(test_batches, "on the final checkpoint's weights")
        last = self.history[-1]
        if (last.get("test_loss"), last.get("test_acc")) != (test_loss, test_acc) and self.info.is_main:
            log.warning(
                "%s: the checkpoint's history says test accuracy %s; its weights give %.4f (kept)",
                self.desc,
                last.get("test_acc"),
                test_acc,
            )
        self.history[-1] = {**last, "test_loss": test_loss, "test_acc": test_acc}

    def log_row(self, row: dict) -> None:
        if self.info.is_main:
            columns = ("train_loss", "train_acc", "test_loss", "test_acc", "images_per_s", "grad_norm")
            log.info(
                "%s epoch %d/%d: train loss %.4f acc %.4f | test loss %.4f acc %.4f | %.0f img/s | ‖g‖ %.2f",
                self.desc,
                row["epoch"],
                self.cfg.epochs,
                *(row[c] for c in columns),
            )
