"""Command line: `python -m attnlib list | train | queue | probe | table1 | table3 | time | bench` (parsing and
messages only).

Bad input exits non-zero with one line naming the parameter and the allowed values, before anything is
written; never a traceback. Exit codes: 1 no usable result (tables, loading), 2 bad input, 3 refused
(another process trains the run, or `train` would replace a complete result of another configuration:
`--force`), 4 diverged, 5 a file-system error (read-only, full or missing folder: one line naming the
path), 130 interrupted.
"""

from __future__ import annotations

import argparse
import logging
import os
import signal
import sys
import threading
from pathlib import Path

from attnlib import experiments
from attnlib.checks import MAX_SEED, distributed_env, is_synthetic, max_threads
from attnlib.errors import ConfigError

PROG = "python -m attnlib"
EXIT_MISSING, EXIT_USAGE, EXIT_LOCKED, EXIT_DIVERGED, EXIT_FILES, EXIT_INTERRUPTED = 1, 2, 3, 4, 5, 130
EXIT_BUSY = 6  # the load average says the cores are shared: a timing would be wrong


class _Parser(argparse.ArgumentParser):
    def error(self, message: str):  # one line, no usage block
        self.exit(EXIT_USAGE, f"{PROG}: error: {message}\n")


def _choice(allowed):
    def parse(value: str) -> str:
        if value not in allowed:
            raise argparse.ArgumentTypeError(f"got {value!r}; allowed: {', '.join(allowed)}")
        return value

    return parse


def _integer(minimum: int, maximum: int | None = None):
    def parse(value: str) -> int:
        try:
            n = int(value)
        except ValueError:
            n = None
        if n is None or n < minimum or (maximum is not None and n > maximum):
            allowed = f"an integer >= {minimum}" if maximum is None else f"an integer in [{minimum}, {maximum}]"
            raise argparse.ArgumentTypeError(f"got {value!r}; allowed: {allowed}")
        return n

    return parse


_SEED = _integer(0, MAX_SEED)  # numpy's seeding takes 32 bits: --seed 100000000000 would fail mid-run
_THREADS = _integer(1, max_threads())  # far more threads than cores: torch crashes, libgomp aborts


def _folder(value: str) -> str:
    """A results folder: any non-empty path ("" would write into the current folder)."""
    if not value.strip():
        raise argparse.ArgumentTypeError(f"got {value!r}; allowed: a folder path (not empty)")
    return value


def _data(value: str) -> str:
    if is_synthetic(value) or os.path.isdir(value):
        return value
    raise argparse.ArgumentTypeError(
        f"got {value!r}, which is not an existing folder; allowed: a CIFAR-10 folder, 'synthetic' or "
        "'synthetic:N_TRAIN:N_TEST'"
    )


