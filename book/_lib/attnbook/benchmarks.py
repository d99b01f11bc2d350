"""The saved speed benchmarks as the appendix reads them: the reports of ``python -m attnlib bench``, read
against an idle peak of the same machine where theirs was measured on shared cores, and the sentence on
the machine they ran on.
"""

from __future__ import annotations

from pathlib import Path

from attnbook.params import Params

#: reports of results/bench/ that other commands write: `bench-engine` (``engine_report``), `throughput`
OTHER_REPORTS = ("engine", "throughput")


def bench_reports(params: Params) -> dict:
    """Saved speed benchmarks ``<results_dir>/bench/<device>.json`` (``python -m attnlib bench``), by device.

    A report whose matmul peak was measured while the load said the cores were shared (``peak_shared``) is
    read against the idle peak of the same machine (CPU model, instruction sets and threads) when
    ``<results_dir>/bench/peak/<device>.json`` (``python -m attnlib bench --peak-only``) holds one measured
    with the cores otherwise idle: its rows' ``peak_gflops``, ``utilisation`` and ``model_utilisation`` are
    recomputed from their measured FLOP/s, and ``report["peak_source"]`` says so."""
    import logging

    from attnlib.results.store import read_json

    folder = Path(params.results_dir) / "bench"
    reports = {}
    for f in sorted(folder.glob("*.json")):
        if f.stem in OTHER_REPORTS:  # not `python -m attnlib bench`'s: read by their own readers
            continue
        try:  # an untrusted file: read bounded, and used only if the appendix can show it
            report = read_json(f)
            rows = report.get("rows") if isinstance(report, dict) else None
            if not isinstance(rows, list) or not isinstance(report.get("machine"), dict):
                raise ValueError("not a benchmark report (machine, rows)")
            if not all(isinstance(r, dict) and isinstance(r.get("dtype"), str) for r in rows):
                raise ValueError("its rows are not measurements")
            idle = folder / "peak" / f"{f.stem}.json"
            if idle.is_file() and peak_shared(report):
                _use_idle_peak(report, read_json(idle), idle)
            bench_machine_markdown(report)
        except (
            OSError,
            ValueError,
            KeyError,
            TypeError,
            AttributeError,
            IndexError,
            ZeroDivisionError,
        ) as err:
            reason = " ".join(f"{type(err).__name__}: {err}".split())[:200]
            logging.getLogger("attnlib").warning("%s is damaged (%s); not shown", f, reason)
            continue
        reports[f.stem] = report
    return reports


def peak_shared(report: dict) -> bool | None:
    """Whether a benchmark's matmul peak was measured on shared cores: its own flag, or for a report older
    than that flag, ``attnlib.results.timing.core_sharing`` of the load average it recorded at the start."""
    from attnlib.results.timing import core_sharing

    if "peak_shared" in report.get("load", {}):
        return report["load"]["peak_shared"]
    m = report["machine"]
    if m.get("device") != "cpu":
        return False
    return core_sharing(m["torch_threads"], m.get("load_average_start"), usable=m["usable_cores"])["shared"]


def _same_machine(a: dict, b: dict) -> bool:
    keys = ("cpu", "cpu_flags", "torch_threads", "usable_cores")
    return all(a.get(k) == b.get(k) for k in keys)


def _use_idle_peak(report: dict, idle: dict, path: Path) -> None:
    if idle.get("load", {}).get("shared") is not False or not _same_machine(
        report["machine"], idle["machine"]
    ):
        return
    peaks = {dt: p["best"] for dt, p in idle["matmul_peak"].items()}
    if not all(r["dtype"] in peaks for r in report["rows"]):
        return
    for r in report["rows"]:
        r["peak_gflops"] = peaks[r["dtype"]]
        r["utilisation"] = r["achieved_gflops"] / r["peak_gflops"]
        r["model_utilisation"] = r["model_gflop_per_image"] * r["images_per_s"] / r["peak_gflops"]
    report["peak_source"] = dict(
        path=f"results/bench/peak/{path.name}",
        peaks=peaks,
        finished=idle.get("finished"),
        load=idle["load"],
        torch=idle["machine"].get("torch"),
    )


