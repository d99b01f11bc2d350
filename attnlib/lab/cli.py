"""Command line: `python -m attnlib list | train | queue | probe | table1 | table3 | time | bench | san-bench |
train-cost`: the one parser (argparse) and the one place that turns the library's exceptions into a line and an
exit code; what each command does is `attnlib.lab.commands`.

argparse only parses (strings and integers); the library checks every value once (ConfigError naming the
parameter and the allowed values). Bad input exits non-zero with that one line, before anything is written;
never a traceback; the exit codes are `attnlib.lab.exits`.
"""

from __future__ import annotations

import argparse
import logging
import signal
import sys
import threading

from attnlib import experiments
from attnlib.errors import ConfigError
from attnlib.lab.exits import (
    EXIT_BUSY,
    EXIT_DIVERGED,
    EXIT_FILES,
    EXIT_INTERRUPTED,
    EXIT_LOCKED,
    EXIT_MISSING,
    EXIT_USAGE,
    PROG,
)
from attnlib.lab.train_cost import ROUNDS
from attnlib.train.distributed import distributed_env


class _Parser(argparse.ArgumentParser):
    def error(self, message: str):  # one line, no usage block
        self.exit(EXIT_USAGE, f"{PROG}: error: {message}\n")


def build_parser() -> argparse.ArgumentParser:
    variants = [n for n in experiments.names(variants=True) if experiments.get(n).variant_of]
    epilog = (
        f"experiments: {', '.join(experiments.names())}\nclaim variants (out of the tables): {', '.join(variants)}"
        f"\npresets: {', '.join(experiments.PRESETS)}"
    )
    style = dict(epilog=epilog, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser = _Parser(
        prog=PROG,
        description="Train and tabulate the experiments of 'Can self-attention do what convolution does?'.",
        **style,
    )
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)
    # the commands of saved runs share --preset (default paper, or budget) and --results-dir, declared once
    paper, budget = ({**style, "parents": [_saved_runs(preset)]} for preset in ("paper", "budget"))
    for add in (
        _add_list,
        _add_train,
        _add_queue,
        _add_probe,
        _add_bench,
        _add_bench_engine,
        _add_throughput,
        _add_tables,
        _add_time,
        _add_san_bench,
        _add_train_cost,
    ):
        add(sub, paper, budget)
    return parser


def _saved_runs(preset: str) -> argparse.ArgumentParser:
    """The options of a command of saved runs: --preset (default ``preset``) and --results-dir."""
    p = _Parser(add_help=False)
    p.add_argument("--preset", default=preset, metavar="{" + ",".join(experiments.PRESETS) + "}")
    p.add_argument("--results-dir", default="results", help="the folder of saved runs (default: results)")
    return p


# the help of the options several subcommands share, each written once
DATA_HELP = (
    "CIFAR-10 folder, 'synthetic' or 'synthetic:N_TRAIN:N_TEST' (default: the preset's, else $ATTNLIB_DATA)"
)
REPLACE_HELP = (
    "replace a complete result of another configuration in the run folder (e.g. trained with other --epochs); "
    "without it such a result is kept and the command refused"
)
BUSY_HELP = "measure even when the load average says the cores are shared (the report flags it)"


def _add_list(sub, paper: dict, budget: dict) -> None:
    sub.add_parser("list", help="experiments, parameters and (budget) estimated times", **paper)


def _add_train(sub, paper: dict, budget: dict) -> None:
    p = sub.add_parser("train", help="train one experiment (resumes from its checkpoints)", **paper)
    p.add_argument("experiment", metavar="EXPERIMENT")
    p.add_argument("--data", help=DATA_HELP)
    p.add_argument("--device", help="auto (default), cpu, cuda, cuda:N")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--epochs", type=int, help="override the preset's number of epochs")
    p.add_argument(
        "--threads",
        type=int,
        help="CPU threads (default: torch's). On a machine shared with other jobs, 1 thread per run is much "
        "faster than 2 contending ones; run two trainings side by side instead.",
    )
    p.add_argument("--no-progress", action="store_true", help="no progress bars")
    p.add_argument("--force", action="store_true", help=REPLACE_HELP)


