"""The results a chapter shows: ``run_or_load`` with the chapter's parameters, each load's status kept in the
``Runs`` it returns (what a note about a missing result names), and the saved seeds of an experiment.
"""

from __future__ import annotations

from attnbook.params import Params
from attnlib.runs import Runs


def load_status(experiment: str, params: Params):
    """``(RunResult or None, status, detail)``: ``run_or_load`` with the chapter's parameters; None with
    status "missing", "damaged" or "stale" when there is no usable result and training is not allowed
    (the book build). Trains (or retrains a damaged or stale result) when ``params.train_missing``."""
    from attnlib.runs import MissingResult, run_or_load

    try:
        run, status, detail = run_or_load(experiment, **params.run_kwargs()), "complete", ""
    except MissingResult as err:
        run, status, detail = None, err.status, err.detail
    return run, status, detail


def load(experiment: str, params: Params):
    """The ``RunResult`` of ``load_status``, or None (missing, damaged or stale, and not trained)."""
    return load_status(experiment, params)[0]


def load_all(experiments, params: Params) -> Runs:
    """``Runs``: ``{name: RunResult or None}`` for several experiments, with their status (see ``load_status``)."""
    runs = Runs()
    for name in experiments:
        run, status, detail = load_status(name, params)
        runs[name], runs.status[name] = run, (status, detail)
    return runs


def seed_accuracies(experiment: str, params: Params, seeds=range(10)) -> list[float]:
    """Test accuracies of every saved run of ``experiment`` at ``params.preset`` among ``seeds`` whose result
    is complete for the current configuration (``attnlib.tables.seed_accuracies``; never trains): what the
    run-to-run spread is computed from."""
    return list(seed_map(experiment, params, seeds).values())


def seed_map(experiment: str, params: Params, seeds=range(10)) -> dict[int, float]:
    """``{seed: test accuracy}`` of the runs of ``seed_accuracies`` (what a paired-by-seed test matches)."""
    from attnlib.tables import seed_accuracies as saved

    found, _ = saved(params.results_dir, params.preset, experiment, data=params.data)
    return {seed: acc for seed, acc in found.items() if seed in seeds}
