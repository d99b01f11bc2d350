"""attnlib.train as a package (issue 32): the same training, to the bit, as the single module it was; every
public name the module had is still there (but measure_throughput, which went with `list --measure`)."""

import hashlib
import json

import torch
from torch import nn

import attnlib.train as trainer
from attnlib.data import Batches, synthetic_cifar10
from attnlib.train import TrainConfig, fit

# The checksum of `_trained()` as the single module attnlib/train.py computed it (commit 2736339, before the
# move), in float64 and rounded to 8 significant digits, so that another machine's summation order does not
# change it.
BEFORE_THE_MOVE = "25fe006a80d19c1f6ab3d735e19b42aa87f53f9a403bc5b8dc117e34f5bb5ac9"

# Every public name of the former module attnlib/train.py (its own definitions and the names it re-exported)
# but init_distributed (now part of distributed_session) and grad_norm (inlined into train_step).
OLD_NAMES = (
    "CHECKPOINT_FORMAT CHECKPOINT_SECONDS CHECKPOINT_SECONDS_ENV Checkpoints DistInfo FitResult Interrupted "
    "SCHEDULES Schedule TrainConfig TrainingDiverged autocast checkpoint_interval current_dist "
    "distributed_session evaluate fast_bf16 fit log make_optimizer "
    "resolve_device train_step"
).split()


class Quadratic(nn.Module):
    """Declares parameters without weight decay and a logged state, as the quadratic encodings do."""

    def __init__(self):
        super().__init__()
        self.centers = nn.Parameter(torch.randn(3, 2, dtype=torch.float64))

    def no_weight_decay(self):
        return {"centers"}

    def logged_state(self):
        return {"centers": self.centers}


class Net(nn.Module):
    """A float64 conv net with dropout (the per-epoch RNG) and a quadratic-like module."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 4, stride=4, dtype=torch.float64)
        self.drop = nn.Dropout(0.2)
        self.fc = nn.Linear(8 * 8 * 8, 10, dtype=torch.float64)
        self.enc = Quadratic()

    def forward(self, x):
        scale = 1 + 0.01 * self.enc.centers.pow(2).sum()
        return self.fc(self.drop(torch.relu(self.conv(x.double()))).flatten(1)) * scale


def _trained() -> str:
    """sha256 of the history (without timings) and the weights of 2 epochs, rounded to 8 digits."""
    torch.manual_seed(0)
    model = Net()
    data = synthetic_cifar10(64, 32, seed=1)
    cfg = TrainConfig(
        epochs=2, batch_size=16, lr=0.05, warmup=0.2, bf16=False, label_smoothing=0.1, grad_clip=1.0
    )
    out = fit(
        model,
        Batches(data.train, 16, train=True, seed=4),
        Batches(data.test, 16, train=False, seed=4),
        cfg,
        device="cpu",
        seed=4,
        progress=False,
    )
    rows = [
        {k: f"{v:.8g}" for k, v in r.items() if k not in ("seconds", "images_per_s")} for r in out.history
    ]
    weights = {k: [f"{v:.8g}" for v in t.flatten().tolist()] for k, t in model.state_dict().items()}
    logged = {k: [f"{v:.8g}" for v in t.flatten().tolist()] for k, t in out.quadratic.items()}
    text = json.dumps([rows, weights, logged], sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()


def test_training_is_what_the_single_module_computed():
    assert _trained() == BEFORE_THE_MOVE


def test_every_name_of_the_former_module_is_still_there():
    missing = [n for n in OLD_NAMES if not hasattr(trainer, n)]
    assert missing == []


def test_the_core_packages_keep_modules_and_functions_small():
    """Issue 32's bounds for attnlib/train and attnlib/data: no module over 500 lines, no function over 100."""
    import ast
    from pathlib import Path

    import attnlib.data

    too_long = []
    for package in (trainer, attnlib.data):
        for path in sorted(Path(package.__file__).parent.glob("*.py")):
            text = path.read_text()
            if len(text.splitlines()) > 500:
                too_long.append(f"{path.name}: {len(text.splitlines())} lines")
            for node in ast.walk(ast.parse(text)):
                if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                    start = min([node.lineno, *(d.lineno for d in node.decorator_list)])
                    if node.end_lineno - start + 1 > 100:
                        too_long.append(f"{path.name}:{node.name}: {node.end_lineno - start + 1} lines")
    assert too_long == []