def _add_queue(sub, paper: dict, budget: dict) -> None:
    p = sub.add_parser(
        "queue",
        help="train several experiments and seeds as single-thread lanes side by side (resumable)",
        **budget,
    )
    p.add_argument(
        "--experiments",
        nargs="+",
        metavar="EXPERIMENT",
        help="in order of priority (default: at long the runs the claims ledger needs, else the grid)",
    )
    p.add_argument("--seeds", nargs="+", type=int, default=[0], metavar="SEED", help="default: 0")
    p.add_argument(
        "--asked",
        action="store_true",
        help="instead of --experiments x --seeds: the seeds the HA comparisons still lack by the project's "
        "standard (3 per side, 5 while a pair is inconclusive after Holm's adjustment over the HA pairs; "
        "attnlib.analysis.plan.seeds_asked)",
    )
    p.add_argument("--dry-run", action="store_true", help="list what it would train; start nothing")
    p.add_argument("--lanes", type=int, help="runs side by side (default: one per core, at most one per job)")
    p.add_argument("--data", help=DATA_HELP)
    p.add_argument("--log-dir", help="one log file per job (default: RESULTS_DIR/logs/PRESET)")
    p.add_argument("--force", action="store_true", help=REPLACE_HELP)


def _add_probe(sub, paper: dict, budget: dict) -> None:
    p = sub.add_parser(
        "probe",
        help="add the standard attention probe (probe.npz: at initialisation and at the end) to a saved run "
        "whose checkpoints/last.pt is on disk",
        **paper,
    )
    p.add_argument("experiment", metavar="EXPERIMENT")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--data", help="the CIFAR-10 folder of a cifar10 run (default: $ATTNLIB_DATA)")
    p.add_argument("--device", default="cpu", help="cpu (default), cuda, cuda:N")


def _add_tables(sub, paper: dict, budget: dict) -> None:
    p = sub.add_parser("table1", help="print Table 1 (Cordonnier et al.) from saved results", **paper)
    p.add_argument("--seed", type=int, default=0)
    sub.add_parser(
        "table3",
        help="print Table 3 ([Re]: model vs HA; every saved seed, wall times of `time`) and the Welch tests",
        **paper,
    )


def _add_time(sub, paper: dict, budget: dict) -> None:
    p = sub.add_parser(
        "time",
        help="time every model (and its HA variant) together, one process, interleaved: Table 3's wall time",
        **budget,
    )
    p.add_argument(
        "--experiments",
        nargs="+",
        metavar="EXPERIMENT",
        help="the models to time (default: every experiment)",
    )
    p.add_argument("--threads", type=int, default=1, help="CPU threads for every model (default 1)")
    p.add_argument("--device", default="cpu", help="cpu (default) or cuda")
    p.add_argument("--out", help="default: RESULTS_DIR/timing/PRESET.json (--quick: PRESET-quick.json)")
    p.add_argument("--quick", action="store_true", help="a few passes per model: a test of the command")
    p.add_argument("--force", action="store_true", help=BUSY_HELP)


def _add_bench(sub, paper: dict, budget: dict) -> None:
    from attnlib.lab.bench import DTYPES, IMPLS, MODELS, SHAPES

    about = "throughput and utilisation of the paper's models: attnlib, the plain formulation side by side"
    p = sub.add_parser("bench", help=about, description=f"{about} (attnlib.lab.bench)")
    p.add_argument("--quick", action="store_true", help="tiny models, one repeat: a few seconds")
    p.add_argument("--out", default=None, help="JSON report (default results/bench/<device>.json)")
    p.add_argument("--device", default="auto", help="auto | cpu | cuda")
    p.add_argument(
        "--shapes", nargs="+", default=None, help=f"of {', '.join(SHAPES)} (default: all; --quick: paper)"
    )
    p.add_argument("--models", nargs="+", default=list(MODELS), help=f"of {', '.join(MODELS)}")
    p.add_argument("--dtypes", nargs="+", default=list(DTYPES), help=f"of {', '.join(DTYPES)}")
    p.add_argument("--impls", nargs="+", default=list(IMPLS), help=f"of {', '.join(IMPLS)}")
    p.add_argument("--batch", type=int, default=None, help="batch size (default: the preset's, 100)")
    p.add_argument(
        "--layers", type=int, default=1, help="layers timed at the paper shapes (default 1 of 6; 0 = all)"
    )
    p.add_argument("--repeats", type=int, default=3, help="interleaved rounds of timed blocks (median)")
    p.add_argument("--no-inference", action="store_true", help="skip the eval-mode forward timing")
    p.add_argument("--profile", action="store_true", help="profile one step per row: where time goes")
    p.add_argument(
        "--threads", type=int, default=None, help="intra-op threads (default: torch's; --quick: 1)"
    )
    p.add_argument("--force", action="store_true", help=BUSY_HELP)
    p.add_argument(
        "--peak-only",
        action="store_true",
        help="only the matmul peak (default --out results/bench/peak/<device>.json, --threads 1)",
    )


