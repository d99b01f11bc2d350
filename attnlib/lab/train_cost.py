"""HA's training cost against its model (issue 29 §3, [Re]: HA "allows deeper models without memory
constraints"): the time of one training step and the memory training holds, for each HA pair at a preset, both
models of a pair on the same batch, in one process on one machine.

One training step is what the trainer does per batch (`training_step`: the trainer's `train_step` with the
protocol's optimizer, label smoothing, clipping and bf16 policy) on the protocol's batch size of N(0, 1)
images with random labels, the weights fresh (torch.manual_seed(0)). The two models of a
pair are measured side by side (`attnlib.lab.measure.compare`):

- time: seconds per step, timed blocks of torch.utils.benchmark's blocked_autorange in ``rounds`` rounds
  alternating the order; the ratio HA / model is the median over rounds of the ratio of the two medians in
  that round (``paired_ratio``); time per epoch = ⌈50 000 / batch⌉ × time per step (training steps only: no
  data loading, no evaluation);
- memory, in MiB: what training holds between steps (`resident_mib`: the weights, the optimiser's state, the
  gradients) plus the peak one step allocates above that level (``attnlib.lab.measure.peak_memory_mb``:
  activations and temporaries), after one warm-up step. Sharing one layer's weights shrinks the first three,
  nothing shrinks the last; [Re]'s claim is about the whole, so the ratio HA / model ``memory`` is of the sum
  (``total_mib``) and ``step_memory`` of the step's peak alone.

``python -m attnlib train-cost --preset budget`` writes ``RESULTS_DIR/train_cost/PRESET.json``
(``attnlib.results.timing.train_cost_path``, atomically) with the machine, instruction sets, threads, versions and
commit; ``attnlib.results.timing.train_cost_report`` reads it back for the ledger (``attnlib.analysis.costs``).
"""

from __future__ import annotations

import math
from collections.abc import Callable

from attnlib import experiments
from attnlib.checks import check_positive_int
from attnlib.errors import ConfigError

ROUNDS = 3
MIN_RUN_TIME = 0.5  # seconds of timed blocks per model and round


def training_step(model, cfg, device) -> tuple[Callable[[], None], bool, object]:
    """(one training step of ``model`` on ``device`` as `fit` takes it, bf16, its optimizer): `train_step` with the protocol's
    optimizer (`make_optimizer`), label smoothing, clipping and bf16 policy, on a batch of ``cfg.batch_size``
    N(0, 1) images with random labels (a step's time and memory do not depend on the values)."""
    import torch

    from attnlib.train.device import use_bf16
    from attnlib.train.loop import train_step
    from attnlib.train.schedule import make_optimizer

    bf16 = use_bf16(cfg.bf16, device)
    model = model.to(device).train()
    optimizer = make_optimizer(model, cfg)
    x = torch.randn(cfg.batch_size, 3, 32, 32, device=device)
    y = torch.randint(0, 10, (cfg.batch_size,), device=device)
    return (lambda: train_step(model, optimizer, x, y, cfg.label_smoothing, bf16, cfg.grad_clip)), bf16, optimizer


def resident_mib(model, optimizer) -> dict[str, float]:
    """MiB that training holds between steps: the weights (parameters and buffers), the optimiser's state
    (every tensor in ``optimizer.state``, e.g. SGD's momentum buffers) and the gradients, which `train_step`
    frees only after the next forward pass (so they sit below the level a step's peak is measured above)."""
    import torch

    def mib(tensors) -> float:
        return sum(t.numel() * t.element_size() for t in tensors) / 2**20

    state = [v for s in optimizer.state.values() for v in s.values() if isinstance(v, torch.Tensor)]
    grads = [p.grad for p in model.parameters() if p.grad is not None]
    return dict(weights_mib=mib([*model.parameters(), *model.buffers()]), optimizer_mib=mib(state),
                gradients_mib=mib(grads))  # fmt: skip


