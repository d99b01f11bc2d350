"""What each command of `python -m attnlib` does, once `attnlib.lab.cli` has parsed its arguments: the library
validates them (ConfigError) and the CLI turns its exceptions into one line and an exit code."""

from __future__ import annotations

import sys
from pathlib import Path

from attnlib import experiments
from attnlib.checks import check, check_choice, check_positive_int
from attnlib.errors import ConfigError
from attnlib.lab.exits import EXIT_INTERRUPTED, EXIT_LOCKED, EXIT_MISSING, PROG
from attnlib.train.distributed import distributed_env


def _given(args, *names: str) -> dict:
    """The parsed options ``names`` as keyword arguments: the library functions' parameters bear their names."""
    return {name: getattr(args, name) for name in names}


def _minutes(seconds: float | None) -> str:
    return "unmeasured" if seconds is None else f"{seconds / 60:.1f} min"


def cmd_list(args) -> int:
    import pandas as pd

    from attnlib.analysis import plan
    from attnlib.analysis.costs import count_parameters
    from attnlib.results.tables import collect

    # the presets of the budget models, whose per-core throughputs were measured
    estimate = args.preset in plan.THROUGHPUT
    listed = experiments.names(variants=True)
    saved = collect(args.results_dir, args.preset, listed).set_index("experiment")
    done = saved["status"] == "complete"
    rows, per_run = [], []
    for name in listed:
        rc = experiments.resolve(name, args.preset)
        row = {
            "experiment": name,
            "params": f"{count_parameters(name, args.preset):,}",
            "epochs": rc.train.epochs,
            "batch": rc.train.batch_size,
            "lr": rc.train.lr,
            "model": " ".join(f"{k}={v}" for k, v in rc.model.items()),
        }
        if estimate:
            est = plan.estimate_seconds(name, args.preset)
            row["est. time (1 thread)"] = _minutes(est)
            if not experiments.get(name).variant_of:  # variants are trained where a claim needs them
                per_run.append(est)
        row["saved run"] = (
            _minutes(saved.at[name, "train_seconds"]) if done[name] else saved.at[name, "status"]
        )
        rows.append(row)
    print(pd.DataFrame(rows).to_string(index=False))
    print(f"\n{args.preset}: {experiments.NOTES[args.preset]}")
    for protocol, p in experiments.PRESET_TABLE[args.preset].items():
        print(f"- {protocol}: {p.reason}")
    if estimate:  # every budget model has a measured throughput (tests/test_experiments.py)
        print(
            f"\nestimated total for the grid ({len(per_run)} runs, variants not counted): "
            f"{plan.grid_seconds(per_run) / 3600:.2f} h on 2 idle cores as two single-thread runs side by side "
            "(train ... --threads 1), from the per-core throughputs of attnlib/protocol_history.yaml (its machine and engine "
            "named there); full CIFAR-10, each run's time as listed"
        )
    if done.any():
        print(
            f"saved runs in {args.results_dir}: {int(done.sum())} of {len(done)} complete, "
            f"{saved.loc[done, 'train_seconds'].sum() / 3600:.2f} h of training in all (each run's wall time "
            f"from its provenance, evaluation included; {saved.loc[done, 'cpu_seconds'].sum() / 3600:.2f} "
            "CPU-hours: the process's CPU time where recorded, else wall time x threads)"
        )
    return 0


def cmd_train(args) -> int:
    from attnlib.lab.queue import die_with_parent
    from attnlib.lab.run import run_or_load

    die_with_parent()  # started by `queue`: a SIGTERM (checkpoint, exit) when the queue dies, however

    if args.threads is not None:
        import torch

        from attnlib.lab.machine import check_threads

        check_threads("threads", args.threads)
        torch.set_num_threads(args.threads)
    result = run_or_load(  # a complete result with the same configuration is kept, not retrained
        args.experiment,
        args.preset,
        **_given(args, "data", "results_dir", "device", "seed", "epochs"),
        train_missing=True,
        progress=False if args.no_progress else None,
        replace=args.force,
    )
    if distributed_env()[0] == 0:
        m = result.metrics
        done = "" if result.trained else " (already complete; delete its folder to retrain)"
        print(
            f"{args.experiment}/{args.preset}{done}: test accuracy {m['test_accuracy']:.4f}, {m['params']:,} params, "
            f"{m['wall_time_ms']:.2f} ms/image on {m['wall_time_device']}; results in {result.path}"
        )
    return 0


