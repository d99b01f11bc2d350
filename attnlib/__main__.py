"""Command line: `python -m attnlib list | train | table1 | table3` (parsing and messages only).

Bad input exits non-zero with one line naming the parameter and the allowed values, before anything is
written; no traceback.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys

from attnlib import experiments
from attnlib.errors import ConfigError

EXIT_USAGE, EXIT_MISSING, EXIT_LOCKED, EXIT_DIVERGED, EXIT_INTERRUPTED = 2, 1, 3, 4, 130


class _Parser(argparse.ArgumentParser):
    def error(self, message: str):  # one line, no usage block
        self.exit(EXIT_USAGE, f"{self.prog}: error: {message}\n")


def _choice(parameter: str, allowed):
    def parse(value: str) -> str:
        if value not in allowed:
            raise argparse.ArgumentTypeError(f"got {value!r}; allowed: {', '.join(allowed)}")
        return value

    parse.__name__ = parameter
    return parse


def _integer(parameter: str, minimum: int):
    def parse(value: str) -> int:
        try:
            n = int(value)
        except ValueError:
            n = None
        if n is None or n < minimum:
            raise argparse.ArgumentTypeError(f"got {value!r}; allowed: an integer >= {minimum}")
        return n

    parse.__name__ = parameter
    return parse


def _data(value: str) -> str:
    if value.split(":")[0] == "synthetic" or os.path.isdir(value):
        return value
    raise argparse.ArgumentTypeError(
        f"got {value!r}, which is not an existing folder; allowed: a CIFAR-10 folder, 'synthetic' or "
        "'synthetic:N_TRAIN:N_TEST'"
    )


def build_parser() -> argparse.ArgumentParser:
    names, presets = experiments.names(), experiments.PRESETS
    epilog = f"experiments: {', '.join(names)}\npresets: {', '.join(presets)}"
    parser = _Parser(
        prog="python -m attnlib",
        description="Train and tabulate the experiments of 'Can self-attention do what convolution does?'.",
        epilog=epilog,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)
    preset = dict(type=_choice("preset", presets), metavar="{" + ",".join(presets) + "}")

    p = sub.add_parser(
        "list",
        help="experiments, parameters and (budget) estimated times",
        epilog=epilog,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--preset", default="paper", **preset)

    p = sub.add_parser(
        "train",
        help="train one experiment (resumes from its checkpoints)",
        epilog=epilog,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("experiment", type=_choice("experiment", names), metavar="EXPERIMENT")
    p.add_argument("--preset", default="paper", **preset)
    p.add_argument(
        "--data",
        type=_data,
        default=None,
        help="CIFAR-10 folder, 'synthetic' or 'synthetic:N_TRAIN:N_TEST' (default: the preset's, "
        "else $ATTNLIB_DATA)",
    )
    p.add_argument("--results-dir", default="results")
    p.add_argument("--device", default=None, help="auto (default), cpu, cuda, cuda:N")
    p.add_argument("--seed", type=_integer("seed", 0), default=0)
    p.add_argument("--epochs", type=_integer("epochs", 1), default=None, help="override the preset's epochs")
    p.add_argument("--no-progress", action="store_true", help="no progress bars")

    for name, what in (("table1", "Table 1 (Cordonnier et al.)"), ("table3", "Table 3 ([Re]: model vs HA)")):
        p = sub.add_parser(
            name,
            help=f"print {what} from saved results",
            epilog=epilog,
            formatter_class=argparse.RawDescriptionHelpFormatter,
        )
        p.add_argument("--results-dir", default="results")
        p.add_argument("--preset", default="paper", **preset)
        p.add_argument("--seed", type=_integer("seed", 0), default=0)
    return parser


def _minutes(seconds: float | None) -> str:
    return "unmeasured" if seconds is None else f"{seconds / 60:.1f} min"


def cmd_list(args) -> int:
    import pandas as pd

    rows, total, unknown = [], 0.0, False
    for name in experiments.names():
        rc = experiments.resolve(name, args.preset)
        row = {
            "experiment": name,
            "family": rc.family,
            "params": f"{experiments.count_parameters(name, args.preset):,}",
            "epochs": rc.train.epochs,
            "batch": rc.train.batch_size,
            "lr": rc.train.lr,
            "model": " ".join(f"{k}={v}" for k, v in rc.model.items()),
        }
        if args.preset == "budget":
            est = experiments.estimate_seconds(name, args.preset)
            row["est. time"] = _minutes(est)
            unknown |= est is None
            total += est or 0.0
        rows.append(row)
    print(pd.DataFrame(rows).to_string(index=False))
    print()
    for protocol, p in experiments.PRESET_TABLE[args.preset].items():
        print(f"[{protocol}] {p.reason}")
    if args.preset == "budget":
        note = " (some runs unmeasured)" if unknown else ""
        print(f"\nestimated total for the grid: {total / 3600:.2f} h{note} on the reference machine")
    return 0


def cmd_train(args) -> int:
    from attnlib.results import train_run

    result = train_run(
        args.experiment,
        args.preset,
        data=args.data,
        results_dir=args.results_dir,
        device=args.device,
        seed=args.seed,
        epochs=args.epochs,
        progress=False if args.no_progress else None,
    )
    if int(os.environ.get("RANK", "0")) == 0:
        m = result.metrics
        print(
            f"{args.experiment}/{args.preset}: test accuracy {m['test_accuracy']:.4f}, {m['params']:,} params, "
            f"{m['wall_time_ms']:.2f} ms/image on {m['wall_time_device']}; results in {result.path}"
        )
    return 0


def cmd_table(args) -> int:
    from attnlib import results

    df = (results.table1 if args.command == "table1" else results.table3)(
        args.results_dir, args.preset, args.seed
    )
    print(df.to_string(index=False))
    return 0


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    rank = int(os.environ.get("RANK", "0"))
    logging.basicConfig(
        level=logging.INFO if rank == 0 else logging.WARNING, format="%(message)s", stream=sys.stderr
    )
    from attnlib.results import MissingResult, RunLocked
    from attnlib.train import Interrupted, TrainingDiverged

    prog = "python -m attnlib"
    try:
        return {"list": cmd_list, "train": cmd_train, "table1": cmd_table, "table3": cmd_table}[args.command](
            args
        )
    except ConfigError as err:
        print(f"{prog}: error: {err}", file=sys.stderr)
        return EXIT_USAGE
    except RunLocked as err:
        print(f"{prog}: refused: {err}", file=sys.stderr)
        return EXIT_LOCKED
    except TrainingDiverged as err:
        print(f"{prog}: diverged: {err}", file=sys.stderr)
        return EXIT_DIVERGED
    except Interrupted as err:
        print(f"{prog}: {err}", file=sys.stderr)
        return EXIT_INTERRUPTED
    except MissingResult as err:
        print(f"{prog}: {err}", file=sys.stderr)
        return EXIT_MISSING
    except KeyboardInterrupt:
        print(f"{prog}: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED


if __name__ == "__main__":
    sys.exit(main())
