"""TrainConfig: the optimisation protocol of one run, shared by the registry (`attnlib.experiments`) and the
training loop (`attnlib.train`, which re-exports it), so that the registry needs nothing of the loop."""

from __future__ import annotations

from dataclasses import dataclass

from attnlib.checks import check, check_choice, check_positive_int

SCHEDULES = ("cosine", "multistep", "constant")


@dataclass(frozen=True)
class TrainConfig:
    """Optimisation protocol of one run (everything `fit` needs, nothing else).

    warmup: fraction of all optimisation steps spent in the linear warm-up (per step).
    milestones: for `schedule="multistep"`, fractions of the epochs at which the lr is divided by 10.
    bf16: autocast matmuls to bfloat16 (fp32 master weights); None = where the hardware has fast bf16.
    grad_clip: clip the global gradient norm to this value before each update (None: no clipping).

    A run always trains `epochs` epochs: no decision of the loop reads the test set (the plateau stop of
    the former `converge` preset did, and was dropped on 2026-12-02: protocol_history.yaml, `long`).
    """

    epochs: int
    batch_size: int
    lr: float
    momentum: float = 0.9
    weight_decay: float = 1e-4
    nesterov: bool = False
    warmup: float = 0.05
    schedule: str = "cosine"
    milestones: tuple[float, ...] = ()
    label_smoothing: float = 0.0
    bf16: bool | None = None
    grad_clip: float | None = None

    def __post_init__(self):
        check_positive_int("epochs", self.epochs)
        check_positive_int("batch_size", self.batch_size)
        check(self.lr > 0, "lr", self.lr, "a number > 0")
        check(0 <= self.warmup < 1, "warmup", self.warmup, "a fraction in [0, 1)")
        check_choice("schedule", self.schedule, SCHEDULES)
        check(0 <= self.label_smoothing < 1, "label_smoothing", self.label_smoothing, "a number in [0, 1)")
        check(
            self.grad_clip is None or (isinstance(self.grad_clip, int | float) and self.grad_clip > 0),
            "grad_clip",
            self.grad_clip,
            "None or a number > 0",
        )
