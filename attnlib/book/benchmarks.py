"""The saved speed benchmarks as the appendix reads them: the reports of ``python -m attnlib bench``, read
against an idle peak of the same machine where theirs was measured on shared cores, and the sentence on
the machine they ran on.
"""

from __future__ import annotations

from pathlib import Path

from attnlib.book.params import Params


def bench_reports(params: Params) -> dict:
    """Saved speed benchmarks ``<results_dir>/bench/<device>.json`` (``python -m attnlib bench``), by device.

    A report whose matmul peak was measured while the load said the cores were shared (``peak_shared``) is
    read against the idle peak of the same machine (CPU model, instruction sets and threads) when
    ``<results_dir>/bench/peak/<device>.json`` (``python -m attnlib bench --peak-only``) holds one measured
    with the cores otherwise idle: its rows' ``peak_gflops``, ``utilisation`` and ``model_utilisation`` are
    recomputed from their measured FLOP/s, and ``report["peak_source"]`` says so."""
    import json

    folder = Path(params.results_dir) / "bench"
    reports = {f.stem: json.loads(f.read_text()) for f in sorted(folder.glob("*.json"))}
    for device, report in reports.items():
        idle = folder / "peak" / f"{device}.json"
        if idle.is_file() and peak_shared(report):
            _use_idle_peak(report, json.loads(idle.read_text()), idle)
    return reports


def peak_shared(report: dict) -> bool | None:
    """Whether a benchmark's matmul peak was measured on shared cores: its own flag, or for a report older
    than that flag, ``attnlib.bench.core_sharing`` of the load average it recorded at the start."""
    from attnlib.bench import core_sharing

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
    m = report["machine"]
    load = m.get("load_average_start")
    flags = ", ".join(m.get("cpu_flags") or []) or "none of avx2 / avx512 / amx reported"
    text = (
        f"Measured on {m.get('cpu') or m.get('device')} (instruction sets: {flags}; {m.get('usable_cores')} "
        f"cores, {m.get('torch_threads')} torch thread(s), torch {m.get('torch')}, CPU capability "
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
            f", and the utilisations divide by the peak of an idle core of the same machine type ({listed}; "
            f"best of several sizes and repetitions, `{source['path']}`, {source['finished']}, load "
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
            text += (
                f". Matmul peak ({listed}): best of several sizes and repetitions on otherwise idle cores."
            )
    elif shared:
        text += "."
    bf16 = {"avx512_bf16", "amx_bf16"} & set(m.get("cpu_flags") or [])
    if m.get("device") == "cpu" and not bf16:
        text += (
            " This CPU has no bf16 matrix instructions (AVX512-BF16 or AMX): bf16 matmuls run far slower "
            "than fp32 here, and the engine trains in fp32."
        )
    return text
