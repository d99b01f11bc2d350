"""The one device and dtype policy (issue 32): which device a name means (attnlib.checks.resolve_device) and
where bf16 pays (attnlib.train.device); and the one train_step in its two uses."""

import copy

import pytest
import torch
from torch import nn

from attnlib.checks import resolve_device
from attnlib.errors import ConfigError
from attnlib.train import make_optimizer, train_step
from attnlib.train.device import cpu_info, fast_bf16, use_bf16
from attnlib.train.loop import TrainConfig


def test_bf16_setting_as_set_else_where_it_is_fast():
    cpu = torch.device("cpu")
    assert use_bf16(True, cpu) is True and use_bf16(False, cpu) is False
    assert use_bf16(None, cpu) is fast_bf16(cpu)


def test_resolve_device_names_what_is_allowed():
    assert (
        resolve_device(None)
        == resolve_device("auto")
        == torch.device("cuda" if torch.cuda.is_available() else "cpu")
    )
    assert resolve_device("cpu") == torch.device("cpu")
    for bad in ("tpu", "gpu0", "cuda:99"):
        if bad == "cuda:99" and not torch.cuda.is_available():
            continue
        with pytest.raises(ConfigError) as err:
            resolve_device(bad)
        assert err.value.parameter == "device"


def test_cpu_flags_agree_with_what_torch_dispatches_to():
    """torch picks its CPU kernels from the same CPUID bits: AVX512 kernels need avx512f, AVX2 ones avx2."""
    name, flags = cpu_info()
    assert name and cpu_info() is cpu_info()  # read once
    capability = torch.backends.cpu.get_cpu_capability()
    if not flags:
        pytest.skip("no /proc/cpuinfo flags here")
    if capability.startswith("AVX512"):
        assert "avx512f" in flags
    if capability in ("AVX2", "AVX512"):
        assert "avx2" in flags


def _net():
    torch.manual_seed(0)
    return nn.Sequential(nn.Flatten(), nn.Linear(3 * 32 * 32, 10, dtype=torch.float64))


def test_train_step_without_an_optimizer_times_the_step_and_changes_nothing():
    """The benchmark's use: the same loss, logits and gradient norm as the training step, no update, no
    gradients left behind."""
    x, y = torch.randn(8, 3, 32, 32, dtype=torch.float64), torch.arange(8) % 10
    trained, timed = _net(), _net()
    before = copy.deepcopy(timed.state_dict())
    cfg = TrainConfig(epochs=1, batch_size=8, lr=0.1)
    a = train_step(trained, make_optimizer(trained, cfg), x, y, 0.1, False, 1.0)
    b = train_step(timed, None, x, y, 0.1, False, 1.0)
    assert all(torch.equal(u, v) for u, v in zip(a, b, strict=True))
    assert all(torch.equal(before[k], v) for k, v in timed.state_dict().items())
    assert all(p.grad is None for p in timed.parameters())
    assert not all(torch.equal(before[k], v) for k, v in trained.state_dict().items())
