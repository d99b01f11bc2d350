"""Suite-wide settings: tiny tensors on a 2-core machine run fastest, and bitwise repeatably, on one thread."""

import pytest
import torch


@pytest.fixture(scope="session", autouse=True)
def one_thread():
    """One intra-op thread for every in-process test (children set OMP_NUM_THREADS themselves)."""
    old = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(old)


@pytest.fixture
def cli(capsys):
    """`python -m attnlib ARGV` in this process: ``cli(argv)`` -> (exit code, stdout, stderr)."""
    from attnlib.__main__ import main

    def run(argv) -> tuple[int, str, str]:
        try:
            code = main(argv)
        except SystemExit as exit:  # argparse
            code = exit.code
        out, err = capsys.readouterr()
        return code, out, err

    return run