def measure_pair(base: str, preset: str, device, rounds: int = ROUNDS, min_run_time: float = MIN_RUN_TIME):
    """{name: {step_s, round_step_s, epoch_s, peak_mib, weights_mib, optimizer_mib, gradients_mib, total_mib,
    params, bf16, batch}} of `base` and its HA variant, and the ratios HA / model (time paired by round; memory: total_mib;
    step_memory: peak_mib)."""
    import torch

    from attnlib.lab.measure import compare, paired_ratio

    names = (base, base + "_ha")
    steps, held, out = {}, {}, {}
    for n in names:
        torch.manual_seed(0)
        model = experiments.build_model(n, preset)
        cfg = experiments.resolve(n, preset).train
        steps[n], bf16, optimizer = training_step(model, cfg, device)
        held[n] = (model, optimizer)
        params = sum(p.numel() for p in model.parameters() if p.requires_grad)
        out[n] = dict(params=params, bf16=bf16, batch=cfg.batch_size)
    for n, m in compare(steps, device, rounds, min_run_time).items():  # warms up first: the state exists after
        out[n].update(m, **resident_mib(*held[n]), epoch_s=math.ceil(experiments.CIFAR10_TRAIN / out[n]["batch"]) * m["step_s"])
        out[n]["total_mib"] = sum(out[n][k] for k in ("weights_mib", "optimizer_mib", "gradients_mib", "peak_mib"))
    ha, model = out[names[1]], out[base]
    time_ratio = paired_ratio(ha["round_step_s"], model["round_step_s"])["ratio"]
    return out, dict(time=time_ratio, memory=ha["total_mib"] / model["total_mib"],
                     step_memory=ha["peak_mib"] / model["peak_mib"])  # fmt: skip


def measure(preset: str = "budget", pairs=None, *, threads: int = 1, device: str = "cpu", rounds: int = ROUNDS,
            min_run_time: float = MIN_RUN_TIME, log=print) -> dict:  # fmt: skip
    """The JSON-ready report of every HA pair (`attnlib.analysis.rules.HA_PAIRS`, or `pairs`) at `preset`."""
    from attnlib.analysis.rules import HA_PAIRS
    from attnlib.lab.machine import running_others
    from attnlib.lab.measure import session
    from attnlib.lab.run import git_state
    from attnlib.results.timing import threads_words

    experiments.check_preset(preset)
    check_positive_int("rounds", rounds)
    pairs = list(pairs or HA_PAIRS)
    for base in pairs:
        if base not in HA_PAIRS:
            raise ConfigError("pairs", base, ", ".join(HA_PAIRS))
    models, ratios = {}, {}
    with session(device, threads, refuse=None) as (dev, report, busy):
        for base in pairs:
            log(f"train-cost: {base} and {base}_ha at {preset}, {threads_words(threads)}")
            pair, ratios[base + "_ha"] = measure_pair(base, preset, dev, rounds, min_run_time)
            models.update(pair)
            busy.append(running_others())
    return dict(
        report,
        preset=preset,
        protocol=dict(
            step="the trainer's train_step (forward in train mode, cross-entropy, backward, clipping as the "
            "protocol, one SGD step of make_optimizer); the protocol's batch of N(0, 1) images, fresh weights "
            "(seed 0), after one warm-up step",
            time=f"torch.utils.benchmark blocked_autorange, {min_run_time} s per model and round, {rounds} "
            "rounds alternating the order; ratio: median over rounds of HA / model",
            memory="weights (parameters and buffers) + the optimiser's state + the gradients kept between steps + the MiB one "
            "step allocates above its start (attnlib.lab.measure.MEMORY_METHOD); ratio memory: of that sum, "
            "step_memory: of the step alone",
            epoch=f"ceil({experiments.CIFAR10_TRAIN} / batch) steps, training only",
            threads=threads,
            device=str(dev),
        ),
        git=git_state(),
        models=models,
        ratios=ratios,
    )