def bench_machine_markdown(report: dict) -> str:
    """Which machine, instruction sets, threads and load a benchmark ran on, and which matmul peak its
    utilisations divide by: its own (flagged when the load said the cores were shared) or the idle peak
    of the same machine (``bench_reports``)."""
    from attnbook.phrases import escaped

    m = report["machine"]
    load = m.get("load_average_start")
    threads = m.get("torch_threads")
    flags = ", ".join(map(str, m.get("cpu_flags") or [])) or "none of avx2 / avx512 / amx reported"
    text = escaped(  # the report's strings, as typed
        f"Measured on {m.get('cpu') or m.get('device')} (instruction sets: {flags}; {m.get('usable_cores')} "
        f"cores, {threads} torch thread{'' if threads == 1 else 's'}, torch {m.get('torch')}, CPU capability "
        f"{m.get('cpu_capability')})"
        + (f", 1-minute load average {load[0]:.1f} at the start." if load else ".")
    )
    shared, source = peak_shared(report), report.get("peak_source")
    if shared:
        text += (
            " The load says the cores were shared with other work during this run: its throughputs are lower "
            "than an idle machine's"
        )
    if source:
        listed = ", ".join(f"{dt} {g:.0f} GFLOP/s" for dt, g in source["peaks"].items())
        text += (
            f"{', and the' if shared else ' The'} utilisations divide by the peak of an idle core of the same "
            f"machine type ({listed}; "
            f"best of several sizes and repetitions, `{source['path']}`, {escaped(source['finished'])}, load "
            f"{source['load']['load_before']} before), so they are lower bounds."
        )
    elif report.get("matmul_peak"):
        peaks = report["matmul_peak"]
        best = {dt: p.get("best", p.get("start", {}).get("gflops")) for dt, p in peaks.items()}
        listed = ", ".join(f"{dt} {g:.0f} GFLOP/s" for dt, g in best.items() if g is not None)
        if shared:
            text += (
                f", and its matmul peak ({listed}) was measured on the shared cores too: too low, which "
                "inflates the utilisations. `python -m attnlib bench --peak-only` measures the peak of an "
                "idle core."
            )
        else:
            text += f" Matmul peak ({listed}): best of several sizes and repetitions on otherwise idle cores."
    elif shared:
        text += "."
    bf16 = {"avx512_bf16", "amx_bf16"} & set(m.get("cpu_flags") or [])
    if m.get("device") == "cpu" and not bf16:
        text += (
            " This CPU has no bf16 matrix instructions (AVX512-BF16 or AMX): bf16 matmuls run far slower "
            "than fp32 here, and the engine trains in fp32."
        )
    return text


#: The columns of ``attnlib.results.bench.table`` in the appendix's throughput table, under (group, header): what
#: each row measures, the training and inference speed with the speed-up over the plain formulation, and
#: the utilisation of the matmul peak. Memory and FLOPs go to a second table (``THROUGHPUT_MORE``), the
#: batch and layers timed of each shapes to a third (``throughput_tables``).
THROUGHPUT_SHOWN = {
    "shapes": ("", "shapes"),
    "model": ("", "model"),
    "dtype": ("", "dtype"),
    "impl": ("", "impl"),
    "images_per_s": ("training", "images/s"),
    "speedup_vs_plain": ("training", "× plain"),
    "infer_images_per_s": ("inference", "images/s"),
    "infer_speedup_vs_plain": ("inference", "× plain"),
    "utilisation": ("", "utilisation"),
}
#: The columns of the second table, each row named by the same four columns as in the first: memory, FLOPs
#: and the utilisation counted with the plain formulation's FLOPs; a column of a report that no table
#: names comes last here under its own name.
THROUGHPUT_MORE = {
    "peak_mem_mb": ("", "peak memory (MB)"),
    "gflop_per_image": ("", "GFLOP per image"),
    "achieved_gflops": ("", "achieved GFLOP/s"),
    "model_utilisation": ("", "model utilisation"),
}
#: What each shapes of a benchmark runs at (the third table), when the report has one value per shapes.
THROUGHPUT_SETUP = {"shapes": ("", "shapes"), "batch": ("", "batch"), "layers_timed": ("", "layers timed")}
_KEYS = ("shapes", "model", "dtype", "impl")


