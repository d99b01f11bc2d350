"""The write side of a run: `run_or_load` (load it, else train it), `train_run` (train or resume under the
run's lock, `attnlib.lab.lock`, then write the result folder with its provenance), `backfill_probe`, and
what both probe: a run's fixed test images (`first_test_images`), its model before the first step
(`initial_model`) and after the last (`trained_model`: its checkpoint checked by the trainer's
`checkpoint_problem`). Reading a saved run is `attnlib.results.load`, which never imports this module; what
a run saves of its model's attention is measured by `attnlib.measures`, its inference wall time by
`attnlib.lab.measure`.
"""

from __future__ import annotations

import functools
import inspect
import logging
import os
import platform
import socket
import subprocess
import sys
import time
from pathlib import Path

import torch

from attnlib import experiments
from attnlib.checks import check, is_synthetic, resolve_device
from attnlib.env import RECORD_HOST_ENV, TRAIN_MISSING_ENV
from attnlib.errors import ConfigError
from attnlib.lab.lock import RunLock, RunLocked
from attnlib.lab.measure import device_name, inference_wall_time
from attnlib.measures import attention_probe, attention_summary, probe_file
from attnlib.models import make
from attnlib.results.config import RESOLVED, portable_path, run_config, run_dir
from attnlib.results.load import (
    DamagedResult,
    MissingResult,
    RunResult,
    inspect_run,
    load_run,
    read,
)
from attnlib.results.store import check_no_links, sha256
from attnlib.results.tables import precision_of
from attnlib.results.validate import PROBE_FILE, RESULT_FILES
from attnlib.train.checkpoint import checkpoint_problem
from attnlib.train.device import use_bf16
from attnlib.util import check_writable, write_bytes, write_json, write_npz

log = logging.getLogger("attnlib")


class ResultExists(RuntimeError):
    """The run folder holds a complete result of another configuration (e.g. trained with other epochs);
    it is kept unless the caller passes ``replace=True`` (``python -m attnlib train ... --force``).
    `detail` names the folder and the settings that differ."""

    def __init__(self, detail: str):
        super().__init__(f"{detail}; it is kept (pass replace=True to replace it, or another results_dir)")
        self.detail = detail


def command_line(argv: list[str] | None = None) -> str:
    """The command that trained a run, as provenance records it: ``python -m attnlib ...`` with its paths
    relative to the repository (`portable_path`)."""
    argv = list(sys.argv if argv is None else argv)
    if argv and Path(argv[0]).name == "__main__.py" and Path(argv[0]).parent.name == "attnlib":
        argv[0] = "python -m attnlib"
    return portable_path(" ".join(argv))


def _env_flag(name: str, default: bool) -> bool:
    """A 0/1 environment variable ($ATTNLIB_RECORD_HOST, $ATTNLIB_TRAIN_MISSING, read as the chapters read it:
    attnbook.params): unset or empty -> `default`; 1 / true / yes / on; 0 / false / no / off; anything else is
    refused (ConfigError), never taken for either."""
    value = os.environ.get(name, "").strip().lower()
    yes, no = ("1", "true", "yes", "on"), ("0", "false", "no", "off")
    check(value in ("", *yes, *no), name, value, "0 or 1 (false / true, no / yes, off / on)")
    return default if not value else value in yes


def git_state() -> dict:
    """{"commit": sha or None, "dirty": bool or None} of the repository holding attnlib (one `git status`:
    the commit from its branch header, a change from any other line)."""
    command = ["git", "status", "--porcelain=v2", "--branch", "--untracked-files=no"]
    try:  # not a git checkout, no git, a failing git (CalledProcessError): unknown
        status = subprocess.run(
            command, cwd=Path(__file__).parent, capture_output=True, text=True, timeout=10, check=True
        )
    except (OSError, subprocess.SubprocessError):
        return {"commit": None, "dirty": None}
    lines = status.stdout.splitlines()
    oid = next((line.split()[2] for line in lines if line.startswith("# branch.oid ")), "(initial)")
    return {
        "commit": None if oid == "(initial)" else oid,
        "dirty": any(not line.startswith("#") for line in lines),
    }


