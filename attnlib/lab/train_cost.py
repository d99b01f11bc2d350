"""HA's training cost against its model (issue 29 §3, [Re]: HA "allows deeper models without memory
constraints"): the time of one training step and the peak memory of one training step, for each HA pair at a
preset, both models of a pair on the same batch, in one process on one machine.

One training step is what the trainer does per batch: forward in train mode, cross-entropy with the protocol's
label smoothing, backward, the gradient clipped to the protocol's norm where it clips, and one SGD step with
the protocol's lr, momentum, Nesterov and weight decay (bf16 autocast as the trainer: its dtype policy). The
batch is the protocol's batch size of N(0, 1) images with random labels (a step's time and memory do not
depend on the values), the weights fresh (torch.manual_seed(0)).

- time: seconds per step, ``attnlib.lab.measure.block_times`` (torch.utils.benchmark's blocked_autorange);
  the two models of a pair measured in turn over ``rounds`` rounds; the ratio HA / model is the median over
  rounds of the ratio of the two medians in that round; time per epoch = ⌈50 000 / batch⌉ × time per step
  (training steps only: no data loading, no evaluation);
- memory: MiB that one step allocates above the level at its start (``attnlib.lab.measure.peak_memory_mb``:
  activations, gradients, temporaries; the weights and the optimiser's momentum exist before it), after one
  warm-up step.

``python -m attnlib train-cost --preset budget`` writes ``RESULTS_DIR/train_cost/PRESET.json`` (atomically) with
the machine, instruction sets, threads, versions and commit; ``attnlib.analysis.costs`` reads it for the ledger.
"""

from __future__ import annotations

import math
import statistics
import time
from pathlib import Path

from attnlib import experiments
from attnlib.errors import ConfigError

ROUNDS = 3
MIN_RUN_TIME = 0.5  # seconds of timed blocks per model and round


def report_path(results_dir: str | Path, preset: str) -> Path:
    return Path(results_dir) / "train_cost" / f"{preset}.json"


def _step(name: str, preset: str, device):
    """(one training step of `name` at `preset` as a function of nothing, trainable parameters)."""
    import torch
    import torch.nn.functional as F

    from attnlib.train.device import use_bf16

    rc = experiments.resolve(name, preset)
    t = rc.train
    torch.manual_seed(0)
    model = experiments.build_model(name, preset).to(device).train()
    params = [p for p in model.parameters() if p.requires_grad]
    opt = torch.optim.SGD(
        params, lr=t.lr, momentum=t.momentum, nesterov=t.nesterov, weight_decay=t.weight_decay
    )
    g = torch.Generator().manual_seed(1)
    x = torch.randn(t.batch_size, 3, 32, 32, generator=g).to(device)
    y = torch.randint(0, 10, (t.batch_size,), generator=g).to(device)
    bf16 = use_bf16(t.bf16, device)

    def step():
        opt.zero_grad(set_to_none=True)
        with torch.autocast(device.type, dtype=torch.bfloat16, enabled=bf16):
            loss = F.cross_entropy(model(x), y, label_smoothing=t.label_smoothing)
        loss.backward()
        if t.grad_clip:
            torch.nn.utils.clip_grad_norm_(params, t.grad_clip)
        opt.step()

    return step, sum(p.numel() for p in params), bf16


def measure_pair(base: str, preset: str, device, rounds: int = ROUNDS, min_run_time: float = MIN_RUN_TIME):
    """{name: {step_s, epoch_s, peak_mib, params, bf16, batch}} of `base` and its HA variant, and the ratios."""
    from attnlib.lab.measure import block_times, peak_memory_mb

    names = (base, base + "_ha")
    steps = {n: _step(n, preset, device) for n in names}
    for fn, _, _ in steps.values():
        fn()  # warm-up: grads, momentum buffers, one-time allocations
    per_round = {n: [] for n in names}
    for r in range(rounds):
        for n in names if r % 2 == 0 else names[::-1]:  # alternate which model goes first
            per_round[n].append(statistics.median(block_times(steps[n][0], min_run_time)))
    batch = experiments.resolve(base, preset).train.batch_size
    out = {}
    for n in names:
        fn, params, bf16 = steps[n]
        step_s = statistics.median(per_round[n])
        out[n] = dict(
            step_s=step_s,
            round_step_s=per_round[n],
            epoch_s=math.ceil(experiments.CIFAR10_TRAIN / batch) * step_s,
            peak_mib=peak_memory_mb(fn, device),
            params=params,
            bf16=bf16,
            batch=batch,
        )
    time_ratio = statistics.median(h / m for m, h in zip(per_round[base], per_round[names[1]], strict=True))
    ratios = dict(time=time_ratio, memory=out[names[1]]["peak_mib"] / out[base]["peak_mib"])
    return out, ratios