def _add_bench_engine(sub, paper: dict, budget: dict) -> None:
    from attnlib.lab.engine_bench import MODELS

    about = "whole one-epoch budget runs: this checkout's engine against an earlier commit's, interleaved"
    p = sub.add_parser("bench-engine", help=about, description=f"{about} (attnlib.lab.engine_bench)")
    p.add_argument("--base", required=True, help="the earlier commit (any git revision)")
    p.add_argument(
        "--models", nargs="+", default=list(MODELS), help=f"experiments (default: {', '.join(MODELS)})"
    )
    p.add_argument(
        "--images", default="10000:2000", help="N_TRAIN:N_TEST synthetic images (50000:10000: a whole epoch)"
    )
    p.add_argument("--rounds", type=int, default=2, help="interleaved rounds per model (median)")
    p.add_argument("--threads", type=int, default=1, help="CPU threads of each run (default 1)")
    p.add_argument("--profile", type=int, default=0, metavar="STEPS",
                   help="also where an epoch goes with this engine, from STEPS timed steps per model")  # fmt: skip
    p.add_argument(
        "--geometry", nargs="*", default=[], help="also training steps at these geometries (16x16)"
    )
    p.add_argument("--out", default="results/bench/engine.json", help="JSON report")
    p.add_argument("--force", action="store_true", help=BUSY_HELP)


def _add_throughput(sub, paper: dict, budget: dict) -> None:
    about = "per-core training and evaluation images/s of each budget model: the figures behind the estimates"
    p = sub.add_parser("throughput", help=about, description=f"{about} (attnlib.lab.engine_bench.throughput)")
    p.add_argument("--models", nargs="+", default=None, help="experiments (default: the tables' grid)")
    p.add_argument(
        "--steps", type=int, default=15, help="timed training steps and evaluation batches per round"
    )
    p.add_argument("--rounds", type=int, default=3, help="rounds per model (best)")
    p.add_argument("--out", default="results/bench/throughput.json", help="JSON report")


def _add_san_bench(sub, paper: dict, budget: dict) -> None:
    about = "time and peak memory of the SAN operations' backends at each SAN stage's shapes on CIFAR-10"
    p = sub.add_parser("san-bench", help=about, description=f"{about} (attnlib.lab.kernels)")
    p.add_argument("--batch", type=int, default=40, help="batch size (the [Re] SAN runs used 40)")
    p.add_argument("--device", default="auto", help="auto | cpu | cuda")
    p.add_argument("--min-run-time", type=float, default=0.2, help="seconds of timed blocks per measurement")
    p.add_argument("--dtype", default="float32", help="float32 | float16 | bfloat16")
    p.add_argument("--backends", nargs="+", default=None, help="torch and/or triton (default: both on a GPU)")


def _add_train_cost(sub, paper: dict, budget: dict) -> None:
    p = sub.add_parser(
        "train-cost",
        help="time and peak memory of one training step of each HA pair, side by side (HA / model)",
        **budget,
    )
    p.add_argument("--pairs", nargs="+", metavar="MODEL", help="the HA pairs' models (default: every pair)")
    p.add_argument("--threads", type=int, default=1, help="CPU threads (default 1)")
    p.add_argument("--device", default="cpu", help="cpu (default) or cuda")
    p.add_argument("--rounds", type=int, default=ROUNDS, help=f"timed rounds per pair (default {ROUNDS})")


def _quiet_interrupt(signum, frame):
    """Ctrl-C while the command's modules are imported (torch: seconds): one line, not their traceback."""
    print(f"{PROG}: interrupted", file=sys.stderr)
    raise SystemExit(EXIT_INTERRUPTED)


def main(argv: list[str] | None = None) -> int:
    main_thread = threading.current_thread() is threading.main_thread()
    previous = signal.signal(signal.SIGINT, _quiet_interrupt) if main_thread else None
    try:
        argv = sys.argv[1:] if argv is None else list(argv)
        args = build_parser().parse_args(argv)
        from attnlib.lab import commands
        from attnlib.lab.lock import RunLocked
        from attnlib.lab.machine import MachineBusy
        from attnlib.lab.run import ResultExists
        from attnlib.results.load import MissingResult
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
        rank = distributed_env()[0]  # RANK / WORLD_SIZE as torchrun sets them, or none (ConfigError below)
        logging.basicConfig(level=logging.INFO if rank == 0 else logging.WARNING, format="%(message)s")
        return commands.run(args)
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
    from attnlib.lab.run import ResultExists

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