def backfill_probe(
    experiment: str,
    preset: str,
    *,
    seed: int = 0,
    results_dir: str | Path = "results",
    data=None,
    device="cpu",
) -> Path:
    """Add the standard probe (probe.npz) to a complete saved run that lacks it (or recompute it): the end
    probe from its final weights (checkpoints/last.pt, which must be the end of training), the
    initialisation probe from the model rebuilt from its seed (`initial_model`), on the first test images of
    its data (`data`: a CIFAR-10 folder for a run on "cifar10", None: $ATTNLIB_DATA; a synthetic run's data
    is rebuilt from its spec). Rewrites metrics.json's file list (checksums) under the run's lock; the
    fingerprint and every other file are unchanged. Returns the path of probe.npz. MissingResult /
    DamagedResult when the run is not complete or its checkpoint is absent or not the end of training."""
    run_config(experiment, preset, seed=seed)  # ConfigError for a bad experiment, preset or seed
    path = run_dir(results_dir, experiment, preset, seed)
    if not (path / "metrics.json").exists():
        raise MissingResult(f"no complete result in {path} (no metrics.json)")
    with RunLock(path):
        run = load_run(path)
        end_model = trained_model(run, device)  # checks the checkpoint: this run's, at the end of training
        spec = run.config.get("data")
        dataset = _load_data(spec if is_synthetic(str(spec)) else data)
        images = first_test_images(dataset, run.config.get("attention_mean_images", 100))
        init = attention_probe(initial_model(run.config), images, device)
        probe = probe_file(len(images), init, attention_probe(end_model, images, device))
        write_npz(path / PROBE_FILE, probe, results_dir)  # no folder below the results followed as a link
        metrics = dict(run.metrics)
        metrics["files"] = {**metrics["files"], PROBE_FILE: sha256(path / PROBE_FILE)}
        write_json(path / "metrics.json", metrics, results_dir)
    return path / PROBE_FILE


def first_test_images(dataset, n: int, device="cpu") -> torch.Tensor:
    """The first `n` (at least 1) test images of `dataset`, normalised, on `device`: the fixed images of the
    saved attention maps, the standard probe and the per-epoch measures."""
    from attnlib.data import Batches

    images, _ = next(Batches(dataset.test, max(1, n), train=False, device=device).epoch(0))
    return images


