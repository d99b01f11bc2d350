"""Checkpoints of a run: `last.pt` and `previous.pt` written atomically, validated before use, with the RNG
states that make a resumed run end with the same history as an uninterrupted one; and how often `fit`
checkpoints mid-epoch."""

from __future__ import annotations

import contextlib
import dataclasses
import io
import logging
import math
import os
import stat
from collections.abc import Callable
from pathlib import Path

import torch

from attnlib.checks import MAX_SECONDS, check, in_range, is_number, shown
from attnlib.env import CHECKPOINT_SECONDS_ENV
from attnlib.errors import ConfigError
from attnlib.models import config_record, resolved_difference
from attnlib.util import atomic_write, temp_name

log = logging.getLogger("attnlib")

CHECKPOINT_FORMAT = 1  # the layout `save` writes; bump it when it changes: checkpoint_problem refuses others
# Besides the end of every epoch, `fit` checkpoints mid-epoch once this many seconds of training have passed
# since the last checkpoint, so that a run killed without a signal (SIGKILL, a notebook kernel whose parent
# died) loses at most that much. Not part of a run's configuration: it changes no result.
CHECKPOINT_SECONDS = 120.0
# What a checkpoint's history row may hold: finite losses and accuracies in [0, the bound].
_ROW_BOUNDS = {"train_loss": math.inf, "test_loss": math.inf, "train_acc": 1, "test_acc": 1}


class Checkpoints:
    """`last.pt` and `previous.pt` in one folder, written atomically (temporary file, fsync, rename).

    Loading tries `last.pt`, then `previous.pt` (a truncated or damaged one is reported and skipped). One of
    another configuration starts afresh (so does a file that is no checkpoint dict): another `fingerprint`,
    or (given `model_config`, the model's config dataclass) another resolved model configuration, e.g. after
    a default changed (`attnlib.models.resolved_difference`). Checkpoints written before they recorded it
    (no ``model_resolved``) are checked by their fingerprint only."""

    def __init__(self, folder: str | Path, fingerprint: str = "", model_config=None):
        self.folder, self.fingerprint = Path(folder), fingerprint
        self.last, self.previous = self.folder / "last.pt", self.folder / "previous.pt"
        self.model_config = model_config if dataclasses.is_dataclass(model_config) else None
        self.resolved = None if self.model_config is None else config_record(self.model_config)

    def save(self, state: dict) -> None:
        """Write `state` as last.pt and keep the old last.pt as previous.pt. At every instant last.pt is
        a complete checkpoint (the old one, then the new one), even if the process is killed in between."""
        buf = io.BytesIO()  # serialised in memory first: a failed write is an OSError naming the file
        tags = {"format": CHECKPOINT_FORMAT, "fingerprint": self.fingerprint}
        if self.resolved is not None:
            tags["model_resolved"] = self.resolved
        torch.save({**state, **tags}, buf)
        # neither this folder nor the one holding it (the run folder) is followed as a symbolic link, even one
        # swapped in while the run trains: the write happens in the folder's descriptor (attnlib.util)
        with atomic_write(self.last, root=self.folder.parent.parent, before_replace=self._keep_previous) as f:
            f.write(buf.getbuffer())

    def _keep_previous(self, folder: int) -> None:
        """previous.pt becomes a second name of the current last.pt, atomically (a hard link renamed onto
        it); without hard links on this file system, a rename (a short window without last.pt). By name in
        `folder`, the checkpoints folder's descriptor; a link at last.pt is never followed."""
        last, previous, link = self.last.name, self.previous.name, temp_name(self.previous).name
        try:
            if not stat.S_ISREG(os.stat(last, dir_fd=folder, follow_symlinks=False).st_mode):
                return
        except FileNotFoundError:
            return
        with contextlib.suppress(FileNotFoundError):
            os.unlink(link, dir_fd=folder)
        try:
            os.link(last, link, src_dir_fd=folder, dst_dir_fd=folder, follow_symlinks=False)
            os.replace(link, previous, src_dir_fd=folder, dst_dir_fd=folder)
        except OSError:
            os.replace(last, previous, src_dir_fd=folder, dst_dir_fd=folder)
        finally:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(link, dir_fd=folder)

    def load(self, check: Callable[[dict], str]) -> tuple[dict | None, str | None]:
        """(state, description) of the newest usable checkpoint, or (None, None) for a fresh start. ``check``
        says what is wrong with a checkpoint of this configuration ('' if nothing: `checkpoint_problem` below,
        the one check of its contents); one that fails is skipped for the older one. What was skipped and where
        the run goes on from are said in one line ("checkpoint .../last.pt is damaged (...); resuming from
        previous.pt (epoch 3)", or "...; training from scratch")."""
        skipped: list[str] = []  # what is wrong with each checkpoint passed over
        for path in (self.last, self.previous):
            if not path.exists() and not path.is_symlink():
                continue
            state, problem, foreign = self._read(path, check)
            if foreign:  # another configuration's: never resumed, nor an older one of it
                log.warning("%s; starting afresh", "; ".join([*skipped, f"checkpoint {path} {problem}"]))
                return None, None
            if problem:
                skipped.append(f"checkpoint {path} is damaged ({problem})")
                continue
            where = f"{path.name} (epoch {state['epoch']}" + (
                f", step {state['step']})" if state["step"] else ")"
            )
            if path == self.previous:
                log.warning("%s; resuming from %s", "; ".join(skipped or [f"no {self.last}"]), where)
            return state, where
        if skipped:
            log.warning("%s; training from scratch", "; ".join(skipped))
        return None, None

    def _read(self, path: Path, check: Callable[[dict], str]) -> tuple[dict | None, str, bool]:
        """(state, what is wrong with it or '', whether it is another configuration's) of one checkpoint."""
        try:
            state = torch.load(path, map_location="cpu", weights_only=True)
        except Exception as err:  # noqa: BLE001 -- truncated, corrupt or foreign file, a link: damaged
            return None, f"{type(err).__name__}: {' '.join(str(err).split())[:300]}", False
        if not isinstance(state, dict) or state.get("fingerprint") != self.fingerprint:
            return None, "belongs to a different configuration", True
        saved = state.get("model_resolved")
        if self.resolved is not None and isinstance(saved, dict):
            diffs = resolved_difference(saved, self.resolved, type(self.model_config))
            if diffs:
                changed = "; ".join(f"model_resolved.{d}" for d in diffs)
                return None, f"belongs to a different configuration ({changed})", True
        # contents checked before use: types, ranges, weights' keys, shapes, finite values
        return state, check(state), False


