"""One training loop for every experiment: SGD, warm-up + cosine schedule, bf16 autocast, checkpoints, DDP.

`fit` (loop) trains a model in place on two batch sources that follow the data contract and returns the
per-epoch history; `checkpoint` writes and validates last.pt / previous.pt; `distributed` joins torchrun's
process group and turns stop signals into a flag; `device` is the one device and dtype policy; `schedule` the
learning-rate schedule and the optimizer. The names of the former module attnlib/train.py are all here.
"""

from attnlib.config import SCHEDULES, TrainConfig
from attnlib.env import CHECKPOINT_SECONDS_ENV
from attnlib.train.checkpoint import (
    CHECKPOINT_FORMAT,
    CHECKPOINT_SECONDS,
    Checkpoints,
    _rng_state,
    _set_rng_state,
    checkpoint_interval,
)
from attnlib.train.device import autocast, cpu_info, fast_bf16, resolve_device, use_bf16
from attnlib.train.distributed import (
    DistInfo,
    _all_reduce,
    _StopRequest,
    current_dist,
    distributed_session,
    init_distributed,
)
from attnlib.train.loop import (
    FitResult,
    Interrupted,
    TrainingDiverged,
    _EpochClock,
    _progress,
    _Run,
    _seed_epoch,
    _skip,
    _State,
    evaluate,
    fit,
    grad_norm,
    log,
    train_step,
)
from attnlib.train.schedule import Schedule, make_optimizer
from attnlib.util import keep_patchable

__all__ = [
    "CHECKPOINT_FORMAT",
    "CHECKPOINT_SECONDS",
    "CHECKPOINT_SECONDS_ENV",
    "SCHEDULES",
    "Checkpoints",
    "DistInfo",
    "FitResult",
    "Interrupted",
    "Schedule",
    "TrainConfig",
    "TrainingDiverged",
    "autocast",
    "checkpoint_interval",
    "current_dist",
    "distributed_session",
    "evaluate",
    "cpu_info",
    "fast_bf16",
    "fit",
    "grad_norm",
    "init_distributed",
    "log",
    "make_optimizer",
    "resolve_device",
    "train_step",
    "use_bf16",
    # the former module's private names, for callers that reached them
    "_EpochClock",
    "_Run",
    "_State",
    "_StopRequest",
    "_all_reduce",
    "_progress",
    "_rng_state",
    "_seed_epoch",
    "_set_rng_state",
    "_skip",
]

keep_patchable(__name__)  # monkeypatch.setattr(attnlib.train, "evaluate", ...) reaches the loop


def __getattr__(name: str):
    """measure_throughput moved to the lab (attnlib.lab.throughput); the old name stays for its callers."""
    if name == "measure_throughput":
        from attnlib.lab.throughput import measure_throughput

        return measure_throughput
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