def cmd_probe(args) -> int:
    import numpy as np

    from attnlib.checks import resolve_device
    from attnlib.lab.run import backfill_probe

    path = backfill_probe(
        args.experiment,
        args.preset,
        **_given(args, "seed", "results_dir", "data"),
        device=resolve_device(args.device),
    )
    with np.load(path) as z:
        probe = dict(z)
    print(f"{args.experiment}/{args.preset}: written {path} ({int(probe['images'])} test images)")
    for layer in range(int(probe["token_layers"])):
        print(
            f"- layer {layer}: distance {probe['init_distance'][layer].mean():.2f} px at init -> "
            f"{probe['end_distance'][layer].mean():.2f} (uniform {float(probe['uniform_distance']):.2f}), "
            f"peak {probe['init_peak'][layer].mean():.2f}x -> {probe['end_peak'][layer].mean():.2f}x uniform"
        )
    return 0


def cmd_queue(args) -> int:
    from attnlib.lab import queue
    from attnlib.lab.machine import usable_cores

    if args.asked:
        from attnlib.analysis import plan

        if args.experiments or args.seeds != [0]:
            given, value = (
                ("--experiments", args.experiments) if args.experiments else ("--seeds", args.seeds)
            )
            raise ConfigError(given, value, "none with --asked (it chooses the experiments and seeds itself)")
        jobs = [
            queue.Job(name, seed) for name, seed in plan.seeds_asked(args.results_dir, args.preset, args.data)
        ]
    else:
        names = args.experiments or queue.default_experiments(args.preset)
        jobs = [queue.Job(name, seed) for seed in dict.fromkeys(args.seeds) for name in dict.fromkeys(names)]
    todo, done = queue.pending(jobs, args.preset, args.results_dir, data=args.data)
    print(f"{args.preset}: {len(jobs)} runs, {len(done)} complete, {len(todo)} to train or resume")
    if args.dry_run:  # what would run, in order; nothing starts
        for job in todo:
            print(f"- {job.name}")
    if args.dry_run or not todo:
        return 0
    # default: one lane per core of this process's CPU set, at most one per job; Queue checks a given one
    lanes = min(usable_cores(), len(todo)) if args.lanes is None else args.lanes
    log_dir = Path(args.log_dir or Path(args.results_dir) / "logs" / args.preset)
    if not args.log_dir:  # a linked results/logs (a link in a clone) would take the logs elsewhere: refused
        from attnlib.results.store import check_no_links

        check_no_links(log_dir, args.results_dir)

    def command(job):
        return queue.train_command(
            job, args.preset, results_dir=args.results_dir, data=args.data, force=args.force
        )

    runner = queue.Queue(todo, lanes, command, log_dir)
    outcomes = runner.run()
    for o in outcomes:
        print(f"- {o.job.name}: {o.status}" + (f" ({o.seconds / 60:.0f} min)" if o.seconds else ""))
    if runner.interrupted:
        print(
            f"{PROG}: interrupted; the runs saved checkpoints: rerun the same command to go on",
            file=sys.stderr,
        )
        return EXIT_INTERRUPTED
    failed = [o for o in outcomes if o.status.startswith("failed")]
    if failed:
        runs = "1 run" if len(failed) == 1 else f"{len(failed)} runs"
        print(f"{PROG}: {runs} failed; their logs are in {log_dir}", file=sys.stderr)
        return EXIT_MISSING
    skipped = [o for o in outcomes if o.status.startswith("skipped")]
    if skipped:  # nothing failed, but their results are not there yet: another process is training them
        runs = "1 run was" if len(skipped) == 1 else f"{len(skipped)} runs were"
        print(f"{PROG}: {runs} skipped: another process trains them", file=sys.stderr)
        return EXIT_LOCKED
    return 0


def cmd_table(args) -> int:
    from attnlib.results import tables

    experiments.check_preset(args.preset)
    if not Path(args.results_dir).is_dir():
        raise ConfigError(
            "--results-dir",
            args.results_dir,
            f"a folder of saved results ({args.results_dir} does not exist or is not a folder)",
        )
    if args.command == "table1":
        df = tables.table1(args.results_dir, args.preset, args.seed)
        print(_shown(df))
    else:
        df = tables.table3(args.results_dir, args.preset)
        print(_shown(df, not_measured="wall_time_ms"))  # time_ratio: HA / its model, "—" on the model's row
        _print_welch(args, df)
    problems = df[df["status"].isin(["damaged", "stale"])]
    if len(problems):  # shown without numbers; say why
        print(f"\nnot used (retrain with: python -m attnlib train EXPERIMENT --preset {args.preset}):")
        for _, row in problems.iterrows():
            print(f"- {row['experiment']}: {row['status']}: {row['detail']}")
    return 0