def build_parser() -> argparse.ArgumentParser:
    names, presets = experiments.names(variants=True), experiments.PRESETS
    variants = [n for n in names if experiments.get(n).variant_of]
    epilog = (
        f"experiments: {', '.join(experiments.names())}\nclaim variants (out of the tables): {', '.join(variants)}"
        f"\npresets: {', '.join(presets)}"
    )
    style = dict(epilog=epilog, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser = _Parser(
        prog=PROG,
        description="Train and tabulate the experiments of 'Can self-attention do what convolution does?'.",
        **style,
    )
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)
    preset = dict(type=_choice(presets), default="paper", metavar="{" + ",".join(presets) + "}")

    def experiments_options(p, help: str) -> None:  # commands over several experiments: queue, time
        p.add_argument("--preset", **{**preset, "default": "budget"})
        p.add_argument(
            "--experiments", nargs="+", type=_choice(names), default=None, metavar="EXPERIMENT", help=help
        )

    p = sub.add_parser("list", help="experiments, parameters and (budget) estimated times", **style)
    p.add_argument("--preset", **preset)
    p.add_argument(
        "--measure",
        action="store_true",
        help="measure throughput here (a few batches per model) for the estimates",
    )
    p.add_argument("--results-dir", type=_folder, default="results", help="where saved runs are looked up (their times)")

    p = sub.add_parser("train", help="train one experiment (resumes from its checkpoints)", **style)
    p.add_argument("experiment", type=_choice(names), metavar="EXPERIMENT")
    p.add_argument("--preset", **preset)
    p.add_argument(
        "--data",
        type=_data,
        default=None,
        help="CIFAR-10 folder, 'synthetic' or 'synthetic:N_TRAIN:N_TEST' (default: the preset's, else $ATTNLIB_DATA)",
    )
    p.add_argument("--results-dir", type=_folder, default="results")
    p.add_argument("--device", default=None, help="auto (default), cpu, cuda, cuda:N")
    p.add_argument("--seed", type=_SEED, default=0)
    p.add_argument("--epochs", type=_integer(1), default=None, help="override the preset's number of epochs")
    p.add_argument(
        "--threads",
        type=_THREADS,
        default=None,
        help="CPU threads (default: torch's). On a machine shared with other jobs, 1 thread per run is much "
        "faster than 2 contending ones; run two trainings side by side instead.",
    )
    p.add_argument("--no-progress", action="store_true", help="no progress bars")
    p.add_argument(
        "--force",
        action="store_true",
        help="replace a complete result of another configuration in the run folder (e.g. trained with "
        "other --epochs); without it such a result is kept and the command refused",
    )

    p = sub.add_parser(
        "queue",
        help="train several experiments and seeds as single-thread lanes side by side (resumable)",
        **style,
    )
    experiments_options(
        p, "in order of priority (default: at long the runs the claims ledger needs, else the grid)"
    )
    p.add_argument("--seeds", nargs="+", type=_SEED, default=[0], metavar="SEED", help="default: 0")
    p.add_argument(
        "--asked",
        action="store_true",
        help="instead of --experiments x --seeds: the seeds the HA comparisons still lack by the project's "
        "standard (3 per side, 5 while the Welch interval holds 0; attnlib.claims.seeds_asked)",
    )
    p.add_argument(
        "--lanes",
        type=_THREADS,
        default=None,
        help="runs side by side (default: one per core, at most one per job)",
    )
    p.add_argument("--data", type=_data, default=None, help="as for train")
    p.add_argument("--results-dir", type=_folder, default="results")
    p.add_argument("--log-dir", default=None, help="one log file per job (default: RESULTS_DIR/logs/PRESET)")
    p.add_argument(
        "--force", action="store_true", help="as for train: replace results of another configuration"
    )

    p = sub.add_parser(
        "probe",
        help="add the standard attention probe (probe.npz: at initialisation and at the end) to a saved run "
        "whose checkpoints/last.pt is on disk",
        **style,
    )
    p.add_argument("experiment", type=_choice(names), metavar="EXPERIMENT")
    p.add_argument("--preset", **preset)
    p.add_argument("--seed", type=_SEED, default=0)
    p.add_argument("--results-dir", type=_folder, default="results")
    p.add_argument(
        "--data",
        type=_data,
        default=None,
        help="the CIFAR-10 folder of a cifar10 run (default: $ATTNLIB_DATA)",
    )
    p.add_argument("--device", default="cpu", help="cpu (default), cuda, cuda:N")

    p = sub.add_parser("bench", help="throughput benchmark: python -m attnlib bench --help", add_help=False)
    p.add_argument("args", nargs=argparse.REMAINDER, help="arguments of python -m attnlib.bench")

    p = sub.add_parser("table1", help="print Table 1 (Cordonnier et al.) from saved results", **style)
    p.add_argument("--results-dir", type=_folder, default="results")
    p.add_argument("--preset", **preset)
    p.add_argument("--seed", type=_SEED, default=0)
    p = sub.add_parser(
        "table3",
        help="print Table 3 ([Re]: model vs HA; every saved seed, wall times of `time`) and the Welch tests",
        **style,
    )
    p.add_argument("--results-dir", type=_folder, default="results")
    p.add_argument("--preset", **preset)

    p = sub.add_parser(
        "time",
        help="time every model (and its HA variant) together, one process, interleaved: Table 3's wall time",
        **style,
    )
    experiments_options(p, "the models to time (default: every experiment)")
    p.add_argument("--threads", type=_THREADS, default=1, help="CPU threads for every model (default 1)")
    p.add_argument("--device", type=_choice(("cpu", "cuda")), default="cpu", help="cpu (default) or cuda")
    p.add_argument("--results-dir", type=_folder, default="results")
    p.add_argument(
        "--out", default=None, help="default: RESULTS_DIR/timing/PRESET.json (--quick: PRESET-quick.json)"
    )
    p.add_argument("--quick", action="store_true", help="a few passes per model: a test of the command")
    p.add_argument(
        "--force",
        action="store_true",
        help="measure even when the load average says the cores are shared (the file flags it)",
    )
    return parser


