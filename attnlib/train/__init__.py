"""One training loop for every experiment: SGD, warm-up + cosine schedule, bf16 autocast, checkpoints, DDP.

`fit` (loop) trains a model in place on two batch sources that follow the data contract and returns the
per-epoch history; `checkpoint` writes and validates last.pt / previous.pt; `distributed` joins torchrun's
process group and turns stop signals into a flag; `device` is the one device and dtype policy; `schedule` the
learning-rate schedule and the optimizer. The names of the former module attnlib/train.py are all here,
each imported from its home on first use, so that ``import attnlib.train.device`` does not load the loop.
"""

from attnlib.util import reexport

HOMES = {
    "attnlib.config": ("SCHEDULES", "TrainConfig"),
    "attnlib.env": ("CHECKPOINT_SECONDS_ENV",),
    "attnlib.train.checkpoint": (
        "CHECKPOINT_FORMAT", "CHECKPOINT_SECONDS", "Checkpoints", "checkpoint_interval", "checkpoint_problem", "_rng_state",
        "_set_rng_state",
    ),
    "attnlib.train.device": ("autocast", "cpu_info", "fast_bf16", "resolve_device", "use_bf16"),
    "attnlib.train.distributed": (
        "DistInfo", "current_dist", "distributed_session", "init_distributed", "_all_reduce", "_StopRequest",
    ),
    "attnlib.train.loop": (
        "FitResult", "Interrupted", "TrainingDiverged", "evaluate", "fit", "grad_norm", "log", "train_step",
        "_EpochClock", "_progress", "_Run", "_seed_epoch", "_skip", "_State",
    ),
    "attnlib.train.schedule": ("Schedule", "make_optimizer"),
    "attnlib.lab.throughput": ("measure_throughput",),  # moved to the lab; the old name stays for its callers
}  # fmt: skip

reexport(__name__, HOMES)  # monkeypatch.setattr(attnlib.train, "evaluate", ...) reaches the loop