# How the CLI's tables print their numbers: accuracy to the saved runs' four decimals, times to the
# microsecond (wall time per image) or second (training).
_FORMATS = {
    "accuracy": ".4f",
    "accuracy_sd": ".4f",
    "wall_time_ms": ".3f",
    "wall_time_std_ms": ".3f",
    "time_ratio": ".3f",
    "train_seconds": ".0f",
    "cpu_seconds": ".0f",
}


def _shown(df, not_measured: str | None = None) -> str:
    """A results table as the CLI prints it: without its ``detail`` column, numbers in ``_FORMATS``, devices
    as a reader reads them, "—" where nothing is saved ("not measured" in the column ``not_measured``)."""
    from attnlib.results.timing import device_words

    def cell(column: str, v):
        if v is None or v != v:  # None or NaN
            return "not measured" if column == not_measured else "—"
        if column.endswith("device"):
            return device_words(v)
        return format(v, _FORMATS[column]) if column in _FORMATS else v

    shown = df.drop(columns="detail").astype(object)
    for column in shown.columns:
        shown[column] = [cell(column, v) for v in shown[column]]
    return shown.to_string(index=False)


def _print_welch(args, df) -> None:
    """Below Table 3: HA against its model over the saved seeds (Welch), and where the wall times come from."""
    from attnlib.analysis import stats
    from attnlib.results import tables, timing

    def saved(name: str) -> dict:
        return tables.seed_accuracies(args.results_dir, args.preset, name)[0]

    pairs = {
        e.title: (saved(e.baseline), saved(e.name)) for e in experiments.EXPERIMENTS.values() if e.baseline
    }
    print(
        "\nHA - model over the saved seeds (accuracy points; Welch's t-test, 95% interval; p adjusted by Holm's "
        "method over the pairs trained on both sides, which the verdict follows):"
    )
    for title, tested in stats.family(pairs).items():
        w, adjusted, verdict, _ = tested
        if w is None:
            print(f"- {title}: not trained on both sides")
            continue
        ci = "" if w.interval is None else f" [{w.interval[0]:+.1f}, {w.interval[1]:+.1f}]"
        p = (
            ""
            if w.p is None
            else f", df {w.df:.1f}, p = {stats.p_text(w.p)}, Holm p = {stats.p_text(adjusted)}"
        )
        wanted = (
            ""
            if tested.seeds_wanted == 0
            else f"; the standard asks for {tested.seeds_wanted} seeds per side"
        )
        print(
            f"- {title}: {w.n[0]} model / {w.n[1]} HA seeds, {w.points:+.1f} points{ci}{p}: {verdict}{wanted}"
        )
    report = timing.load(args.results_dir, args.preset)
    print(
        "\n"
        + (
            timing.machine_line(report)
            if report
            else f"wall time: not measured; run python -m attnlib time --preset {args.preset}"
        )
    )


def cmd_time(args) -> int:
    from attnlib.lab import timing
    from attnlib.results.timing import machine_line, table

    report, path = timing.run(
        args.preset,
        args.experiments,
        **_given(args, "results_dir", "out", "threads", "device", "quick", "force"),
    )
    print(table(report).to_string(index=False))
    print(f"\n{machine_line(report)}\n{report['seconds']:.1f} s of timing; written {path}")
    return 0


def cmd_bench(args) -> int:
    """``python -m attnlib bench``: the model benchmark (or ``--peak-only`` the matmul peak alone, no model)
    written to ``--out``, its table printed. ConfigError / MachineBusy propagate."""
    from attnlib.lab import bench
    from attnlib.util import write_json

    shapes = () if args.peak_only else args.shapes or (["paper"] if args.quick else bench.SHAPES)
    report = bench.run(
        shapes=tuple(shapes),  # --quick: paper alone (both are tiny)
        inference=not args.no_inference,
        threads=args.threads or (1 if args.quick or args.peak_only else None),
        profile=args.profile,
        **_given(args, "models", "dtypes", "impls", "device", "batch", "layers", "repeats", "quick", "force"),
    )
    folder = Path("results") / "bench" / ("peak" if args.peak_only else "")
    _print_bench(report, write_json(args.out or folder / f"{report['machine']['device']}.json", report))
    return 0


def cmd_throughput(args) -> int:
    """``python -m attnlib throughput``: per-core images/s of each model by CPU time (``engine_bench.throughput``),
    written to ``--out`` with the machine; the lines of protocol_history.yaml's throughput table printed."""
    import torch

    from attnlib.lab import engine_bench
    from attnlib.lab.machine import machine
    from attnlib.util import write_json

    names = args.models or experiments.names()
    for name in names:  # every argument checked before anything is measured
        check_choice("models", name, experiments.names(variants=True))
    check_positive_int("steps", args.steps)
    check_positive_int("rounds", args.rounds)
    facts = machine(torch.device("cpu"))
    rows = []
    for name in names:
        rows.append(engine_bench.throughput(name, args.steps, args.rounds))
        print(
            f"    {name}: [{rows[-1]['train_images_per_s']:.0f}, {rows[-1]['eval_images_per_s']:.0f}]",
            flush=True,
        )
    report = {
        "machine": facts,
        "commit": engine_bench._commit(Path(engine_bench.__file__).resolve().parents[2], "HEAD"),
        "rows": rows,
    }
    print(f"written {write_json(args.out, report)}")
    return 0