def checkpoint_interval(seconds: float | None = None) -> float:
    """Seconds between time-based checkpoints: `seconds`, else $ATTNLIB_CHECKPOINT_SECONDS, else
    CHECKPOINT_SECONDS (0: after every step that checks its flags, i.e. every step on the CPU)."""
    parameter = "checkpoint_every"
    if seconds is None and os.environ.get(CHECKPOINT_SECONDS_ENV, "").strip():
        parameter, seconds = CHECKPOINT_SECONDS_ENV, os.environ[CHECKPOINT_SECONDS_ENV].strip()
        try:
            seconds = float(seconds)
        except ValueError:
            raise ConfigError(parameter, seconds, "a number of seconds >= 0") from None
    if seconds is None:
        return CHECKPOINT_SECONDS
    check(seconds == math.inf or is_number(seconds, 0), parameter, seconds, "a number of seconds >= 0")
    return float(seconds)


def _rng_state() -> dict:
    state = {"cpu": torch.get_rng_state()}
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def _set_rng_state(state: dict) -> None:
    torch.set_rng_state(state["cpu"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])


def checkpoint_problem(state, model, *, epochs: int, steps: int, optimizer=None) -> str:
    """'' when a checkpoint (`attnlib.train.Checkpoints`) can be resumed by `model` (and `optimizer`) in a run
    of `epochs` epochs of `steps` steps: this version's format, where it stands (epoch, step) in range, one
    history row per epoch trained with finite losses and accuracies in [0, 1], the model's every weight with
    its shape and finite, the optimizer's groups and buffers matching, the running sums of a mid-epoch
    checkpoint numbers. Else what is wrong (the checkpoint is then skipped for an older one, then afresh)."""
    if not isinstance(state, dict):
        return f"it holds a {type(state).__name__}, not a checkpoint"
    if state.get("format") != CHECKPOINT_FORMAT:  # another layout is never misread
        return f"its format is {shown(state.get('format'))}, not {CHECKPOINT_FORMAT}: another attnlib's"
    epoch, step = state.get("epoch"), state.get("step")
    if not in_range(0, epochs)(epoch):
        return f"epoch is {shown(epoch)}, not an integer in [0, {epochs}]"
    if not in_range(0, max(steps - 1, 0))(step) or (epoch == epochs and step):
        return f"step is {shown(step)}, not an integer in [0, {steps}) (0 at the end of training)"
    history = state.get("history")
    if not isinstance(history, list) or len(history) != epoch:
        n = len(history) if isinstance(history, list) else shown(history)
        return f"its history holds {n} rows, not one per epoch trained ({epoch})"
    for i, row in enumerate(history, 1):
        for key, high in _ROW_BOUNDS.items():
            value = row.get(key) if isinstance(row, dict) else row
            if not is_number(value, 0, high):
                return f"history row {i}: {key} is {shown(value)}, not a finite number in [0, {high}]"
    if not is_number(state.get("train_seconds", 0.0), 0, MAX_SECONDS):
        return f"train_seconds is {shown(state.get('train_seconds'))}, not a number of seconds"
    if (cpu := state.get("train_cpu_seconds")) is not None and not is_number(cpu, 0, MAX_SECONDS):
        return f"train_cpu_seconds is {shown(cpu)}, not a number of seconds"
    weights, expected = state.get("model"), model.state_dict()
    if not isinstance(weights, dict) or set(weights) != set(expected):
        keys = set(weights) if isinstance(weights, dict) else set()
        odd = sorted(map(str, keys ^ set(expected)))[:3]
        return f"its weights are not this model's (keys differ: {', '.join(odd) or shown(weights)})"
    for key, ours in expected.items():
        w = weights[key]
        if not isinstance(w, torch.Tensor) or w.shape != ours.shape:
            shape = tuple(w.shape) if isinstance(w, torch.Tensor) else type(w).__name__
            return f"weight {key} is {shape}, not {tuple(ours.shape)}"
        if w.is_floating_point() and not bool(torch.isfinite(w).all()):
            return f"weight {key} is not finite (the run diverged before it was saved)"
    wrong = "" if optimizer is None else _optimizer_problem(state.get("optimizer"), optimizer)
    if wrong:
        return wrong
    scheduler = state.get("scheduler")
    if not isinstance(scheduler, dict) or not in_range(0, epochs * steps + 1)(scheduler.get("last_epoch")):
        return "its scheduler state is not a count of steps in range"
    for rank in state.get("ranks") or [] if step else []:
        partial = rank.get("partial") if isinstance(rank, dict) else None
        sums = partial.get("stats") if isinstance(partial, dict) else None
        if not (isinstance(sums, list) and len(sums) == 4 and all(is_number(s) for s in sums[:3])):
            return "the running sums of its epoch are not 4 numbers"
        if not is_number(partial.get("seconds"), 0, MAX_SECONDS):
            return "the seconds of its epoch are not a number"
        if (cpu := partial.get("cpu_seconds")) is not None and not is_number(cpu, 0, MAX_SECONDS):
            return "the CPU seconds of its epoch are not a number"
    return ""


def _optimizer_problem(saved, optimizer) -> str:
    """'' when `saved` loads into `optimizer` (torch's own check of its groups, on a trial optimizer over the
    same parameters: the real one is untouched) and each buffer has its parameter's shape and is finite."""
    try:
        trial = type(optimizer)([dict(group) for group in optimizer.param_groups])
        trial.load_state_dict(saved)
    except Exception as err:  # noqa: BLE001 -- whatever torch refuses, the checkpoint is not resumed
        return f"its optimizer state is not this optimizer's ({type(err).__name__}: {err})"
    for index, (param, buffers) in enumerate(trial.state.items()):
        for name, value in buffers.items():
            if not isinstance(value, torch.Tensor):
                continue
            if value.dim() and value.shape != param.shape:
                return f"its optimizer's {name} of parameter {index} is {tuple(value.shape)}, not {tuple(param.shape)}"
            if value.is_floating_point() and not bool(torch.isfinite(value).all()):
                return f"its optimizer's {name} of parameter {index} is not finite"
    return ""
