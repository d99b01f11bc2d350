"""Suite-wide settings: tiny tensors on a 2-core machine run fastest, and bitwise repeatably, on one thread."""

import sys
from pathlib import Path

import pytest
import torch

# The scripts of tools/ (the browser check of the built book) are imported by name, as `make check-book` runs them.
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tools"))


@pytest.fixture(scope="session", autouse=True)
def one_thread():
    """One intra-op thread for every in-process test (children set OMP_NUM_THREADS themselves)."""
    old = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(old)


@pytest.fixture(autouse=True)
def close_figures():
    """Each test's matplotlib figures closed after it (the figure helpers return open figures to the caller)."""
    yield
    if "matplotlib.pyplot" in sys.modules:
        sys.modules["matplotlib.pyplot"].close("all")


@pytest.fixture
def cli(capsys):
    """`python -m attnlib ARGV` in this process: ``cli(argv)`` -> (exit code, stdout, stderr)."""
    from attnlib.lab.cli import main

    def run(argv) -> tuple[int, str, str]:
        try:
            code = main(argv)
        except SystemExit as exit:  # argparse
            code = exit.code
        out, err = capsys.readouterr()
        return code, out, err

    return run


@pytest.fixture(scope="session")
def mount_namespace(tmp_path_factory):
    """``run(script) -> CompletedProcess``: a bash script run as root of its own user and mount namespace
    (``unshare --user --map-root-user --mount``), where it may mount a small or read-only tmpfs: a full
    or read-only disk for real, touching nothing outside. Skips where the kernel forbids such namespaces."""
    import shutil
    import subprocess

    def run(script: str, timeout: float = 300) -> subprocess.CompletedProcess:
        command = ["unshare", "--user", "--map-root-user", "--mount", "bash", "-euc", script]
        return subprocess.run(command, capture_output=True, text=True, timeout=timeout)

    probe = tmp_path_factory.mktemp("mount-probe")
    if shutil.which("unshare") is None or run(f"mount -t tmpfs -o size=64k tmpfs {probe}", 30).returncode:
        pytest.skip("no unprivileged user and mount namespaces here (unshare -rm): cannot mount a tmpfs")
    return run


@pytest.fixture(scope="session")
def trained(tmp_path_factory):
    """vit and vit_ha trained at the smoke preset in one results folder, once for the whole suite
    (read-only: tests that damage results work on a copy)."""
    from attnlib.lab.run import train_run

    root = tmp_path_factory.mktemp("results")
    for name in ("vit", "vit_ha"):
        train_run(name, "smoke", results_dir=root, progress=False)
    return root


@pytest.fixture
def copy(trained, tmp_path):
    """A private copy of the trained results folder (for tests that damage it)."""
    import shutil

    dst = tmp_path / "results"
    shutil.copytree(trained, dst)
    return dst


@pytest.fixture
def damaged(trained, tmp_path):
    """A copy where vit_ha's metrics.json is cut in half and vit holds a result of another configuration
    (trained for 2 epochs; the smoke preset says 1)."""
    import shutil

    from attnlib.lab.run import train_run
    from attnlib.results.config import run_dir

    root = tmp_path / "results"
    shutil.copytree(trained, root)
    metrics = run_dir(root, "vit_ha", "smoke") / "metrics.json"
    metrics.write_text(metrics.read_text()[:200])
    shutil.rmtree(run_dir(root, "vit", "smoke"))
    train_run("vit", "smoke", epochs=2, results_dir=root)
    return root
