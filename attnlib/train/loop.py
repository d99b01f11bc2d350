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
from attnlib.train.checkpoint import Checkpoints, checkpoint_interval, checkpoint_problem
from attnlib.train.device import autocast, use_bf16
from attnlib.train.distributed import DistInfo, _all_reduce, _stop_request, current_dist
from attnlib.train.schedule import Schedule, make_optimizer
from attnlib.train.state import RunState

log = logging.getLogger("attnlib")


class TrainingDiverged(RuntimeError):
    """The loss became NaN or infinite; the last good checkpoint is kept."""


class Interrupted(RuntimeError):
    """SIGINT/SIGTERM arrived; a checkpoint was saved and the run can be resumed by rerunning it."""


@dataclass
class FitResult:
    """history: one dict per epoch (epoch, train_loss, train_acc, test_loss, test_acc, lr, seconds,
    images_per_s, grad_norm: mean global gradient norm before clipping, bf16: 1 where the epoch trained under
    bf16 autocast, else 0). quadratic: None or, for a model
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
    state = run.state
    resumed_complete = bool(state.history) and state.epoch >= cfg.epochs  # nothing left to train
    state.last_saved = time.monotonic()
    with _stop_request() as stop:
        for epoch in range(state.epoch, cfg.epochs):  # every epoch: nothing here reads the test set to stop
            one = _Epoch(run, epoch)
            stats, train_seconds = one.train(stop, interval, seed)
            row = run.record(one, stats, train_seconds, test_batches, probe)
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
        state.history, state.logged_over_epochs(), state.train_seconds, state.resumed, state.train_cpu_seconds
    )


class _Run:
    """The pieces of one `fit`: the model (and its DDP wrapper), optimizer, schedule, device and dtype
    policy, what a checkpoint carries across epochs (`state`: `RunState`) and the steps of the loop around an
    epoch's training (`_Epoch`): restore, record the epoch's row, save."""

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
        self.state = RunState(self.model, self.optimizer, self.scheduler, ckpt, self.info, desc)

    # ---- restore
    def restore(self) -> None:
        """The newest usable checkpoint (`RunState.restore`, checked by `checkpoint_problem` against this
        run's model, epochs, steps and optimizer); then the DDP wrapper."""
        check = functools.partial(
            checkpoint_problem,
            model=self.model,
            epochs=self.cfg.epochs,
            steps=self.steps,
            optimizer=self.optimizer,
        )
        self.state.restore(check)
        if self.info.enabled:
            self.ddp_model = nn.parallel.DistributedDataParallel(
                self.model,
                device_ids=[self.device.index] if self.device.type == "cuda" else None,
                # a model with parameters its forward never uses says so (the hierarchical SAN)
                find_unused_parameters=getattr(self.model, "find_unused_parameters", False),
            )

    # ---- save
    def save(self, epoch: int, step: int, partial=None) -> None:
        """Checkpoint at (epoch, step) (`RunState.save`). Weights that are not finite are never saved:
        TrainingDiverged, the last good checkpoint kept (every rank holds the same weights, so every rank
        raises)."""
        if not all(bool(torch.isfinite(p).all()) for p in self.model.parameters()):
            raise self._diverged(f"the weights became non-finite in epoch {epoch + (1 if step else 0)}")
        self.state.save(epoch, step, partial)

    def _diverged(self, what: str) -> TrainingDiverged:
        """The one divergence error: what became non-finite, and the last good checkpoint, which is kept."""
        where = f" ({self.ckpt.last})" if self.ckpt is not None and self.ckpt.last.exists() else ""
        return TrainingDiverged(
            f"{self.desc}: {what}; the last good checkpoint is kept{where}. Try a lower lr."
        )

    # ---- the epoch's row
    def _test(self, test_batches, when: str) -> tuple[float, float]:
        """(test loss, accuracy) of the weights (all ranks); a non-finite loss (an update made the weights
        useless) is TrainingDiverged."""
        test_loss, test_acc = evaluate(self.model, test_batches, self.device, self.bf16, self.info)
        if not math.isfinite(test_loss):
            raise self._diverged(f"the test loss became {test_loss} {when}")
        return test_loss, test_acc

    def record(self, epoch: _Epoch, stats, train_seconds: float, test_batches, probe) -> dict:
        """Evaluate, add the epoch's time (`epoch`'s clock) to the run's, append the epoch's history row (and
        the probe's columns, the logged model state)."""
        loss_sum, correct, count, norm_sum = stats
        number = epoch.index + 1  # the epoch's number, from 1
        test_loss, test_acc = self._test(test_batches, f"after epoch {number}")  # its last update too
        state = self.state
        epoch_seconds = epoch.seconds()
        state.train_seconds += epoch_seconds
        epoch_cpu = epoch.cpu_seconds()
        known = state.train_cpu_seconds is not None and epoch_cpu is not None
        state.train_cpu_seconds = state.train_cpu_seconds + epoch_cpu if known else None
        row = {
            "epoch": number,
            "train_loss": loss_sum / count,
            "train_acc": correct / count,
            "test_loss": test_loss,
            "test_acc": test_acc,
            "lr": self.cfg.lr * self.schedule(number * self.steps - 1),  # lr of the epoch's last step
            "seconds": epoch_seconds,
            "images_per_s": count / train_seconds,
            "grad_norm": norm_sum / count,  # mean ‖g‖₂ before clipping over the epoch's steps
            "bf16": int(self.bf16),  # this epoch's precision (1: bf16 autocast): a resume may change machines
        }
        if probe is not None:
            row.update(probe(self.model))
        state.append(row)
        return row

    def reevaluate(self, test_batches) -> None:
        """The last history row's test loss and accuracy measured again on the restored weights (a run
        resumed from its final checkpoint: the result must not rest on what the checkpoint says)."""
        test_loss, test_acc = self._test(test_batches, "on the final checkpoint's weights")
        history = self.state.history
        last = history[-1]
        if (last.get("test_loss"), last.get("test_acc")) != (test_loss, test_acc) and self.info.is_main:
            log.warning(
                "%s: the checkpoint's history says test accuracy %s; its weights give %.4f (kept)",
                self.desc,
                last.get("test_acc"),
                test_acc,
            )
        history[-1] = {**last, "test_loss": test_loss, "test_acc": test_acc}

    def log_row(self, row: dict) -> None:
        """The epoch's row in one line of the log (rank 0)."""
        if self.info.is_main:
            columns = ("train_loss", "train_acc", "test_loss", "test_acc", "images_per_s", "grad_norm")
            log.info(
                "%s epoch %d/%d: train loss %.4f acc %.4f | test loss %.4f acc %.4f | %.0f img/s | ‖g‖ %.2f",
                self.desc,
                row["epoch"],
                self.cfg.epochs,
                *(row[c] for c in columns),
            )


class _Epoch:
    """One epoch of a `_Run`'s training, from its first step (or the resumed one): the batches in the epoch's
    order, a step each, and every `check_every` steps the checks (a non-finite loss, a stop signal, a due
    time-based checkpoint); and the epoch's clock (`seconds`, `cpu_seconds`: since its start, the seconds
    before a mid-epoch resume included)."""

    def __init__(self, run: _Run, index: int):
        self.run, self.index = run, index  # index: the epoch, from 0
        self.check_every = 1 if run.device.type == "cpu" else 20  # steps between checks of the flags
        self.start = 0.0  # time.perf_counter() at the epoch's start, less the seconds before a resume
        self.cpu_start: float | None = 0.0  # time.process_time() likewise (None: not known)

    def seconds(self) -> float:
        """Wall seconds in the epoch so far."""
        return time.perf_counter() - self.start

    def cpu_seconds(self) -> float | None:
        """This process's CPU seconds in the epoch so far (None where a resume could not say)."""
        return None if self.cpu_start is None else time.process_time() - self.cpu_start

    def train(self, stop, interval: float, seed: int):
        """Train the epoch; rank 0's clock decides when a time-based checkpoint is due (every `interval`
        seconds). -> (summed stats over every rank: loss, correct, count, gradient norm, all weighted by batch
        size; the seconds of training in the epoch, without its evaluation)."""
        run, epoch = self.run, self.index
        cfg, info, device, steps, state = run.cfg, run.info, run.device, run.steps, run.state
        first_step = state.step if epoch == state.epoch else 0
        if first_step == 0:  # dropout and any other global-RNG use depend only on (seed, epoch, rank)
            torch.manual_seed((seed * 1_000_003 + epoch) * 1_009 + info.rank)
        run.ddp_model.train()
        stats = torch.zeros(4, dtype=torch.float64, device=device)  # loss sum, correct, count, norm sum
        prior_seconds, prior_cpu = 0.0, 0.0
        if first_step and state.partial is not None:  # a mid-epoch resume: the sums of the steps before it
            stats += torch.tensor(state.partial["stats"], dtype=torch.float64, device=device)
            prior_seconds, prior_cpu = state.partial["seconds"], state.partial.get("cpu_seconds")
        self.start = time.perf_counter() - prior_seconds
        self.cpu_start = None if prior_cpu is None else time.process_time() - prior_cpu
        desc, enabled = f"{run.desc} {epoch + 1}/{cfg.epochs}", run.progress and info.is_main
        from tqdm.auto import tqdm  # here, not at import: in a notebook without ipywidgets it warns on import

        bar = tqdm(total=steps, desc=desc, disable=not enabled, leave=False, dynamic_ncols=True)
        batches = itertools.islice(run.train_batches.epoch(epoch), first_step, None)  # resumed: same order
        for step, (x, y) in zip(range(first_step, steps), batches, strict=False):
            if run.on_step is not None:
                run.on_step(epoch, step, x, y)
            loss, logits, norm = train_step(
                run.ddp_model, run.optimizer, x, y, cfg.label_smoothing, run.bf16, cfg.grad_clip
            )
            run.scheduler.step()
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
                self._check_flags(loss, stop, due, bar, step, stats)
        bar.close()
        train_seconds = self.seconds()
        _all_reduce(stats, info)
        return stats.tolist(), train_seconds

    def _check_flags(self, loss, stop, due: bool, bar, step: int, stats) -> None:
        """Agree across ranks on a non-finite loss (raise TrainingDiverged), a stop signal (checkpoint,
        raise Interrupted) and a due time-based checkpoint (a kill without a signal loses at most
        `interval` seconds)."""
        run, epoch = self.run, self.index
        flags = torch.tensor(
            [
                float(not math.isfinite(loss.item())),
                float(stop.signum is not None),
                float(due and run.info.is_main),  # rank 0's clock decides for every rank
            ],
            device=run.device,
        )
        _all_reduce(flags, run.info, dist.ReduceOp.MAX if run.info.enabled else None)
        if flags[0]:
            bar.close()
            raise run._diverged(
                f"the training loss became {loss.item()} at epoch {epoch + 1}, step {step + 1}"
            )
        if flags[1] or flags[2]:  # a mid-epoch checkpoint holds the running sums and seconds so far
            partial = {"stats": stats.tolist(), "seconds": self.seconds(), "cpu_seconds": self.cpu_seconds()}
            run.save(epoch, step + 1, partial)
        if flags[1]:
            bar.close()
            where = f" in {run.ckpt.last}" if run.ckpt is not None else ""
            raise Interrupted(
                f"{run.desc}: interrupted at epoch {epoch + 1}, step {step + 1}; checkpoint saved{where}; "
                "rerun the same command to resume"
            )
