"""What several test files share: the tiny paper classifier, the check that one implementation of an
operation (a backend, a fast path) equals another in values and gradients, the reliability checks of
a results folder (nothing written, no temporary file left, an intact result), and the notebook runner.

Imported as `from helpers import ...` (pytest puts tests/ on sys.path; so does running a test file as a
script, as test_ddp's torchrun workers do)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np
import pandas as pd
import torch
from PIL import Image

from attnlib.results.load import inspect_run

# A cell that runs longer than this fails its test (the chapters' slowest cell at the smoke preset takes
# seconds): a kernel that stops answering costs minutes, not pytest-timeout's 10.
CELL_TIMEOUT_S = 300


def run_notebook(source, out: Path, **kwargs):
    """papermill.execute_notebook (source: a path or a notebook) into `out`, on a python3 kernel that talks
    over IPC sockets in out's folder instead of TCP ports. On TCP, jupyter_client picks free ports and the
    kernel binds them later: another process can take one in between (session 31's CI: the kernel's
    heartbeat lost its port and the chapter test hung until the 10-minute timeout). A socket file in the
    test's own temporary folder cannot be taken. Imports papermill here, not at the top: torchrun workers
    import this module."""
    import papermill
    from traitlets.config import Config

    ipc = Config({"KernelManager": {"transport": "ipc", "ip": str(Path(out).parent / "kernel")}})
    return papermill.execute_notebook(
        source if isinstance(source, dict) else str(source),
        str(out),
        kernel_name="python3",
        progress_bar=False,
        config=ipc,
        execution_timeout=CELL_TIMEOUT_S,
        **kwargs,
    )


# The paper classifier at its smallest useful size: 2 layers, width 16, 4 heads, 4x4 space-to-depth (8x8
# tokens on 32x32 images), no dropout (so that runs compare exactly).
TINY_PAPER = dict(layers=2, hidden=16, mlp=16, downsample=4, heads=4, dropout=0.0, attn_dropout=0.0)


def assert_same_values_and_grads(
    f: Callable,
    g: Callable,
    args: Sequence[torch.Tensor],
    *,
    reference_dtype: torch.dtype | None = None,
    atol: float | None = None,
    rtol: float | None = None,
    seed: int = 1,
) -> None:
    """f(*args) equals g(*args) and so do the gradients of one random upstream gradient with respect to
    every arg. With `reference_dtype`, g (the reference) runs on detached copies of args in that dtype
    and f's outputs and gradients are compared after conversion; f's gradients keep their args' dtypes.
    atol / rtol: torch.testing.assert_close's (None: its defaults for the dtypes compared)."""
    tol = {} if atol is None and rtol is None else dict(atol=atol, rtol=rtol)
    ref_args = list(args)
    if reference_dtype is not None:
        ref_args = [a.detach().to(reference_dtype).requires_grad_() for a in args]
    out, expected = f(*args), g(*ref_args)
    torch.testing.assert_close(out.to(expected.dtype), expected, **tol)
    generator = torch.Generator().manual_seed(seed)
    upstream = torch.randn(expected.shape, generator=generator, dtype=expected.dtype)
    grads = torch.autograd.grad(out, list(args), upstream.to(out.dtype))
    expected_grads = torch.autograd.grad(expected, ref_args, upstream)
    for arg, got, want in zip(args, grads, expected_grads, strict=True):
        assert got.dtype == arg.dtype
        torch.testing.assert_close(got.to(want.dtype), want, **tol)


# ------------------------------------------------------------------ reliability: results folders on disk
TIMING = ["seconds", "images_per_s"]  # history columns that legitimately differ between runs


def files(folder: Path) -> dict[str, int]:
    """Every file under `folder` with its modification time (to show that nothing was written)."""
    return {str(p.relative_to(folder)): p.stat().st_mtime_ns for p in folder.rglob("*") if p.is_file()}


def leftovers(folder: Path) -> list[str]:
    return [p.name for p in folder.rglob("*") if ".tmp" in p.name]


def history(result) -> pd.DataFrame:
    return result.history.drop(columns=TIMING)


def assert_intact(folder: Path, config: dict) -> None:
    """A complete result of `config`: checksums match, no lock, no temporary file, last.pt readable."""
    assert inspect_run(folder, expected=config) == ("complete", "")
    assert not (folder / "run.lock").exists() and leftovers(folder) == []
    state = torch.load(folder / "checkpoints" / "last.pt", weights_only=True)
    assert state["epoch"] == config["train"]["epochs"] and state["step"] == 0
    assert not (folder / "checkpoints" / "previous.pt").exists()


def image_folder(root: Path) -> Path:
    """A tiny CIFAR-10 ImageFolder: train/<class>/0.png and test/<class>/0.png for the ten classes."""
    from attnlib.data import CLASSES

    pixels = np.zeros((32, 32, 3), dtype=np.uint8)
    for split in ("train", "test"):
        for name in CLASSES:
            (root / split / name).mkdir(parents=True)
            Image.fromarray(pixels).save(root / split / name / "0.png")
    return root
