"""The results a chapter shows, read and never trained: each saved run read and checked by the results side
(``attnlib.results.load.read``: no trainer, no device), its status kept in the ``Runs`` it returns (what a
note about a missing result names), and the saved seeds of an experiment. Reading is not training: a
chapter allowed to train (its ``train_missing`` parameter, or ``$ATTNLIB_TRAIN_MISSING``) first calls
``train_missing``, which trains what results/ lacks through the lab.
"""

from __future__ import annotations

from attnbook.params import Params
from attnlib.results.load import Runs, read, read_runs


def load_status(experiment: str, params: Params):
    """``(RunResult or None, status, detail)`` of the saved run of ``experiment`` at the chapter's preset and
    seed (``attnlib.results.load.read``; never trains): None with status "missing", "damaged" or "stale"
    (another configuration) when there is no usable result."""
    saved = read(
        experiment, params.preset, seed=params.seed or 0, results_dir=params.results_dir, data=params.data
    )
    return saved.run, saved.status, saved.detail


def train_missing(experiments, params: Params) -> list[str]:
    """Train, through the lab (its ``run_or_load``, with ``params.run_kwargs()``: the kit's one import of the
    lab), each run of ``experiments`` at the chapter's preset and seed that results/ lacks, holds damaged or
    holds of another configuration (replaced: a chapter shows its preset's current protocol). What a chapter
    calls, explicitly, when it may train (``params.train_missing``); reading never trains. Returns the
    experiments trained."""
    from attnlib.lab.run import run_or_load

    trained = []
    for name in experiments:
        if load_status(name, params)[1] != "complete":
            run_or_load(name, **{**params.run_kwargs(), "train_missing": True})
            trained.append(name)
    return trained


def load_all(experiments, params: Params) -> Runs:
    """``Runs``: ``{name: RunResult or None}`` for several experiments, with their status (see ``load_status``):
    ``attnlib.results.load.read_runs`` at the chapter's preset, seed, data and results folder."""
    return read_runs(
        experiments, params.preset, seed=params.seed or 0, results_dir=params.results_dir, data=params.data
    )


def seed_accuracies(experiment: str, params: Params, seeds=range(10)) -> list[float]:
    """Test accuracies of every saved run of ``experiment`` at ``params.preset`` among ``seeds`` whose result
    is complete for the current configuration (``attnlib.results.tables.seed_accuracies``; never trains): what the
    run-to-run spread is computed from."""
    return list(seed_map(experiment, params, seeds).values())


def seed_map(experiment: str, params: Params, seeds=range(10)) -> dict[int, float]:
    """``{seed: test accuracy}`` of the runs of ``seed_accuracies`` (what a paired-by-seed test matches)."""
    from attnlib.results.tables import seed_accuracies as saved

    found, _ = saved(params.results_dir, params.preset, experiment, data=params.data)
    return {seed: acc for seed, acc in found.items() if seed in seeds}
