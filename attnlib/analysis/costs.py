"""What the models cost. An experiment's size at a preset (`count_parameters`, `model_cost`, Table 1's columns:
`table1_cost`), counted on the registry's model by `attnlib.models.cost`. HA's cost against its model (issue 29
§3): the training step's time and the memory training holds (``python -m attnlib train-cost``:
``results/train_cost/<preset>.json``, written by ``attnlib.lab.train_cost``) and the inference wall time each
saved run measured (Table 3's protocol: 300 timed single-image passes after training), as the ledger's rows
judge them. Reads only (the saved reports through `attnlib.results.timing`); a missing or malformed report is
"not measured".
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass
from pathlib import Path

from attnlib import experiments
from attnlib.analysis.rules import (
    HA_PAIRS,
    INCONCLUSIVE,
    NOT_MEASURED,
    NOT_REPRODUCED,
    REPRODUCED,
    Evidence,
    display,
)
from attnlib.results import timing
from attnlib.results.tables import table1_names


@dataclass(frozen=True)
class PairCost:
    """What one HA pair costs, as ratios HA / model (None: not measured): the memory training holds (weights,
    optimiser state, gradients and one step's peak) and the time of one training step (``train-cost``), inference wall time per image from Table 3's timing report (``timed``: the two
    models interleaved in one process) and from the saved runs' own timings (``runs``: ratio of the seed
    means). The ledger's rows and the book's cost item format these numbers; nothing reads them back."""

    memory: float | None = None
    step: float | None = None
    timed: float | None = None
    runs: float | None = None


def pair_costs(ev: Evidence) -> dict[str, PairCost]:
    """{model: its HA pair's `PairCost`} of every pair of HA_PAIRS with some cost measured, in that order."""
    ratios = (ev.train_cost or {}).get("ratios") or {}
    out = {}
    for base in HA_PAIRS:
        train, timed = ratios.get(base + "_ha") or {}, ev.timing.get(base + "_ha") or {}
        runs = wall_ratio(ev.wall_times.get(base, {}), ev.wall_times.get(base + "_ha", {}))
        cost = PairCost(train.get("memory"), train.get("time"), timed.get("ratio"), runs and runs[0])
        if cost != PairCost():
            out[base] = cost
    return out


def _measured_on(report: dict) -> str:
    """The train-cost report's machine in words (`attnlib.results.timing.machine_words`), commit and load."""
    shared = (report.get("load") or {}).get("shared")
    load = " (cores shared with other work: rough)" if shared else ""
    commit = str((report.get("git") or {}).get("commit"))[:7]
    machine = timing.machine_words(report["machine"], report["protocol"].get("threads"))
    return f"{machine}, commit {commit}{load}"


def _held(model: dict) -> float:
    """MiB a model's training holds between steps (weights, optimiser state, gradients): total less the step."""
    return model["total_mib"] - model["peak_mib"]


def ha_train_cost(ev: Evidence, saves: float):
    """Each HA pair's training step, HA / model, from one run of ``train-cost`` (same batch, same machine):
    the memory training holds judged (HA saves memory: ratio below `saves` for every pair), its parts, the time
    per step and per epoch shown."""
    report = ev.train_cost
    if report is None:
        return "not measured (python -m attnlib train-cost)", NOT_MEASURED
    parts, saved = [], []
    for base, c in pair_costs(ev).items():
        if c.memory is None:
            continue
        m, h = report["models"][base], report["models"][base + "_ha"]
        saved.append(c.memory < saves)
        parts.append(
            f"{display(base)}: memory {c.memory:.2f}× ({h['total_mib']:.0f} / {m['total_mib']:.0f} MiB, of which "
            f"weights, optimiser state and gradients {_held(h):.1f} / {_held(m):.1f}), time per step {c.step:.2f}× "
            f"({h['epoch_s'] / 60:.1f} / {m['epoch_s'] / 60:.1f} min per epoch)"
        )
    if not saved:
        return "not measured for the HA pairs", NOT_MEASURED
    batch = next(iter(report["models"].values()))["batch"]
    text = "; ".join(parts) + f"; one step of batch {batch} each, {_measured_on(report)}"
    return text, REPRODUCED if all(saved) else NOT_REPRODUCED


def wall_ratio(model: dict[int, tuple], ha: dict[int, tuple]) -> tuple[float, list[float], set[str]] | None:
    """(ratio of the seed means HA / model, per-seed ratios of the seeds both sides have, machines) of the
    wall times {seed: (ms, device)} the runs saved; None when a side has none."""
    if not model or not ha:
        return None
    mean = statistics.fmean(ms for ms, _ in ha.values()) / statistics.fmean(ms for ms, _ in model.values())
    paired = [ha[s][0] / model[s][0] for s in sorted(set(model) & set(ha))]
    return mean, paired, {d for _, d in [*model.values(), *ha.values()] if d}


def table3_timing(results_dir: str | Path, preset: str) -> dict[str, dict]:
    """{HA model: its entry of Table 3's timing report (``python -m attnlib time``: HA / model over interleaved
    rounds in one process, ``ratio`` and ``round_ratio_p25`` / ``_p75``) and ``cpu``} for the pairs whose two
    models were timed with today's configuration; {} without a report."""
    report = timing.load(results_dir, preset)
    current = timing.wall_times(report, preset)
    cpu = (report or {}).get("machine", {}).get("cpu")
    return {
        ha: {**r, "cpu": cpu}
        for ha, r in ((report or {}).get("ratios") or {}).items()
        if ha in current and r.get("baseline") in current
    }


def ha_inference_time(ev: Evidence, saves: float):
    """HA / model inference wall time per pair. Where Table 3's timing report has the pair (both models timed
    in one process, interleaved), its quartiles over rounds are judged; else the saved runs' own timing, the
    per-seed ratios (at least 2 seeds both sides have). Faster when, for every pair, the range lies below
    `saves`; slower when some pair's lies above 1 / `saves`; inconclusive otherwise."""
    parts, verdicts, machines = [], [], set()
    for base, c in pair_costs(ev).items():
        if c.timed is None and c.runs is None:
            continue
        text = f"{ev.seeds_name(base)}: "
        if c.timed is not None:
            timed = ev.timing[base + "_ha"]
            low, high = timed["round_ratio_p25"], timed["round_ratio_p75"]
            text += f"Table 3's timing {c.timed:.2f}× (quartiles over rounds {low:.2f}–{high:.2f}); "
            machines.add(f"{timed['cpu']} (Table 3)")
        if c.runs is not None:
            _, paired, devices = wall_ratio(ev.wall_times[base], ev.wall_times[base + "_ha"])
            machines |= {timing.device_words(d) for d in devices}
            n = f"n = {len(ev.wall_times[base])}/{len(ev.wall_times[base + '_ha'])}"
            span = f", per seed {min(paired):.2f}–{max(paired):.2f}" if len(paired) > 1 else ""
            text += f"the runs' {c.runs:.2f}× ({n}{span})"
            if c.timed is None:  # one pair of runs timed at different moments on shared cores says little
                low, high = (min(paired), max(paired)) if len(paired) > 1 else (0.0, math.inf)
        parts.append(text.removesuffix("; "))
        verdicts.append(REPRODUCED if high < saves else NOT_REPRODUCED if low > 1 / saves else INCONCLUSIVE)
    if not verdicts:
        return "no HA pair with saved wall times", NOT_MEASURED
    text = "; ".join(parts) + f"; timed on {', '.join(sorted(machines))} (the runs: each after its training)"
    if all(v == REPRODUCED for v in verdicts):
        return text, REPRODUCED
    return text, NOT_REPRODUCED if NOT_REPRODUCED in verdicts else INCONCLUSIVE


def count_parameters(name: str, preset: str = "paper") -> int:
    """Trainable parameters of experiment `name` at `preset` (built on the meta device: no memory, no init
    cost)."""
    import torch

    from attnlib.models.cost import trainable_parameters

    with torch.device("meta"):  # every model of the registry builds there
        return trainable_parameters(experiments.build_model(name, preset))


def model_cost(name: str, preset: str = "paper") -> dict[str, int]:
    """{"params": trainable parameters, "flops": `forward_flops` on one 32×32 image} of experiment `name` built
    at `preset` (fresh weights, seed 0; the global RNG is left as it was)."""
    import torch

    from attnlib.models.cost import forward_flops, trainable_parameters

    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        model = experiments.build_model(name, preset)
    return {"params": trainable_parameters(model), "flops": forward_flops(model)}


#: Table 1's cost columns as `table1_cost` gives them.
COST_COLUMNS = ("experiment", "model", "params", "flops", "printed_params", "printed_flops", "derived_params")


def table1_cost(names=None, preset: str = "paper"):
    """Table 1 of Cordonnier et al. at `preset` (default the paper's settings): per model of `names` (default
    `table1_names`) its trainable parameters and the FLOPs of one forward pass on one 32×32 image, counted
    live (`model_cost`: torch.utils.flop_counter, 2 per multiply-add), beside the paper's
    printed figures where the research notes hold one (`printed_params`, `printed_flops`: "not found" where
    none was read; never an estimate) and the parameters derived from the official code (`derived_params`,
    not printed anywhere; None where not derived). Reads no saved run."""
    import pandas as pd

    from attnlib.analysis import literature

    def printed(name: str, quantity: str):
        found = [r for r in literature.references(name, literature.PAPER, quantity) if r.kind == "printed"]
        return found[0].value if found else "not found"

    def derived(name: str):
        found = [r for r in literature.references(name, literature.PAPER, "params") if r.kind == "derived"]
        return int(found[0].value) if found else None

    rows = []
    for name in names or table1_names():
        cost = model_cost(name, preset)
        rows.append(
            {
                "experiment": name,
                "model": experiments.get(name).title,
                **cost,
                "printed_params": printed(name, "params"),
                "printed_flops": printed(name, "flops"),
                "derived_params": derived(name),
            }
        )
    return pd.DataFrame(rows, columns=list(COST_COLUMNS))
