"""attnlib.train as a package (issue 32): the same training, to the bit, as the single module it was; every
public name the module had is still there (but measure_throughput, which went with `list --measure`)."""

import pytest
import torch
from torch import nn

import attnlib.train as trainer
from attnlib.data import Batches, synthetic_cifar10
from attnlib.train import TrainConfig, fit

# What `_trained()` gave with the single module attnlib/train.py (commit 2736339, before the move), run in
# float64 (on an AVX2 AMD EPYC, 2026-12-03): the history of the 2 epochs, and per tensor of the weights and of the logged state its sum, its norm
# and its dot product with a fixed random vector (`_signature`). Values, not a checksum of rounded digits: a
# checksum flipped with another CPU's summation order (AVX2 against AVX-512 gave two), while a change in what
# training computes moves these far beyond the tolerances of `test_training_is_what_the_single_module_computed`.
BEFORE_THE_MOVE_HISTORY = [
    {
        "epoch": 1.0,
        "train_loss": 2.2291624546051025,
        "train_acc": 0.171875,
        "test_loss": 1.9821926951408386,
        "test_acc": 0.375,
        "lr": 0.040587245046468344,
        "grad_norm": 3.0582211644424673,
    },
    {
        "epoch": 2.0,
        "train_loss": 2.046340972185135,
        "train_acc": 0.25,
        "test_loss": 1.800498127937317,
        "test_acc": 0.53125,
        "lr": 0.0024757783024395245,
        "grad_norm": 3.0248022160098134,
    },
]
BEFORE_THE_MOVE_WEIGHTS = {
    "conv.bias": (0.21503821000190615, 0.2655506644949515, -0.08140499222144781),
    "conv.weight": (0.36051212468740695, 1.5862130263761918, 2.7241853621093823),
    "enc.centers": (6.287217356813343, 4.199043447014908, 0.0834468625548197),
    "fc.bias": (0.13070476237544398, 0.09978526037961079, 0.014150679533731763),
    "fc.weight": (0.3837123630440006, 1.8562831817718821, 1.7315692532379516),
}
BEFORE_THE_MOVE_LOGGED = {
    "centers": (18.859973788261414, 7.272309478449242, 5.832403211711785),
    "epoch": (3.0, 2.23606797749979, -2.4451237356022135),
}

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


def _signature(tensors: dict, generator: torch.Generator) -> dict:
    """Per tensor: its sum, its L2 norm and its dot product with a fixed N(0, 1) vector (float64)."""
    out = {}
    for name, tensor in sorted(tensors.items()):
        x = tensor.detach().double().flatten()
        probe = torch.randn(x.numel(), generator=generator, dtype=torch.float64)
        out[name] = (x.sum().item(), x.norm().item(), (x @ probe).item())
    return out


def _trained() -> tuple[list, dict, dict]:
    """The history (without timings), the weights' and the logged state's signatures after 2 epochs."""
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
    assert [r["bf16"] for r in out.history] == [0, 0]  # trained in float32, as configured (bf16=False)
    rows = [{k: float(v) for k, v in r.items() if k not in ("seconds", "images_per_s", "bf16")} for r in out.history]
    generator = torch.Generator().manual_seed(123)
    weights = _signature(model.state_dict(), generator)
    return rows, weights, _signature(out.quadratic, generator)


def test_training_is_what_the_single_module_computed():
    rows, weights, logged = _trained()
    # the losses are float32 means (their last bits follow the CPU's summation order) and their gradients
    # carry that into the float64 weights: on an AVX-512 BF16 EPYC the signatures moved by up to 5.6e-7
    # (fc.weight's sum, where signs cancel) from the AVX2 values, while a 1% change of the lr, the gradient
    # clip or the label smoothing moves some signature by 2e-3 to 5e-2
    assert rows == [pytest.approx(r, rel=1e-6) for r in BEFORE_THE_MOVE_HISTORY]
    for got, want in ((weights, BEFORE_THE_MOVE_WEIGHTS), (logged, BEFORE_THE_MOVE_LOGGED)):
        assert got.keys() == want.keys()
        assert {k: pytest.approx(v, rel=1e-5) for k, v in want.items()} == got


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