def _minutes(seconds: float | None) -> str:
    return "unmeasured" if seconds is None else f"{seconds / 60:.1f} min"


def cmd_list(args) -> int:
    import pandas as pd
    import torch

    from attnlib.tables import collect
    from attnlib.train import measure_throughput

    estimate = args.measure or args.preset == "budget"
    listed = experiments.names(variants=True)
    saved = collect(args.results_dir, args.preset, listed).set_index("experiment")
    done = saved["status"] == "complete"
    rows, per_run = [], []
    for name in listed:
        rc = experiments.resolve(name, args.preset)
        row = {
            "experiment": name,
            "params": f"{experiments.count_parameters(name, args.preset):,}",
            "epochs": rc.train.epochs,
            "batch": rc.train.batch_size,
            "lr": rc.train.lr,
            "model": " ".join(f"{k}={v}" for k, v in rc.model.items()),
        }
        ips = None
        if args.measure:
            torch.manual_seed(0)
            ips = measure_throughput(experiments.build_model(name, args.preset), rc.train, "cpu")
            row["img/s per core"] = f"{ips[0]:.0f} / {ips[1]:.0f}"
        if estimate:
            est = experiments.estimate_seconds(name, args.preset, throughput=ips)
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
    if estimate:
        where = (
            "this machine's per-core throughput (measured now)" if args.measure else "the reference machine"
        )
        if None in per_run:
            print(
                f"\nestimated total for the grid: unknown ({per_run.count(None)} runs unmeasured; use --measure)"
            )
        else:
            total = experiments.grid_seconds(per_run)
            print(
                f"\nestimated total for the grid ({len(per_run)} runs, variants not counted): {total / 3600:.2f} h on 2 idle cores as two single-thread runs side "
                f"by side (train ... --threads 1), from {where}; full CIFAR-10, each run's time as listed"
            )
    if done.any():
        print(
            f"saved runs in {args.results_dir}: {int(done.sum())} of {len(done)} complete, "
            f"{saved.loc[done, 'train_seconds'].sum() / 3600:.2f} h of training in all (each run's wall time "
            "from its provenance, evaluation included)"
        )
    return 0


