"""A run's place and configuration: its folder (run_dir), what config.json records and hashes into the
fingerprint (run_config, data_key), and paths made portable for provenance (portable_path). Pure: the registry
and the models' config dataclasses only. Moved verbatim from attnlib.runs (issue 32).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from pathlib import Path

from attnlib import experiments
from attnlib.checks import MAX_SEED, SYNTHETIC, check, check_positive_int, is_synthetic, synthetic_sizes
from attnlib.models import FAMILIES, resolved_config, resolved_difference

RESOLVED = "model_resolved"  # config.json: the model's resolved configuration, not in the fingerprint

REPOSITORY = Path(__file__).resolve().parent.parent.parent
_ABSOLUTE = re.compile(r"(?<![\w.~])/[^\s:;,'\"]+")  # an absolute path inside a string


def portable_path(text):
    """`text` (a dataset description, a command line) with every absolute path in it made relative to the
    repository ("imagefolder-jpeg:../shared/data/cifar10"): provenance publishes no machine's layout. Not a
    string (None, an old result's odd value): returned as it is."""
    if not isinstance(text, str):
        return text
    return _ABSOLUTE.sub(lambda m: os.path.relpath(m.group(0), REPOSITORY), text)


def run_dir(results_dir: str | Path, experiment: str, preset: str, seed: int = 0) -> Path:
    return Path(results_dir) / experiment / (preset if seed == 0 else f"{preset}-seed{seed}")


def data_key(data) -> str:
    """What the fingerprint records of the data: "cifar10" (any copy; provenance says which) or the
    synthetic spec / source."""
    if data is None:
        return "cifar10"
    if isinstance(data, str | os.PathLike):
        spec = str(data)
        if not is_synthetic(spec):
            return "cifar10"
        n_train, n_test = synthetic_sizes(spec)  # validates the sizes
        return spec if spec != SYNTHETIC else f"{SYNTHETIC}:{n_train}:{n_test}"
    source = getattr(data, "source", "")
    if source.startswith("synthetic"):
        return f"{source}:{len(data.train)}:{len(data.test)}"
    return "cifar10"


def run_config(experiment: str, preset: str, *, seed: int = 0, data=None, epochs: int | None = None) -> dict:
    """The configuration recorded in config.json (and hashed into the fingerprint). Validates everything.

    `model` holds the registry's model fields (the overrides of the family's defaults) and enters the
    fingerprint; `model_resolved`, every field of the family's config dataclass as built from them
    (`attnlib.models.resolved_config`), is recorded next to it but kept out of the fingerprint, so that
    results saved before it existed keep theirs. `inspect_run` compares it: a run whose resolved model
    differs from today's (a default changed) is stale. Runs saved without it cannot be checked so."""
    check_positive_int("seed", seed, 0, f"an integer in [0, {MAX_SEED}]")
    check(seed <= MAX_SEED, "seed", seed, f"an integer in [0, {MAX_SEED}]")  # numpy seeds take 32 bits
    if epochs is not None:
        check_positive_int("epochs", epochs)
    rc = experiments.resolve(experiment, preset, epochs=epochs)
    cfg = {**rc.to_dict(), "seed": seed, "data": data_key(data if data is not None else rc.data)}
    cfg.pop("reason")
    cfg["fingerprint"] = hashlib.sha256(json.dumps(cfg, sort_keys=True, default=list).encode()).hexdigest()[
        :16
    ]
    cfg[RESOLVED] = resolved_config(rc.family, **rc.model)  # after the hash: not in the fingerprint
    return cfg


def config_difference(saved: dict, expected: dict | None) -> str:
    """' (train.epochs: 4 saved, 8 now; ...)': the settings of `saved` (a run's config.json) that differ from
    `expected` (`run_config`), and the fields of its resolved model that differ (a changed default)."""
    if expected is None:
        return ""

    def flat(d: dict, prefix: str = "") -> dict:
        out = {}
        for k, v in d.items():
            if isinstance(v, dict):
                out.update(flat(v, f"{prefix}{k}."))
            elif k != "fingerprint":
                out[f"{prefix}{k}"] = v  # JSON values on both sides: no tuples
        return out

    expected = json.loads(json.dumps(expected, default=list))
    a = flat({k: v for k, v in saved.items() if k != RESOLVED})
    b = flat({k: v for k, v in expected.items() if k != RESOLVED})
    diffs = [
        f"{k}: {a.get(k, '-')} saved, {b.get(k, '-')} now"
        for k in sorted(a.keys() | b.keys())
        if a.get(k) != b.get(k)
    ]
    family = expected["family"]
    if isinstance(saved.get(RESOLVED), dict) and RESOLVED in expected and saved.get("family") == family:
        # a changed default too; a field already listed as model.<name> is not repeated
        listed = {d.split(":")[0] for d in diffs}
        diffs += [
            f"{RESOLVED}.{d}"
            for d in resolved_difference(saved[RESOLVED], expected[RESOLVED], FAMILIES[family][0])
            if f"model.{d.split(':')[0]}" not in listed
        ]
    return f" ({'; '.join(diffs[:4])}{'; ...' if len(diffs) > 4 else ''})" if diffs else ""
