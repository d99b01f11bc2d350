"""What one `fit` carries across epochs and checkpoints, and how a checkpoint is read into it and written from it.

`RunState` holds the model, optimizer and schedule (references: loaded and saved in place) and the rest of a
checkpoint: the history so far, where to start, the training time, the logged model state per epoch and, for a
mid-epoch checkpoint, every rank's RNG state and running sums. `restore` reads the newest usable checkpoint (rank
0 reads, every rank gets the same state); `save` writes one (collective under DDP, written by rank 0). The keys
of a checkpoint are written in `save` only; `checkpoint.checkpoint_problem` checks them before `restore` loads.
"""

from __future__ import annotations

import logging
import time

import torch
import torch.distributed as dist

from attnlib.models import logged_state
from attnlib.train.checkpoint import _rng_state, _set_rng_state

log = logging.getLogger("attnlib")


class RunState:
    """The state of one `fit` that a checkpoint holds: the model, optimizer and schedule, and what it carries
    across epochs: the history so far, where to start (`epoch`, and `step` within it for a mid-epoch checkpoint
    with this rank's running sums in `partial`), the training time (`train_seconds`, `train_cpu_seconds`), the
    logged model state per epoch (`logged`: `attnlib.models.logged_state`, row 0 the initialisation), the
    checkpoint resumed from (`resumed`) and when the last checkpoint was saved (`last_saved`)."""

    def __init__(self, model, optimizer, scheduler, ckpt, info, desc: str):
        self.model, self.optimizer, self.scheduler, self.ckpt = model, optimizer, scheduler, ckpt
        self.info, self.desc = info, desc
        self.history, self.epoch, self.step, self.partial = [], 0, 0, None
        self.train_seconds, self.resumed = 0.0, None
        self.train_cpu_seconds: float | None = 0.0  # None: a resumed checkpoint did not record it
        self.last_saved = 0.0  # time.monotonic() of the last checkpoint
        first = logged_state(model)
        self.logged = None if first is None else {k: [v] for k, v in first.items()}

    def restore(self, check) -> None:
        """The newest usable checkpoint (`Checkpoints.load(check=check)`, read by rank 0, broadcast to every
        rank) loaded into the model, optimizer, schedule and this state; nothing when there is none."""
        info = self.info
        saved, resumed = (
            self.ckpt.load(check=check) if self.ckpt is not None and info.is_main else (None, None)
        )
        if info.enabled:  # rank 0 read the checkpoint; every rank gets the same state
            box = [saved, resumed]
            dist.broadcast_object_list(box, src=0)
            saved, resumed = box
        if saved is not None:
            self._load(saved, resumed)

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

    def save(self, epoch: int, step: int, partial=None) -> None:
        """Checkpoint at (epoch, step); collective under DDP (every rank sends its RNG state and running sums
        `partial`), written by rank 0. The caller has checked that the weights are finite."""
        mine = {"rng": _rng_state(), "partial": partial}
        if self.info.enabled:
            ranks = [None] * self.info.world_size
            dist.all_gather_object(ranks, mine)
        else:
            ranks = [mine]
        if self.ckpt is not None and self.info.is_main:
            self.ckpt.save(
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

    def append(self, row: dict) -> None:
        """An epoch's history row, and the model's logged state after it."""
        self.history.append(row)
        if self.logged is not None:
            for k, v in logged_state(self.model).items():
                self.logged[k].append(v)

    def logged_over_epochs(self) -> dict[str, torch.Tensor] | None:
        """The logged state stacked over epochs (FitResult.quadratic), or None for a model that logs none."""
        if self.logged is None:
            return None
        epochs = len(next(iter(self.logged.values())))
        return {"epoch": torch.arange(epochs), **{k: torch.stack(v) for k, v in self.logged.items()}}
