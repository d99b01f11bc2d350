"""One training loop for every experiment: SGD, warm-up + cosine schedule, bf16 autocast, checkpoints, DDP.

`fit` (loop) trains a model in place on two batch sources that follow the data contract and returns the
per-epoch history; `state` is what a run carries across epochs, read from and written to a checkpoint;
`checkpoint` writes and validates last.pt / previous.pt; `distributed` joins torchrun's process group and turns
stop signals into a flag; `device` is the one dtype policy (which device a name means:
attnlib.checks.resolve_device); `schedule` the learning-rate schedule and the optimizer. The public names of the
former module attnlib/train.py are imported here from their homes; patch a name in its home module
(``attnlib.train.loop.evaluate``).
"""

from attnlib.checks import resolve_device
from attnlib.config import SCHEDULES, TrainConfig
from attnlib.env import CHECKPOINT_SECONDS_ENV
from attnlib.train.checkpoint import (
    CHECKPOINT_FORMAT,
    CHECKPOINT_SECONDS,
    Checkpoints,
    checkpoint_interval,
    checkpoint_problem,
)
from attnlib.train.device import autocast, cpu_info, fast_bf16, use_bf16
from attnlib.train.distributed import DistInfo, current_dist, distributed_session
from attnlib.train.loop import (
    FitResult,
    Interrupted,
    TrainingDiverged,
    evaluate,
    fit,
    log,
    train_step,
)
from attnlib.train.schedule import Schedule, make_optimizer

__all__ = [
    "CHECKPOINT_FORMAT", "CHECKPOINT_SECONDS", "CHECKPOINT_SECONDS_ENV", "SCHEDULES", "Checkpoints",
    "DistInfo", "FitResult", "Interrupted", "Schedule", "TrainConfig", "TrainingDiverged", "autocast",
    "checkpoint_interval", "checkpoint_problem", "cpu_info", "current_dist", "distributed_session", "evaluate",
    "fast_bf16", "fit", "log", "make_optimizer", "resolve_device",
    "train_step", "use_bf16",
]  # fmt: skip