def cmd_train(args) -> int:
    from attnlib.queue import die_with_parent
    from attnlib.runs import run_or_load

    die_with_parent()  # started by `queue`: a SIGTERM (checkpoint, exit) when the queue dies, however

    if args.threads is not None:
        import torch

        torch.set_num_threads(args.threads)
    result = run_or_load(  # a complete result with the same configuration is kept, not retrained
        args.experiment,
        args.preset,
        data=args.data,
        results_dir=args.results_dir,
        device=args.device,
        seed=args.seed,
        train_missing=True,
        epochs=args.epochs,
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

    from attnlib.runs import backfill_probe
    from attnlib.train import resolve_device

    path = backfill_probe(
        args.experiment,
        args.preset,
        seed=args.seed,
        results_dir=args.results_dir,
        data=args.data,
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
    from attnlib import queue

    if args.asked:
        from attnlib import claims

        if args.experiments or args.seeds != [0]:
            given, value = (
                ("--experiments", args.experiments) if args.experiments else ("--seeds", args.seeds)
            )
            raise ConfigError(given, value, "none with --asked (it chooses the experiments and seeds itself)")
        jobs = [
            queue.Job(name, seed)
            for name, seed in claims.seeds_asked(args.results_dir, args.preset, args.data)
        ]
    else:
        names = args.experiments or queue.default_experiments(args.preset)
        jobs = [queue.Job(name, seed) for seed in dict.fromkeys(args.seeds) for name in dict.fromkeys(names)]
    todo, done = queue.pending(jobs, args.preset, args.results_dir, data=args.data)
    print(f"{args.preset}: {len(jobs)} runs, {len(done)} complete, {len(todo)} to train or resume")
    if not todo:
        return 0
    lanes = args.lanes or queue.default_lanes(len(todo))
    log_dir = Path(args.log_dir or Path(args.results_dir) / "logs" / args.preset)
    if not args.log_dir:  # a linked results/logs (a link in a clone) would take the logs elsewhere: refused
        from attnlib.store import check_no_links

        check_no_links(log_dir, args.results_dir)

    def command(job):
        return queue.train_command(
            job, args.preset, results_dir=args.results_dir, data=args.data, force=args.force
        )

    runner = queue.Queue(todo, lanes, command, log_dir)
    outcomes = runner.run()
    print(
        "\n".join(
            f"- {o.job.name}: {o.status}" + (f" ({o.seconds / 60:.0f} min)" if o.seconds else "")
            for o in outcomes
        )
    )
    if runner.interrupted:
        print(
            f"{PROG}: interrupted; the runs saved checkpoints: rerun the same command to go on",
            file=sys.stderr,
        )
        return EXIT_INTERRUPTED
    failed = [o for o in outcomes if o.status.startswith("failed")]
    if failed:
        print(f"{PROG}: {len(failed)} run(s) failed; their logs are in {log_dir}", file=sys.stderr)
        return EXIT_MISSING
    return 0


def cmd_table(args) -> int:
    from attnlib import tables

    if not Path(args.results_dir).is_dir():
        raise ConfigError(
            "--results-dir",
            args.results_dir,
            f"a folder of saved results ({args.results_dir} does not exist or is not a folder)",
        )
    if args.command == "table1":
        df = tables.table1(args.results_dir, args.preset, args.seed)
        print(df.drop(columns="detail").to_string(index=False))
    else:
        df = tables.table3(args.results_dir, args.preset)
        shown = df.drop(columns="detail").astype(object)
        shown["wall_time_ms"] = [
            "not measured" if v is None or v != v else f"{v:.3f}" for v in df["wall_time_ms"]
        ]
        print(shown.to_string(index=False))
        _print_welch(args, df)
    problems = df[df["status"].isin(["damaged", "stale"])]
    if len(problems):  # shown without numbers; say why
        print(f"\nnot used (retrain with: python -m attnlib train EXPERIMENT --preset {args.preset}):")
        for _, row in problems.iterrows():
            print(f"- {row['experiment']}: {row['status']}: {row['detail']}")
    return 0


def _print_welch(args, df) -> None:
    """Below Table 3: HA against its model over the saved seeds (Welch), and where the wall times come from."""
    from attnlib import compare, experiments, tables, timing

    print("\nHA - model over the saved seeds (accuracy points; Welch's t-test, 95% interval):")
    for e in experiments.EXPERIMENTS.values():
        if not e.baseline:
            continue
        acc = [
            list(tables.seed_accuracies(args.results_dir, args.preset, n)[0].values())
            for n in (e.baseline, e.name)
        ]
        if not all(acc):
            print(f"- {e.title}: not trained on both sides")
            continue
        w = compare.welch(*acc)
        ci = "no interval" if w.interval is None else f"[{w.interval[0]:+.1f}, {w.interval[1]:+.1f}]"
        p = "" if w.p is None else f", df {w.df:.1f}, p = {w.p:.2f}"
        wanted = "" if w.seeds_wanted == 0 else f"; the standard asks for {w.seeds_wanted} seeds per side"
        print(
            f"- {e.title}: {w.n[0]} model / {w.n[1]} HA seeds, {w.points:+.1f} points, {ci}{p}: {w.verdict}{wanted}"
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
    from attnlib import timing

    report, path = timing.run(
        args.preset,
        args.experiments,
        results_dir=args.results_dir,
        out=args.out,
        threads=args.threads,
        device=args.device,
        quick=args.quick,
        force=args.force,
    )
    print(timing.table(report).to_string(index=False))
    print(f"\n{timing.machine_line(report)}\n{report['seconds']:.1f} s of timing; written {path}")
    return 0


def cmd_bench(args) -> int:
    from attnlib.bench import main as bench

    bench(args.args[1:] if args.args[:1] == ["--"] else args.args)
    return 0


COMMANDS = {
    "list": cmd_list,
    "train": cmd_train,
    "queue": cmd_queue,
    "probe": cmd_probe,
    "table1": cmd_table,
    "table3": cmd_table,
    "time": cmd_time,
    "bench": cmd_bench,
}


def _quiet_interrupt(signum, frame):
    """Ctrl-C while the command's modules are imported (torch: seconds): one line, not their traceback."""
    print(f"{PROG}: interrupted", file=sys.stderr)
    raise SystemExit(EXIT_INTERRUPTED)


def main(argv: list[str] | None = None) -> int:
    main_thread = threading.current_thread() is threading.main_thread()
    previous = signal.signal(signal.SIGINT, _quiet_interrupt) if main_thread else None
    try:
        argv = sys.argv[1:] if argv is None else list(argv)
        if argv[:1] == ["bench"]:  # everything after "bench" belongs to attnlib.bench (argparse REMAINDER
            argv = ["bench", "--", *argv[1:]]  # would not pass options such as --help through)
        args = build_parser().parse_args(argv)
        try:
            rank = distributed_env()[0]  # RANK / WORLD_SIZE as torchrun sets them, or none
        except ConfigError as err:
            print(f"{PROG}: error: {err}", file=sys.stderr)
            return EXIT_USAGE
        logging.basicConfig(level=logging.INFO if rank == 0 else logging.WARNING, format="%(message)s")
        from attnlib.bench import MachineBusy
        from attnlib.runs import MissingResult, ResultExists
        from attnlib.store import RunLocked
        from attnlib.train import Interrupted, TrainingDiverged
    finally:
        if main_thread:  # from here a Ctrl-C is the command's KeyboardInterrupt (caught below)
            signal.signal(signal.SIGINT, previous)

    outcomes = [
        (ConfigError, "error: ", EXIT_USAGE),
        (RunLocked, "refused: ", EXIT_LOCKED),
        (ResultExists, "refused: ", EXIT_LOCKED),
        (MachineBusy, "refused: ", EXIT_BUSY),
        (TrainingDiverged, "diverged: ", EXIT_DIVERGED),
        (Interrupted, "", EXIT_INTERRUPTED),
        (MissingResult, "", EXIT_MISSING),
        (OSError, "error: ", EXIT_FILES),  # after ConfigError: DataNotFoundError is both
    ]
    try:
        return COMMANDS[args.command](args)
    except KeyboardInterrupt:
        print(f"{PROG}: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except tuple(cls for cls, _, _ in outcomes) as err:
        prefix, code = next((p, c) for cls, p, c in outcomes if isinstance(err, cls))
        print(f"{PROG}: {prefix}{_one_line(err)}", file=sys.stderr)
        return code


def _one_line(err: BaseException) -> str:
    """The message of `err` on one line; a file-system error as 'PATH: reason'; a refused replacement with
    the flag that allows it."""
    from attnlib.runs import ResultExists

    if isinstance(err, ResultExists):
        text = f"{err.detail}; it is kept: rerun with --force to replace it, or give another --results-dir"
    elif isinstance(err, OSError) and not isinstance(err, ConfigError) and err.strerror:
        where = err.filename if err.filename is not None else "file system"
        text = f"{where}: {err.strerror}" + (f" -> {err.filename2}" if err.filename2 else "")
    else:
        text = str(err)
    return " ".join(text.split())


if __name__ == "__main__":
    sys.exit(main())