def _cell(value) -> str:
    """A benchmark figure as text: an integer as such, any other number to 3 decimals, "—" where none."""
    import math
    import numbers

    if isinstance(value, numbers.Integral):
        return str(value)
    if isinstance(value, numbers.Real):
        return "—" if math.isnan(value) else f"{value:.3f}"
    return str(value)


def _headed(frame, headers: dict):
    """``frame``'s columns of ``headers`` ({column: (group, header)}), as text, under two-level headers; the
    model names may wrap after their underscores, and the shapes and model are written on the first row of
    their block only (the rows come ordered by shapes, then model)."""
    import pandas as pd

    from attnbook.reference import shown_model

    out = pd.DataFrame({c: frame[c].map(_cell) for c in headers if c in frame.columns})
    if "model" in out.columns:
        block = frame[["shapes", "model"]].apply(tuple, axis=1)
        first = block.ne(block.shift())
        out["shapes"] = out["shapes"].where(first, "")
        out["model"] = out["model"].map(shown_model).where(first, "")
    out.columns = pd.MultiIndex.from_tuples([headers[c] for c in out.columns])
    return out


def throughput_tables(report: dict):
    """(main, more, setup): the rows of ``attnlib.results.bench.table(report)`` (one per shapes × model × dtype ×
    impl) in tables narrow enough for the text column, every figure kept (to 3 decimals; "—" for the
    speed-up of the plain formulation over itself). ``main``: the columns of ``THROUGHPUT_SHOWN``; ``more``:
    the four that name a row, then those of ``THROUGHPUT_MORE`` and any other; ``setup``: one row per shapes
    with its batch and layers timed, or None where they vary within a shapes (then they stay in ``more``)."""
    from attnlib.results import bench

    rows = bench.table(report)
    named = set(THROUGHPUT_SHOWN) | set(THROUGHPUT_MORE)
    setup_columns = [c for c in THROUGHPUT_SETUP if c in rows.columns]
    setup = rows[setup_columns].drop_duplicates()
    setup = _headed(setup, THROUGHPUT_SETUP) if setup["shapes"].is_unique and len(setup_columns) > 1 else None
    if setup is not None:
        named |= set(THROUGHPUT_SETUP)
    others = {c: ("", c) for c in rows.columns if c not in named}
    more = {**{k: THROUGHPUT_SHOWN[k] for k in _KEYS}, **others, **THROUGHPUT_MORE}
    return _headed(rows, THROUGHPUT_SHOWN), _headed(rows, more), setup


def profile_layout(report: dict):
    """``attnlib.results.bench.profile_table(report)`` narrow enough for the text column (None if not profiled): one
    row per shapes × model × op category, the first of each block the total op time of the profiled step
    ("op time (ms)"), then each category's share of it; one column per dtype and implementation, so
    attnlib and the plain formulation sit side by side. The shapes and model are written on the first row
    of their block only."""
    import pandas as pd

    from attnbook.reference import shown_model
    from attnlib.results import bench

    shares = bench.profile_table(report)
    if shares is None:
        return None
    ops = ["total_ms"] + [c for c in shares.columns if c not in (*_KEYS, "total_ms")]
    columns = list(dict.fromkeys(zip(shares["dtype"], shares["impl"], strict=True)))
    measured = shares.set_index(list(_KEYS))
    rows = []
    for shapes, model in dict.fromkeys(zip(shares["shapes"], shares["model"], strict=True)):
        for i, op in enumerate(ops):
            row = {
                ("", "shapes"): shapes if i == 0 else "",
                ("", "model"): shown_model(model) if i == 0 else "",
                ("", "op"): "op time (ms)" if op == "total_ms" else op,
            }
            for dtype, impl in columns:
                key = (shapes, model, dtype, impl)
                row[(dtype, impl)] = _cell(measured.loc[key, op]) if key in measured.index else "—"
            rows.append(row)
    out = pd.DataFrame(rows)
    out.columns = pd.MultiIndex.from_tuples(out.columns)
    return out


# ------------------------------------------------------------------------------ the training engine
#: the GEMM operators of the profiler's tables (their self time is the matrix products' time)
GEMMS = ("aten::mm", "aten::bmm", "aten::addmm", "aten::baddbmm")


