"""One-off migration of saved runs of the former `converge` preset to the `long` preset (issue 29).

`converge` trained the budget's models for at most 60 epochs (cosine over 60) and stopped a run earlier once
its best test accuracy stopped rising, a rule that read the test set. A run that reached the 60-epoch cap was
never stopped by it: its training is exactly that of today's `long` preset (the same configuration without
the plateau settings, a fixed 60 epochs), so its result folder is moved to `long` with its config.json
rewritten to that configuration (a new fingerprint), metrics.json's fingerprint and checksums updated, and
`provenance.migrated_from` recording where it came from. A run that the rule stopped early (fewer epochs) is
refused: it must be retrained.

    python -m attnlib.migrate results            # every results/<experiment>/converge*/ folder

History, attention maps and centres are moved unchanged; a checkpoints/last.pt is kept, tagged with the new
fingerprint (previous.pt is dropped). Under git, stage the move with `git add` of the new folders and
`git rm --cached` of the old ones (git records the renames from the unchanged contents).
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

from attnlib import experiments
from attnlib.errors import ConfigError
from attnlib.lab.run import RunLock
from attnlib.results.config import RESOLVED, run_config, run_dir
from attnlib.results.load import inspect_run
from attnlib.results.store import sha256
from attnlib.store import write_json

OLD_PRESET, NEW_PRESET = "converge", "long"
DROPPED = ("plateau", "plateau_lr")  # the old preset's train settings that the new one does not have
WHY = (
    "the plateau rule never stopped it: {epochs} epochs trained, identical to the fixed protocol "
    "(the converge preset's plateau stop, which read the test set, was dropped on 2026-12-02)"
)


class MigrationRefused(ValueError):
    """A run that cannot be moved: not a complete `converge` result, stopped before the cap, of another
    configuration than today's `long` one, or a destination already taken."""


def _hashed(config: dict) -> dict:
    """The part of a config.json that the fingerprint hashes, without the preset (what must agree)."""
    out = {k: v for k, v in config.items() if k not in ("fingerprint", RESOLVED, "preset")}
    out["train"] = {k: v for k, v in config["train"].items() if k not in DROPPED}
    return json.loads(json.dumps(out, default=list))


def migrate_run(path: str | Path, results_dir: str | Path | None = None) -> Path:
    """Move the complete `converge` run at `path` (``<results>/<experiment>/converge[-seedN]``) to its `long`
    folder and return that folder. Refuses (MigrationRefused, nothing changed) a run that is not complete, a
    run whose epochs trained are not today's LONG_EPOCHS (the rule stopped it: retrain it), a run whose
    configuration, plateau settings aside, is not today's `long` configuration, and a taken destination."""
    path = Path(path)
    results_dir = Path(results_dir) if results_dir is not None else path.parent.parent
    status, detail = inspect_run(path)
    if status != "complete":
        raise MigrationRefused(f"{path}: not a complete result ({status}: {detail})")
    config = json.loads((path / "config.json").read_text())
    metrics = json.loads((path / "metrics.json").read_text())
    if config.get("preset") != OLD_PRESET:
        raise MigrationRefused(f"{path}: preset {config.get('preset')!r}, not {OLD_PRESET!r}")
    epochs = experiments.LONG_EPOCHS
    trained = metrics["provenance"].get("epochs_trained")
    rows = sum(1 for _ in (path / "history.csv").open()) - 1
    if trained != epochs or rows != epochs or config["train"]["epochs"] != epochs:
        raise MigrationRefused(
            f"{path}: trained {trained} epochs ({rows} history rows) of {config['train']['epochs']}, not the "
            f"{epochs} of the {NEW_PRESET} preset: the plateau rule stopped it; retrain it with python -m "
            f"attnlib train {config['experiment']} --preset {NEW_PRESET}"
        )
    seed = config.get("seed", 0)
    try:
        new = run_config(config["experiment"], NEW_PRESET, seed=seed, data=config["data"])
    except ConfigError as err:
        raise MigrationRefused(f"{path}: no {NEW_PRESET} configuration today ({err})") from None
    if _hashed(config) != _hashed(new):
        a, b = _hashed(config), _hashed(new)
        differ = sorted(k for k in a.keys() | b.keys() if a.get(k) != b.get(k))
        raise MigrationRefused(
            f"{path}: its configuration is not today's {NEW_PRESET} one (differs in {', '.join(differ)})"
        )
    if RESOLVED in config:  # what was trained (a model default changed since shows as stale, as it should)
        new[RESOLVED] = config[RESOLVED]
    dest = run_dir(results_dir, config["experiment"], NEW_PRESET, seed)
    if dest.exists():
        raise MigrationRefused(f"{path}: the destination {dest} exists")
    lock = RunLock(path)
    lock.acquire()
    try:
        dest.parent.mkdir(parents=True, exist_ok=True)
        os.rename(path, dest)
    finally:
        lock.release()
    (dest / "run.lock").unlink(missing_ok=True)
    _retag_checkpoint(dest / "checkpoints", new["fingerprint"])
    write_json(dest / "config.json", new)
    metrics["fingerprint"] = new["fingerprint"]
    metrics["files"] = {name: sha256(dest / name) for name in metrics["files"]}
    metrics["provenance"]["preset"] = NEW_PRESET
    metrics["provenance"]["migrated_from"] = {
        "preset": OLD_PRESET,
        "fingerprint": config["fingerprint"],
        "why": WHY.format(epochs=trained),
    }
    write_json(dest / "metrics.json", metrics)  # last: marks the folder complete
    status, detail = inspect_run(dest, new["fingerprint"])  # (stale later if the registry's network changes)
    if status != "complete":  # cannot happen after the checks above; say so loudly if it does
        raise RuntimeError(f"{dest}: migrated but {status} ({detail})")
    return dest


def _retag_checkpoint(folder: Path, fingerprint: str) -> None:
    """last.pt keeps its weights, tagged with the new fingerprint (a checkpoint of another fingerprint is not
    loaded); previous.pt, an older epoch, is dropped."""
    import io

    import torch

    from attnlib.util import atomic_write

    (folder / "previous.pt").unlink(missing_ok=True)
    last = folder / "last.pt"
    if not last.exists():
        return
    state = torch.load(last, map_location="cpu", weights_only=True)
    state["fingerprint"] = fingerprint
    buf = io.BytesIO()
    torch.save(state, buf)
    with atomic_write(last) as f:
        f.write(buf.getbuffer())


def migrate_all(results_dir: str | Path) -> tuple[list[Path], list[str]]:
    """Every ``<results_dir>/*/converge*`` folder: (the folders moved, the refusals as lines)."""
    moved, refused = [], []
    for path in sorted(Path(results_dir).glob(f"*/{OLD_PRESET}*")):
        if not path.is_dir():
            continue
        try:
            moved.append(migrate_run(path, results_dir))
        except MigrationRefused as err:
            refused.append(str(err))
    return moved, refused


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 1:
        print("usage: python -m attnlib.migrate RESULTS_DIR", file=sys.stderr)
        return 2
    moved, refused = migrate_all(argv[0])
    for dest in moved:
        print(f"moved to {dest}")
    for line in refused:
        print(f"refused: {line}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