def cmd_bench_engine(args) -> int:
    """``python -m attnlib bench-engine``: the engine against ``--base``'s, whole runs (and ``--profile``:
    where an epoch goes), written to ``--out``. ConfigError / MachineBusy propagate."""
    import torch

    from attnlib.lab import engine_bench
    from attnlib.lab.machine import machine, refuse_if_shared
    from attnlib.util import write_json

    if not args.force:
        refuse_if_shared(machine(torch.device("cpu")), args.threads, "the engines' times would be wrong")
    report = engine_bench.compare(
        args.base, tuple(args.models), args.images, args.rounds, args.threads, geometries=tuple(args.geometry)
    )
    if args.profile:
        report["breakdown"] = [engine_bench.breakdown(m, args.profile, args.threads) for m in args.models]
    print(f"written {write_json(args.out, report)}")
    return 0


def _print_bench(report: dict, out: Path) -> None:
    import pandas as pd

    from attnlib.results import bench
    from attnlib.results.timing import machine_words

    with pd.option_context(
        "display.width", 250, "display.max_columns", 30, "display.float_format", "{:.3g}".format
    ):
        if report["rows"]:  # none for --peak-only
            print(bench.table(report).to_string(index=False))
        shares = bench.profile_table(report)
        if shares is not None:
            print("where the time goes (share of the profiled step's op self time):")
            print(shares.to_string(index=False))
    m = report["machine"]
    print(f"{machine_words(m, m['torch_threads'])}, {m['usable_cores']} usable cores; matmul peak "
          + ", ".join(f"{dt} {p['best']:.1f} GFLOP/s" for dt, p in report["matmul_peak"].items())
          + f"; load {m['load_average_start']} -> {m['load_average_end']}"
          + (" (cores shared with other work: the figures are too low)" if report["load"]["shared"] else "")
          + f"; written {out}")  # fmt: skip


def cmd_san_bench(args) -> int:
    """``python -m attnlib san-bench``: the SAN operations' table, printed."""
    import pandas as pd

    from attnlib.lab import kernels

    table = kernels.run(args.batch, args.device, args.min_run_time, args.dtype, args.backends)
    if not any(backend == "triton" for _, backend in table.columns):
        print("CPU: measuring the reference (backend='torch') alone; the Triton kernels need a GPU.")
    print(f"SAN ops, batch {args.batch}, {args.dtype}, {table.attrs['device']}; median of timed blocks")
    with pd.option_context(
        "display.width", 200, "display.max_columns", 20, "display.float_format", "{:.3f}".format
    ):
        print(table)
    return 0


def cmd_train_cost(args) -> int:
    """Measure, write the report atomically, print one line per pair."""
    from attnlib.lab import train_cost
    from attnlib.results.timing import train_cost_path
    from attnlib.util import write_json

    report = train_cost.measure(
        args.preset, args.pairs, threads=args.threads, device=args.device, rounds=args.rounds
    )
    path = write_json(train_cost_path(args.results_dir, args.preset), report)
    for name, r in report["ratios"].items():
        m = report["models"][name]
        print(f"{name}: step {m['step_s'] * 1e3:.1f} ms, memory {m['total_mib']:.1f} MiB (step's peak "
              f"{m['peak_mib']:.1f}); HA / model: time {r['time']:.2f}x, memory {r['memory']:.2f}x")  # fmt: skip
    print(f"written {path}")
    return 0


def run(args) -> int:
    """Run the command `args` names (ConfigError for an empty --results-dir: it would write into the current
    folder)."""
    if getattr(args, "results_dir", None) is not None:
        check(bool(args.results_dir.strip()), "--results-dir", args.results_dir, "a folder path (not empty)")
    return COMMANDS[args.command](args)


COMMANDS = {
    "list": cmd_list,
    "train": cmd_train,
    "queue": cmd_queue,
    "probe": cmd_probe,
    "table1": cmd_table,
    "table3": cmd_table,
    "time": cmd_time,
    "bench": cmd_bench,
    "bench-engine": cmd_bench_engine,
    "throughput": cmd_throughput,
    "san-bench": cmd_san_bench,
    "train-cost": cmd_train_cost,
}