def engine_report(params: Params) -> dict | None:
    """``<results_dir>/bench/engine.json`` (``python -m attnlib bench-engine``), or None where it is missing or
    is not such a report (an untrusted file: read bounded; a damaged one is logged and not shown)."""
    import logging

    from attnlib.results.store import read_json

    path = Path(params.results_dir) / "bench" / "engine.json"
    if not path.is_file():
        return None
    try:
        report = read_json(path)
        engine_tables(report)  # everything the appendix shows must parse
        bench_machine_markdown({"machine": report["machine"]})
    except (OSError, ValueError, KeyError, TypeError, AttributeError, IndexError, ZeroDivisionError) as err:
        reason = " ".join(f"{type(err).__name__}: {err}".split())[:200]
        logging.getLogger("attnlib").warning("%s is damaged (%s); not shown", path, reason)
        return None
    return report


def engine_tables(report: dict) -> dict:
    """The engine report as the appendix shows it: ``runs`` (one budget epoch per model, the earlier commit's
    engine against this one: epoch and whole-run seconds, their ratio, peak memory), ``steps`` (training steps
    at another geometry), ``epoch`` (where one epoch goes with this engine: each phase's share, and the
    matrix products' share of the profiled op time), each a DataFrame of text cells (None where the report has
    no such rows), and ``gemm`` {model: GEMM share}."""
    import pandas as pd

    from attnbook.reference import shown_model

    runs = pd.DataFrame(
        {
            "model": shown_model(r["model"]),
            "epoch (s), before": f"{r['base']['epoch_s']:.1f}",
            "epoch (s), now": f"{r['new']['epoch_s']:.1f}",
            "epoch ×": f"{r['ratio_epoch']:.2f}",
            "whole run ×": f"{r['ratio_run']:.2f}",
            "memory (MiB)": f"{r['base']['peak_mib']:.0f} → {r['new']['peak_mib']:.0f}",
        }
        for r in report["rows"]
    )
    steps = pd.DataFrame(
        {
            "model": shown_model(r["model"]),
            "tokens": r["geometry"],
            "step (s), before": f"{r['base_step_s']:.2f}",
            "step (s), now": f"{r['new_step_s']:.2f}",
            "×": f"{r['ratio_step']:.2f}",
        }
        for r in report.get("geometry_rows") or []
    )
    gemm, epoch = {}, []
    for b in report.get("breakdown") or []:
        share = b["shares"]
        gemm[b["model"]] = sum(o["share"] for o in b["operators"] if o["name"] in GEMMS)
        epoch.append({
            "model": shown_model(b["model"]),
            "forward": f"{share['forward']:.0%}",
            "backward": f"{share['backward']:.0%}",
            "evaluation": f"{share['evaluation']:.0%}",
            "other": f"{1 - share['forward'] - share['backward'] - share['evaluation']:.0%}",
            "GEMMs": f"{gemm[b['model']]:.0%}",
        })  # fmt: skip
    return {
        "runs": runs if len(runs) else None,
        "steps": steps if len(steps) else None,
        "epoch": pd.DataFrame(epoch) if epoch else None,
        "gemm": gemm,
    }


#: The run that checks the engine changes no model's function: learned_content_9h, seed 0, at budget, trained
#: again with the new engine into results/bench/rerun/ (so it never stands in for the saved seed 0).
RERUN = ("learned_content_9h", "budget", 0)


def engine_rerun(params: Params) -> dict | None:
    """The engine's rerun (``RERUN``) beside the saved seeds of the same experiment: {accuracy, commit, seeds:
    [accuracy of every saved seed at its preset]}, or None where the rerun is not complete. Never trains."""
    from dataclasses import replace

    from attnbook.runs import seed_accuracies
    from attnlib.results.load import read

    name, preset, seed = RERUN
    saved = read(name, preset, seed=seed, results_dir=Path(params.results_dir) / "bench" / "rerun")
    if not saved.complete:
        return None
    commit = (saved.run.metrics["provenance"].get("git") or {}).get("commit", "")
    return {
        "accuracy": saved.run.test_accuracy,
        "commit": str(commit)[:7],
        "seeds": seed_accuracies(name, replace(params, preset=preset)),
    }
