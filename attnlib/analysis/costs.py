"""HA's cost against its model (issue 29 §3): the training step's time and peak memory (``python -m attnlib
train-cost``: ``results/train_cost/<preset>.json``, written by ``attnlib.lab.train_cost``) and the inference
wall time each saved run measured (Table 3's protocol: 300 timed single-image passes after training), as the
ledger's rows judge them. Reads only; a missing or malformed report is "not measured".
"""

from __future__ import annotations

import statistics
from pathlib import Path

from attnlib.analysis.rules import (
    HA_PAIRS,
    INCONCLUSIVE,
    NOT_MEASURED,
    NOT_REPRODUCED,
    REPRODUCED,
    Evidence,
)

SAVES = 0.98  # HA / model below this: HA saves (memory, time); measurement noise aside


def train_cost_report(results_dir: str | Path, preset: str) -> dict | None:
    """The saved train-cost report of `preset` (checked: models, ratios and machine of the expected types), or
    None when there is none or it is unreadable."""
    from attnlib.results.store import read_json

    path = Path(results_dir) / "train_cost" / f"{preset}.json"
    if not path.is_file():
        return None
    try:
        report = read_json(path)
    except (OSError, ValueError):
        return None
    fields = ("models", "ratios", "machine", "protocol")
    if not isinstance(report, dict) or not all(isinstance(report.get(k), dict) for k in fields):
        return None
    for name, r in report["ratios"].items():
        if not all(isinstance(r.get(k), int | float) for k in ("time", "memory")):
            return None
        if not all(isinstance(report["models"].get(n, {}).get("peak_mib"), int | float) for n in (name,)):
            return None
    return report


def machine_words(report: dict) -> str:
    m, p = report["machine"], report["protocol"]
    flags = ", ".join(m.get("cpu_flags") or []) or "none of avx2 / avx512 / amx"
    shared = (report.get("load") or {}).get("shared")
    load = " (cores shared with other work: rough)" if shared else ""
    return (
        f"{m.get('cpu')} ({flags}; torch {m.get('torch')}), {p.get('threads')} thread(s), commit "
        f"{str((report.get('git') or {}).get('commit'))[:7]}{load}"
    )


def ha_train_cost(ev: Evidence):
    """Each HA pair's training step, HA / model, from one run of ``train-cost`` (same batch, same machine):
    peak memory judged (HA saves memory: ratio below SAVES for every pair), time per step and per epoch shown."""
    report = ev.train_cost
    if report is None:
        return "not measured (python -m attnlib train-cost)", NOT_MEASURED
    parts, saves = [], []
    for base in HA_PAIRS:
        r = report["ratios"].get(base + "_ha")
        if r is None:
            continue
        m, h = report["models"][base], report["models"][base + "_ha"]
        saves.append(r["memory"] < SAVES)
        parts.append(
            f"{base}: memory {r['memory']:.2f}× ({h['peak_mib']:.0f} / {m['peak_mib']:.0f} MiB), time per step "
            f"{r['time']:.2f}× ({h['epoch_s'] / 60:.1f} / {m['epoch_s'] / 60:.1f} min per epoch)"
        )
    if not saves:
        return "not measured for the HA pairs", NOT_MEASURED
    batch = next(iter(report["models"].values()))["batch"]
    text = "; ".join(parts) + f"; one step of batch {batch} each, {machine_words(report)}"
    return text, REPRODUCED if all(saves) else NOT_REPRODUCED


def wall_ratio(model: dict[int, tuple], ha: dict[int, tuple]) -> tuple[float, list[float], set[str]] | None:
    """(ratio of the seed means HA / model, per-seed ratios of the seeds both sides have, machines) of the
    wall times {seed: (ms, device)} the runs saved; None when a side has none."""
    if not model or not ha:
        return None
    mean = statistics.fmean(ms for ms, _ in ha.values()) / statistics.fmean(ms for ms, _ in model.values())
    paired = [ha[s][0] / model[s][0] for s in sorted(set(model) & set(ha))]
    return mean, paired, {d for _, d in [*model.values(), *ha.values()] if d}


def ha_inference_time(ev: Evidence):
    """HA / model inference wall time per pair from the saved runs' own timing: faster when, for every pair, the
    per-seed ratios (at least 2 seeds both sides have) all lie below SAVES; slower when some pair's all lie
    above 1 / SAVES; inconclusive otherwise."""
    parts, verdicts, machines = [], [], set()
    for base in HA_PAIRS:
        found = wall_ratio(ev.wall_times.get(base, {}), ev.wall_times.get(base + "_ha", {}))
        if found is None:
            continue
        mean, paired, devices = found
        machines |= devices
        spread = paired or [mean]
        n = f"n = {len(ev.wall_times[base])}/{len(ev.wall_times[base + '_ha'])}"
        span = f", per seed {min(spread):.2f}–{max(spread):.2f}" if len(paired) > 1 else ""
        parts.append(f"{ev.seeds_name(base)}: {mean:.2f}× ({n}{span})")
        few = len(paired) < 2  # one pair of runs timed at different moments on shared cores says little
        faster, slower = not few and max(spread) < SAVES, not few and min(spread) > 1 / SAVES
        verdicts.append(REPRODUCED if faster else NOT_REPRODUCED if slower else INCONCLUSIVE)
    if not verdicts:
        return "no HA pair with saved wall times", NOT_MEASURED
    text = "; ".join(parts) + f"; each run's own timing after training on {', '.join(sorted(machines))}"
    if all(v == REPRODUCED for v in verdicts):
        return text, REPRODUCED
    return text, NOT_REPRODUCED if NOT_REPRODUCED in verdicts else INCONCLUSIVE