def measure(preset: str = "budget", pairs=None, *, threads: int = 1, device: str = "cpu", rounds: int = ROUNDS,
            min_run_time: float = MIN_RUN_TIME, log=print) -> dict:  # fmt: skip
    """The JSON-ready report of every HA pair (`attnlib.analysis.rules.HA_PAIRS`, or `pairs`) at `preset`."""
    from attnlib.analysis.rules import HA_PAIRS
    from attnlib.lab.machine import check_threads, core_sharing, load_average, machine, running_others
    from attnlib.lab.measure import torch_threads
    from attnlib.lab.run import git_state
    from attnlib.train.device import resolve_device

    experiments.check_preset(preset)
    pairs = list(pairs or HA_PAIRS)
    for base in pairs:
        if base not in HA_PAIRS:
            raise ConfigError("pairs", base, ", ".join(HA_PAIRS))
    check_threads("threads", threads)
    dev = resolve_device(device)
    models, ratios, busy = {}, {}, []
    start = time.perf_counter()
    with torch_threads(threads):
        info = machine(dev)
        for base in pairs:
            log(f"train-cost: {base} and {base}_ha at {preset}, {threads} thread(s)")
            pair, ratios[base + "_ha"] = measure_pair(base, preset, dev, rounds, min_run_time)
            models.update(pair)
            busy.append(running_others())
    info["load_average_end"] = after = load_average()
    running = [b for b in busy if b is not None]
    return dict(
        preset=preset,
        protocol=dict(
            step="forward (train mode), cross-entropy, backward, clipping as the protocol, one SGD step; the "
            "protocol's batch of N(0, 1) images, fresh weights (seed 0), after one warm-up step",
            time=f"torch.utils.benchmark blocked_autorange, {min_run_time} s per model and round, {rounds} "
            "rounds alternating the order; ratio: median over rounds of HA / model",
            memory="MiB one step allocates above its start (attnlib.lab.measure.MEMORY_METHOD)",
            epoch=f"ceil({experiments.CIFAR10_TRAIN} / batch) steps, training only",
            threads=threads,
            device=str(dev),
        ),
        machine=info,
        load=core_sharing(
            threads, info["load_average_start"], after, usable=info["usable_cores"], running=running or None
        ),  # fmt: skip
        git=git_state(),
        seconds=time.perf_counter() - start,
        finished=time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        models=models,
        ratios=ratios,
    )


def add_parser(sub, style: dict, preset: dict) -> None:
    """`python -m attnlib train-cost`: the subcommand's options."""
    p = sub.add_parser(
        "train-cost",
        help="time and peak memory of one training step of each HA pair, side by side (HA / model)",
        **style,
    )
    p.add_argument("--preset", **{**preset, "default": "budget"})
    p.add_argument("--pairs", nargs="+", metavar="MODEL", help="the HA pairs' models (default: every pair)")
    p.add_argument("--threads", type=int, default=1, help="CPU threads (default 1)")
    p.add_argument("--device", default="cpu", help="cpu (default) or cuda")
    p.add_argument("--rounds", type=int, default=ROUNDS, help=f"timed rounds per pair (default {ROUNDS})")
    p.add_argument("--results-dir", default="results")


def command(args) -> int:
    """Measure, write the report atomically, print one line per pair."""
    from attnlib.checks import check_positive_int
    from attnlib.util import write_json

    check_positive_int("rounds", args.rounds)
    report = measure(args.preset, args.pairs, threads=args.threads, device=args.device, rounds=args.rounds)
    path = write_json(report_path(args.results_dir, args.preset), report)
    for name, r in report["ratios"].items():
        m = report["models"][name]
        print(f"{name}: step {m['step_s'] * 1e3:.1f} ms, peak {m['peak_mib']:.1f} MiB; HA / model: time "
              f"{r['time']:.2f}x, memory {r['memory']:.2f}x")  # fmt: skip
    print(f"written {path}")
    return 0
