"""attnlib.lab (issue 32): the one CLI's benchmark subcommands (the library validates, the CLI says it in one
line), the one timer and peak-memory method, the machine facts and the load check."""

from __future__ import annotations

import pytest
import torch

from attnlib.errors import ConfigError
from attnlib.lab import kernels, machine, measure


def test_block_times_follow_the_work():
    """A call that does twice the work takes longer per call (each block's time is per call, not per block)."""
    a = torch.randn(192, 192)
    one = min(measure.block_times(lambda: a @ a, 0.05))
    four = min(measure.block_times(lambda: [a @ a for _ in range(4)], 0.05))
    assert 0 < one < four


def test_block_times_use_the_current_threads():
    """torch.utils.benchmark.Timer runs on one thread unless told; the blocks run on torch's current count."""
    seen = []
    previous = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        measure.block_times(lambda: seen.append(torch.get_num_threads()), 0.001)
    finally:
        torch.set_num_threads(previous)
    assert seen and set(seen) == {2}


def test_peak_memory_counts_what_a_call_allocates_not_what_exists():
    kept = torch.ones(8 * 2**20)  # 32 MiB before the call: not counted

    def alloc():
        t = torch.ones(4 * 2**20)  # 16 MiB, freed before a second one
        del t
        u = torch.ones(2 * 2**20)  # 8 MiB
        assert u.sum() > 0

    assert measure.peak_memory_mb(alloc, torch.device("cpu")) == pytest.approx(16, abs=0.5)
    assert kept.numel()


@pytest.mark.parametrize(
    "load, shared",
    [([0.2, 0.2, 0.2], False), ([3.0, 3.0, 3.0], True), (None, None)],
)
def test_the_load_check_refuses_shared_cores_only(load, shared):
    info = dict(device="cpu", load_average_start=load, usable_cores=2)
    if shared:
        with pytest.raises(machine.MachineBusy, match="--force") as err:
            machine.refuse_if_shared(info, 1, "the numbers would be wrong")
        assert "the numbers would be wrong" in str(err.value)
    else:
        assert machine.refuse_if_shared(info, 1, "x")["shared"] is shared
    gpu = dict(info, device="cuda")  # the CPU's load says little about a GPU's kernels: not refused
    assert machine.refuse_if_shared(gpu, 1, "x")["shared"] is shared
    if shared:
        with pytest.raises(machine.MachineBusy):
            machine.refuse_if_shared(gpu, 1, "x", cpu_only=False)


def test_machine_names_the_cpu_and_only_known_flags():
    info = machine.machine(torch.device("cpu"))
    assert info["cpu"] and set(info["cpu_flags"]) <= set(machine.FLAGS)
    assert 1 <= info["usable_cores"] <= info["logical_cores"]


@pytest.mark.parametrize(
    "argv, fragment",
    [
        (["bench", "--quick", "--repeats", "0"], "error: repeats: got 0; allowed: an integer >= 1"),
        (["bench", "--quick", "--layers", "-1"], "error: layers: got -1"),
        (["bench", "--quick", "--dtypes", "fp16"], "error: dtypes: got 'fp16'"),
        (["bench", "--peak-only", "--dtypes", "fp8"], "error: dtypes: got 'fp8'"),
        (["bench", "--device", "tpu"], "error: device: got 'tpu'"),
        (["bench", "--repeats", "two"], "argument --repeats: invalid int value: 'two'"),
        (["san-bench", "--dtype", "int8"], "error: dtype: got 'int8'"),
        (["san-bench", "--backends", "cuda"], "error: backends: got ('cuda',)"),
        (["san-bench", "--batch", "0"], "error: batch: got 0"),
    ],
)
def test_bad_benchmark_input_is_one_line_and_writes_nothing(argv, fragment, cli, tmp_path):
    code, out, err = cli([*argv, "--out", str(tmp_path / "r.json")] if argv[0] == "bench" else argv)
    assert code == 2 and err.count("\n") == 1 and fragment in err, err
    assert not any(tmp_path.iterdir())


def test_san_bench_times_every_stage_and_op(cli):
    code, out, err = cli(["san-bench", "--batch", "2", "--min-run-time", "0.001", "--device", "cpu"])
    assert code == 0, err
    assert "aggregation" in out and "subtraction2" in out and "fwd+bwd ms" in out
    table = kernels.run(batch=2, device="cpu", min_run_time=0.001)
    from attnlib.san.model import SANConfig

    assert len(table) == 3 * len(SANConfig().widths)  # three operations at every SAN stage
    assert (table.xs("torch", axis=1, level=1) > 0).all().all()


def test_kernels_checks_its_device():
    with pytest.raises(ConfigError, match="device"):
        kernels.run(device="tpu")
