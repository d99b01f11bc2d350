"""The shared argument checks and the data-spec parser (attnlib.checks), the atomic write (attnlib.util) and
Table 3's pass timer (attnlib.lab.measure): messages name the parameter and the allowed values; a failed
write leaves no file."""

from __future__ import annotations

import errno

import pytest
import torch

from attnlib.checks import (
    check_choice,
    check_fraction,
    check_positive_int,
    check_probability,
    is_number,
    is_synthetic,
    synthetic_sizes,
)
from attnlib.errors import ConfigError
from attnlib.lab.measure import pass_times_ms
from attnlib.util import atomic_write


@pytest.mark.parametrize(
    ("check", "args", "message"),
    [
        (check_positive_int, ("heads", 0), "heads: got 0; allowed: an integer >= 1"),
        (check_positive_int, ("seed", True, 0), "seed: got True; allowed: an integer >= 0"),
        (check_positive_int, ("n", 2.0, 1, "a positive integer"), "n: got 2.0; allowed: a positive integer"),
        (check_choice, ("norm", "rms", ("pre", "post")), "norm: got 'rms'; allowed: ['pre', 'post']"),
        (check_probability, ("dropout", 1.0), "dropout: got 1.0; allowed: a float in [0, 1)"),
        (check_probability, ("dropout", "0.1"), "dropout: got '0.1'; allowed: a float in [0, 1)"),
        (check_fraction, ("level", 0), "level: got 0; allowed: a number strictly between 0 and 1"),
    ],
)
def test_checks_raise_config_error_naming_parameter_and_allowed(check, args, message):
    with pytest.raises(ConfigError) as info:
        check(*args)
    assert str(info.value) == message


def test_checks_accept_valid_values():
    check_positive_int("heads", 9)
    check_positive_int("seed", 0, 0)
    check_choice("norm", "pre", ("pre", "post"))
    check_probability("dropout", 0.0)
    check_fraction("level", 0.95)


def test_is_number_never_raises():
    """An int past a float's range is a finite number (math.isfinite would raise OverflowError on it)."""
    huge = 10**4200
    assert is_number(huge) and not is_number(huge, 0, 1e10) and not is_number(-huge, 0)
    assert not is_number(float("nan")) and not is_number(float("inf")) and not is_number(True)


def test_synthetic_specs():
    assert synthetic_sizes("synthetic") == (512, 256)
    assert synthetic_sizes("synthetic:64:32") == (64, 32)
    assert is_synthetic("synthetic:64:32") and not is_synthetic("synthetic_folder") and not is_synthetic(None)
    for bad in ("synthetic:", "synthetic:5", "synthetic:1:2:3", "synthetic:a:b", "cifar10"):
        with pytest.raises(ConfigError, match="allowed: 'synthetic' or 'synthetic:N_TRAIN:N_TEST'"):
            synthetic_sizes(bad)
    for bad in ("synthetic:0:32", "synthetic:1000000000:10"):  # the upper bound: no 3 TB allocation
        with pytest.raises(ConfigError, match=r"with sizes in \[1, 200000\]"):
            synthetic_sizes(bad)


def test_atomic_write_replaces_whole_file_or_leaves_old(tmp_path):
    target = tmp_path / "sub" / "x.bin"
    with atomic_write(target) as f:
        f.write(b"old")
    with pytest.raises(RuntimeError), atomic_write(target) as f:
        f.write(b"partial")
        raise RuntimeError("interrupted")
    assert target.read_bytes() == b"old"
    with pytest.raises(OSError) as info, atomic_write(target) as f:
        raise OSError(errno.ENOSPC, "No space left on device", str(tmp_path / "sub" / ".x.bin.tmp1"))
    assert info.value.errno == errno.ENOSPC and info.value.filename == str(target)  # the file meant
    assert sorted(p.name for p in target.parent.iterdir()) == ["x.bin"]


def test_pass_times_ms_measures_each_call():
    import time

    times = pass_times_ms(lambda x: time.sleep(0.02), torch.zeros(1), 2)
    assert len(times) == 2 and all(15 <= ms < 2000 for ms in times)