def initial_model(config: dict) -> torch.nn.Module:
    """The model of a saved run as its training built it before the first step: the global RNG seeded with
    the run's seed, then the network of its config.json (every resolved field where recorded), as
    `train_run` does (`torch.manual_seed(seed)`, then `make`). The global RNG is left as it was."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(config.get("seed", 0))
        return make(config["family"], **config.get(RESOLVED, config["model"]))


def trained_model(run: RunResult, device="cpu") -> torch.nn.Module:
    """The trained model of a complete saved run: the network of its config.json (every resolved field where
    recorded: a default changed since cannot rebuild another network) with the weights of
    checkpoints/last.pt (kept after training; not in git), which must be this run's (its fingerprint), at the
    end of training and sound (`attnlib.train.checkpoint_problem`: this model's weights, every one finite).
    MissingResult when last.pt is absent or the network cannot be built today (status "stale"),
    DamagedResult when last.pt is not such a checkpoint; each names the command that retrains the run."""
    retrain = _train_command(run.experiment, run.preset, run.config.get("seed", 0))
    weights = run.path / "checkpoints" / "last.pt"
    if not weights.exists():
        raise MissingResult(
            f"{weights} is missing (checkpoints are not kept in git); retrain with: {retrain}"
        )
    try:  # runs saved before config.json recorded `model_resolved`: the registry's overrides
        model = make(run.config["family"], **run.config.get(RESOLVED, run.config["model"]))
    except ConfigError as err:  # a field the model no longer has
        message = f"{run.path}: its network cannot be built today ({err}); retrain with: {retrain} --force"
        raise MissingResult(message, "stale", str(err)) from None
    epochs = len(run.history)  # one row per epoch trained
    try:  # a truncated or corrupt zip, a foreign file
        state = torch.load(weights, map_location=device, weights_only=True)
        # steps per epoch as `Batches` counts them (a last partial batch dropped)
        steps = run.metrics["provenance"]["train_images"] // run.config["train"]["batch_size"]
        wrong = checkpoint_problem(state, model, epochs=epochs, steps=steps)
    except Exception as err:  # noqa: BLE001 -- whatever the file breaks: damaged
        wrong = f"{type(err).__name__}: {' '.join(str(err).split())}"
    if not wrong and state.get("fingerprint") not in (None, run.config.get("fingerprint")):
        wrong = "it belongs to another configuration"
    elif not wrong and state["epoch"] != epochs:
        where = f"epoch {state['epoch']}, step {state['step']}; the run ended after epoch {epochs}"
        wrong = f"it is not the end of training ({where})"
    if wrong:
        detail = f"{weights} is damaged ({wrong})"
        raise DamagedResult(f"{detail}; retrain with: {retrain}", "damaged", detail)
    model.load_state_dict(state["model"])
    return model.to(device).eval()


def _train_command(experiment: str, preset: str, seed: int) -> str:
    """The command that trains a run (its seed named unless 0)."""
    return f"python -m attnlib train {experiment} --preset {preset}" + (f" --seed {seed}" if seed else "")


def _load_data(spec):
    """CIFAR10Data from a spec (None = $ATTNLIB_DATA), a folder, "synthetic[:N:M]", or a CIFAR10Data."""
    from attnlib import data as datamod

    if isinstance(spec, datamod.CIFAR10Data):
        return spec
    return datamod.load_dataset(spec)


def train_run(
    experiment: str,
    preset: str = "paper",
    *,
    data=None,
    results_dir: str | Path = "results",
    device=None,
    seed: int = 0,
    epochs: int | None = None,
    progress: bool | None = None,
    on_step=None,
    replace: bool = False,
    checkpoint_every: float | None = None,
) -> RunResult:
    """Train `experiment` at `preset` and write its result folder; resumes from its checkpoints.

    Works alone or under torchrun (every rank calls it; rank 0 locks the folder and writes results).
    data: None (the preset's default, else $ATTNLIB_DATA), a folder, "synthetic[:N_TRAIN:N_TEST]" or a
    CIFAR10Data. Raises ConfigError for bad arguments (data too small for one batch included) and an
    OSError naming the path when the results folder cannot be written, both before the data is loaded
    or anything is written; RunLocked when another process trains the same folder; ResultExists when
    the folder holds a complete result of another configuration, unless `replace`. checkpoint_every:
    seconds between mid-epoch checkpoints (attnlib.train.checkpoint_interval)."""
    import torch.distributed as dist

    from attnlib import train as trainer
    from attnlib.data import Batches

    rc = experiments.resolve(experiment, preset, epochs=epochs)
    spec = data if data is not None else rc.data
    config = run_config(experiment, preset, seed=seed, data=spec, epochs=epochs)
    resolve_device(device)  # validate the device and the data before anything is written
    trainer.checkpoint_interval(checkpoint_every)
    path = run_dir(results_dir, experiment, preset, seed)
    check_writable(path)
    check_no_links(path, results_dir)  # a linked run.lock / checkpoints/ would write outside the results
    dataset = _load_data(spec)
    if len(dataset.train) < rc.train.batch_size:
        raise ConfigError(
            "data",
            spec if isinstance(spec, str | os.PathLike | None) else dataset.source,
            f"at least {rc.train.batch_size} training images (one batch of {experiment} at preset {preset}); "
            f"{dataset.source} has {len(dataset.train)}",
        )
    with trainer.distributed_session(device) as (info, dev):
        lock = RunLock(path)
        if _claim(path, lock, config, replace, info):  # completed by another process since it was read
            log.warning("%s was completed by another process meanwhile; kept, not trained again", path)
            return load_run(path, config["fingerprint"])
        try:
            torch.manual_seed(seed)
            model = make(rc.family, **rc.model)
            bs = rc.train.batch_size
            kw = dict(seed=seed, device=dev, rank=info.rank, world_size=info.world_size)
            probe = None
            if rc.probe_images:  # per-layer attention measures of fixed test images, every epoch
                from attnlib import measures

                probe = functools.partial(
                    measures.probe, images=first_test_images(dataset, rc.probe_images, dev)
                )
            # the standard probe at initialisation, before the first step (it consumes no RNG: resumed or
            # not, the model here is the seed's initial one; `fit` loads a checkpoint's weights later)
            init_probe = None
            if info.is_main:
                init_probe = attention_probe(
                    model, first_test_images(dataset, rc.attention_mean_images, dev), dev
                )
            code = git_state()  # the code this process trains with (the tree may change before the end)
            fit = trainer.fit(
                model,
                Batches(dataset.train, bs, train=True, **kw),
                Batches(dataset.test, bs, train=False, **kw),
                rc.train,
                device=dev,
                seed=seed,
                checkpoint_dir=path / "checkpoints",
                fingerprint=config["fingerprint"],
                progress=progress,
                desc=f"{experiment}/{preset}",
                on_step=on_step,
                probe=probe,
                checkpoint_every=checkpoint_every,
            )
            if info.is_main:
                _write_result(path, config, rc, model, fit, dataset, dev, info, code, init_probe)
            if info.enabled:
                dist.barrier()
        finally:
            lock.release()
    result = load_run(path, config["fingerprint"])
    result.trained = True
    return result


def _claim(path: Path, lock: RunLock, config: dict, replace: bool, info) -> bool:
    """Rank 0 takes the run's lock and, under it, keeps a complete result of another configuration unless
    `replace`; every rank learns the verdict (RunLocked / ResultExists). True (the lock released) when the
    folder holds a complete result of this configuration: another process (`queue` and `train` on the same
    run at once) finished it after the caller read it, and it is not trained again. Else drops the temporary
    files of a killed writer (never complete: safe to drop) and returns False."""
    import torch.distributed as dist

    refusal = None
    if info.is_main:
        try:
            lock.acquire()
        except RunLocked as err:
            refusal = ("locked", str(err))
        else:
            status, detail = inspect_run(path, expected=config)
            if status == "complete" or (status == "stale" and not replace):
                lock.release()
                refusal = ("complete", "") if status == "complete" else ("exists", detail)
    if info.enabled:
        box = [refusal]
        dist.broadcast_object_list(box, src=0)
        refusal = box[0]
    if refusal and refusal[0] == "complete":
        return True
    if refusal:
        raise (RunLocked if refusal[0] == "locked" else ResultExists)(refusal[1])
    if info.is_main:
        for stray in [*path.glob(".*.tmp*"), *path.glob("checkpoints/.*.tmp*")]:
            stray.unlink(missing_ok=True)
    return False


def _write_result(
    path: Path, config: dict, rc, model, fit, dataset, device, info, code: dict, init_probe=None
) -> None:
    import pandas as pd

    images = first_test_images(dataset, rc.attention_mean_images)
    attention = attention_summary(model, images, rc.attention_images, device)
    end_probe = attention_probe(model, images, device)
    timing = inference_wall_time(model, device, rc.timing_reps, rc.timing_warmup)
    hist = pd.DataFrame(fit.history)
    last = fit.history[-1]
    root = path.parents[1]  # the results folder (run_dir): no folder below it is followed as a link
    write_json(path / "config.json", config, root)
    write_bytes(path / "history.csv", hist.to_csv(index=False).encode(), root)
    write_npz(path / "attention.npz", attention, root)
    write_npz(path / PROBE_FILE, probe_file(len(images), init_probe, end_probe), root)
    files = [*RESULT_FILES, PROBE_FILE]
    if fit.quadratic is not None:
        write_npz(path / "centers.npz", {k: v.numpy() for k, v in fit.quadratic.items()}, root)
        files.append("centers.npz")
    metrics = {
        "test_accuracy": last["test_acc"],
        "test_loss": last["test_loss"],
        "train_accuracy": last["train_acc"],
        "params": sum(p.numel() for p in model.parameters() if p.requires_grad),
        **timing,
        "fingerprint": config["fingerprint"],
        "files": {name: sha256(path / name) for name in files},
        "provenance": {
            "experiment": config["experiment"],
            "preset": config["preset"],
            "seed": config["seed"],
            "epochs": rc.train.epochs,
            "epochs_trained": len(fit.history),
            "best_test_accuracy": max(row["test_acc"] for row in fit.history),
            "dataset": portable_path(dataset.source),  # its folder relative to the repository
            "data": config["data"],
            "train_images": len(dataset.train),
            "test_images": len(dataset.test),
            "device": device_name(device),
            "threads": torch.get_num_threads() if torch.device(device).type == "cpu" else None,
            "world_size": info.world_size,
            "bf16": use_bf16(rc.train.bf16, torch.device(device)),  # the trainer's policy, this machine
            "precision": precision_of(fit.history),  # every epoch's, in words: resumes may change machines
            "torch": torch.__version__,
            "python": platform.python_version(),
            "git": code,
            **({"hostname": socket.gethostname()} if _env_flag(RECORD_HOST_ENV, False) else {}),  # when asked
            "train_seconds": fit.train_seconds,
            "train_cpu_seconds": fit.train_cpu_seconds,  # this process's CPU time (rank 0's under torchrun)
            "resumed_from": fit.resumed,
            "finished": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
            "command": command_line(),
        },
    }
    if (now := git_state()) != code:  # the tree changed while it trained (a merge, an edit)
        metrics["provenance"]["git_at_write"] = now
    write_json(path / "metrics.json", metrics, root)  # last: marks the folder complete
    (path / "checkpoints" / "previous.pt").unlink(missing_ok=True)  # keep last.pt: the trained weights


def run_or_load(
    experiment: str, preset: str = "paper", *, train_missing: bool | None = None, **kwargs
) -> RunResult:
    """The saved result of `experiment` at `preset` when one exists for the same configuration, else train
    it (resuming from its checkpoints). A damaged result is reported and retrained. Training a missing run
    is what this is for: a reader that must never train reads with `attnlib.results.load.read`.

    kwargs: `train_run`'s keyword arguments (data, results_dir, device, seed, epochs, progress, replace, ...),
    bound to its signature (its defaults; a TypeError for any other name). train_missing: False -> raise
    MissingResult (DamagedResult for a damaged one) instead of training; None -> $ATTNLIB_TRAIN_MISSING (0
    during the book build), default True. replace: a complete result of another configuration in the same
    folder ("stale": e.g. trained with other epochs, or before the preset changed) is retrained over only
    with replace=True; otherwise training raises ResultExists and the result is kept."""

    call = inspect.signature(train_run).bind(experiment, preset, **kwargs)
    call.apply_defaults()
    run = {k: call.arguments[k] for k in ("seed", "data", "epochs")}
    run_config(experiment, preset, **run)  # validates, before the device
    resolve_device(call.arguments["device"])
    saved = read(experiment, preset, results_dir=call.arguments["results_dir"], **run)
    if saved.complete:
        return saved.run
    path, status, detail = saved.path, saved.status, saved.detail
    if train_missing is None:
        train_missing = _env_flag(TRAIN_MISSING_ENV, True)
    if status == "damaged":
        log.warning("%s is damaged (%s)%s", path, detail, "; retraining it" if train_missing else "")
    elif status == "stale" and train_missing:
        if not call.arguments["replace"]:
            raise ResultExists(detail)
        log.warning("%s; replacing it", detail)
    if not train_missing:
        hint = f"train it with: {_train_command(experiment, preset, call.arguments['seed'])}"
        cls = DamagedResult if status == "damaged" else MissingResult
        message = f"no complete result for {experiment} at preset {preset} in {path} ({detail}); {hint}"
        raise cls(message, status, detail)
    return train_run(*call.args, **call.kwargs)
