"""The results tables (attnlib.tables): one builder for the command line and the book, the rows of each
table, and Table 3's pooling of every saved seed. Its reliability tests (issue 9): damaged and stale
results reported as such."""

from __future__ import annotations

import pandas as pd
import pytest

import attnbook as book
from attnlib.lab.run import train_run
from attnlib.results import tables
from attnlib.results.config import run_config, run_dir
from attnlib.results.load import inspect_run
from attnlib.results.tables import collect, table1, table3

NAMES = ["vit", "vit_ha", "resnet18"]


def _book_params(results_dir):
    return book.check_params(
        preset="smoke", data=None, device="cpu", results_dir=results_dir, train_missing=False
    )


def test_the_cli_and_the_book_build_one_table(trained):
    """`collect` (the CLI's table) is `frame` of the saved runs, row for row the `frame` of the runs a
    chapter loads."""
    cli = tables.collect(trained, "smoke", NAMES)
    chapter = tables.frame(book.load_all(NAMES, _book_params(trained)))
    assert list(cli.columns) == list(tables.COLUMNS)
    pd.testing.assert_frame_equal(cli, chapter)
    assert list(cli["status"]) == ["complete", "complete", "missing"]
    assert cli.loc[2, ["accuracy", "params", "wall_time_ms"]].isna().all()
    assert set(tables.table1(trained, "smoke").columns) == set(tables.TABLE1_COLUMNS) <= set(tables.COLUMNS)


def test_the_book_and_the_cli_table3_agree(trained):
    """The chapter's Table 3 (`book.table3_frame` of the runs it loaded) has the CLI's numbers row for row."""
    names = tables.table3_names(9)
    chapter = book.table3_frame(book.load_all(names, _book_params(trained)), _book_params(trained))
    cli = table3(trained, "smoke").set_index("experiment").loc[names].reset_index()
    columns = list(tables.TABLE3_COLUMNS)
    pd.testing.assert_frame_equal(chapter[columns], cli[columns], check_dtype=False)
    assert list(chapter["status"]) == ["missing"] * 8 + ["complete"] * 2  # 9 heads: learned, quadratic, SAN


def test_table_rows_come_from_the_registry():
    assert tables.table1_names()[0] == "resnet18" and not any(
        n.endswith("_ha") for n in tables.table1_names()
    )
    nine, all_pairs = tables.table3_names(9), tables.table3_names()
    assert nine[:2] == ["quadratic_re_9h", "quadratic_re_9h_ha"] and "learned_content_16h" not in nine
    pairs = ("learned_content_9h", "san_pairwise", "san_patchwise", "vit")
    assert nine[2:] == [n for e in pairs for n in (e, f"{e}_ha")]
    assert set(nine) | set(tables.table3_names(16)) == set(all_pairs) and len(all_pairs) == 12


def test_complete_and_attention_rows():
    frame = pd.DataFrame(
        {
            "experiment": ["resnet18", "vit", "vit_ha", "san_pairwise"],
            "status": ["complete", "complete", "stale", "missing"],
        }
    )
    assert list(tables.complete(frame)["experiment"]) == ["resnet18", "vit"]
    assert list(tables.attention_rows(frame)["experiment"]) == ["vit"]


def test_table3(trained):
    df = table3(trained, "smoke")
    assert len(df) == 12 and set(df["variant"]) == {"normal", "HA"}
    vit = df[df["experiment"].isin(["vit", "vit_ha"])]
    assert (vit["status"] == "complete").all() and vit["accuracy"].between(0, 1).all()
    assert (vit["pair"] == "ViT").all() and vit["params"].iloc[1] < vit["params"].iloc[0]  # HA shares weights
    assert (df[~df["experiment"].isin(["vit", "vit_ha"])]["status"] == "missing").all()
    assert (vit["seeds"] == 1).all() and vit["accuracy_sd"].isna().all()  # one seed: no spread
    assert df["wall_time_ms"].isna().all()  # no timing file: not measured (not the training run's timing)


def test_table3_pools_every_saved_seed(copy):
    """Accuracy is the mean over the seeds of the current configuration, with the sample standard deviation
    and n; a damaged seed folder is named in the detail and left out; seed 0 may be the damaged one."""
    import json
    import statistics

    train_run("vit", "smoke", results_dir=copy, seed=2, progress=False)
    accs = [
        json.loads((run_dir(copy, "vit", "smoke", s) / "metrics.json").read_text())["test_accuracy"]
        for s in (0, 2)
    ]
    row = table3(copy, "smoke").set_index("experiment").loc["vit"]
    assert row["seeds"] == 2 and row["accuracy"] == pytest.approx(statistics.mean(accs))
    assert row["accuracy_sd"] == pytest.approx(statistics.stdev(accs)) and row["detail"] == ""
    (run_dir(copy, "vit", "smoke", 0) / "metrics.json").write_text("{")
    row = table3(copy, "smoke").set_index("experiment").loc["vit"]
    assert row["status"] == "complete" and row["seeds"] == 1 and row["accuracy"] == pytest.approx(accs[1])
    assert row["detail"].startswith("seed 0: damaged") and row["params"] > 0


# --------------------------------------------------------------------- reliability: damaged and stale results
def test_damaged_and_stale_results_in_tables(damaged, cli):
    """collect / table3 / `python -m attnlib table3`: a damaged metrics.json and a result of another
    configuration are reported as such, with no numbers, never as current results."""
    df = table3(damaged, "smoke").set_index("experiment")
    assert df.loc["vit_ha", "status"] == "damaged" and "metrics.json" in df.loc["vit_ha", "detail"]
    assert df.loc["vit", "status"] == "stale" and "train.epochs: 2 saved, 1 now" in df.loc["vit", "detail"]
    assert df.loc[["vit", "vit_ha"], ["accuracy", "params", "wall_time_ms"]].isna().all().all()
    assert (df.drop(index=["vit", "vit_ha"])["status"] == "missing").all()
    assert collect(damaged, "smoke", ["vit"], data="synthetic:64:32").loc[0, "status"] == "stale"
    assert set(table1(damaged, "smoke")["status"]) == {"missing"}
    # the stale result is still what it was: complete for its own configuration
    assert inspect_run(run_dir(damaged, "vit", "smoke"), expected=run_config("vit", "smoke", epochs=2))[
        0
    ] == ("complete")
    for command in ("table3", "table1"):
        code, out, err = cli([command, "--results-dir", str(damaged), "--preset", "smoke"])
        assert code == 0 and err == "" and "Traceback" not in out
    code, out, err = cli(["table3", "--results-dir", str(damaged), "--preset", "smoke"])
    rows = {line.split()[-1]: line for line in out.splitlines() if line.split()[-1:] in (["vit"], ["vit_ha"])}
    assert " damaged " in rows["vit_ha"] and " stale " in rows["vit"]
    assert "- vit_ha: damaged: " in out and "metrics.json" in out
    assert "- vit: stale: " in out and "train.epochs: 2 saved, 1 now" in out


def test_long_plan_names_real_runs_and_claims_and_sums_their_time(tmp_path, monkeypatch):
    """The compute record of the appendix: one row per long run the ledger reads (display names, the claims
    it informs, what it trained, its machine, an estimate), and the numbers the prose glues: runs saved,
    their CPU-hours (wall time x threads), the budget grid's further seeds and their CPU-hours."""
    from attnlib import experiments
    from attnlib.analysis import claims
    from attnlib.analysis import plan as lab_plan

    keys = {c.key for c in claims.CLAIMS}
    assert set(lab_plan.LONG_PLAN) <= set(experiments.names(variants=True))
    assert all(informs and set(informs) <= keys for informs in lab_plan.LONG_PLAN.values())
    params = book.check_params(
        preset="budget", data=None, device="cpu", results_dir=tmp_path, train_missing=False
    )
    plan, numbers = book.long_plan(params)
    n = len(lab_plan.LONG_PLAN)
    assert plan["run"].tolist() == [book.title(name) for name in lab_plan.LONG_PLAN]  # display names
    assert set(plan["trained"]) == {"—"} and set(plan["machine"]) == {""}
    none = {"variant_runs": "0", "variant_hours": "0.0"}  # no claim variant saved either
    assert numbers == {"done": "0", "runs": f"{n}", "hours": "0.0", "seed_runs": "0", "seed_hours": "0.0"} | none
    rows = plan.set_index("run").rename(index={book.title(name): name for name in lab_plan.LONG_PLAN})
    assert (
        rows.loc["quadratic_aniso_9h", "estimate (CPU-hours)"]
        == f"{lab_plan.estimate_seconds('quadratic_aniso_9h', 'long') / 3600:.1f}"
    )

    real = tables.collect
    COLS = ["status", "epochs", "train_seconds", "cpu_seconds", "wall_time_device", "precision"]

    def two_saved(results_dir, preset, names=None, seed=0, **kw):  # two runs saved
        frame = real(results_dir, preset, names, seed=seed, **kw).astype({"wall_time_device": object, "precision": object})
        if preset == "long":
            done = frame["experiment"] == "learned_9h"
            frame.loc[done, COLS] = ["complete", 23, 5400.0, 5400.0, "CPU (1 threads)", "bf16"]
            done = frame["experiment"] == "resnet18"  # 0.75 h on 2 threads: 1.5 CPU-hours
            frame.loc[done, COLS] = ["complete", 23, 2700.0, 5400.0, "CPU (2 threads)", None]
        elif seed in (1, 2):  # and two further budget seeds of vit, 0.5 h each
            done = frame["experiment"] == "vit"
            frame.loc[done, COLS] = ["complete", 6, 1800.0, 1800.0, "CPU (1 threads)", "float32"]
        if preset == "budget" and seed in (0, 1):  # and two runs of a claim variant, 1 h each
            done = frame["experiment"] == "quadratic_re_9h"
            frame.loc[done, COLS] = ["complete", 4, 3600.0, 3600.0, "CPU (1 threads)", "float32"]
        return frame

    monkeypatch.setattr(tables, "collect", two_saved)
    plan, numbers = book.long_plan(params)
    rows = plan.set_index("run").rename(index={book.title(name): name for name in lab_plan.LONG_PLAN})
    assert rows.loc["learned_9h", "trained"] == "1.5 CPU-hours, bf16"  # with its precision
    assert rows.loc["resnet18", "trained"] == "1.5 CPU-hours, precision not recorded"
    assert rows.loc["learned_9h", "machine"] == "CPU (1 thread)"  # never "1 threads"
    assert rows.loc["resnet18", "machine"] == "CPU (2 threads)"
    assert rows.loc["learned_9h_pos_init", "machine"] == ""
    variants = {"variant_runs": "2", "variant_hours": "2.0"}  # the grid's seeds leave the variant out
    assert numbers == {"done": "2", "runs": f"{n}", "hours": "3.0", "seed_runs": "2", "seed_hours": "1.0"} | variants
    # a claim judged over seeds is named apart from those the run informs now
    assert "HA gains" in rows.loc["learned_content_9h_ha", "at budget until 3 seeds a side"]
    assert "HA gains" not in rows.loc["learned_content_9h_ha", "claims it informs"]


def test_precision_in_words_says_every_stretch_and_what_an_old_run_did_not_record():
    """Issue 48: a run resumed on another machine may change its precision; the history records it per epoch
    and the provenance says each stretch. A run saved before that records its last stretch's only."""
    from attnlib.results.tables import precision_of, precision_words

    assert precision_of([{"bf16": 1}] * 20 + [{"bf16": 0}] * 40) == "bf16 for epochs 1–20, float32 for epochs 21–60"
    assert precision_of([{"bf16": 0}] * 3) == "float32" and precision_of([{"epoch": 1}]) == ""
    assert precision_words({"precision": "bf16", "bf16": False}) == "bf16"  # the history's word wins
    old = {"bf16": False, "resumed_from": "last.pt (epoch 46, step 296)"}  # 0-based epoch, mid-epoch
    assert precision_words(old) == "float32 from within epoch 47 on; earlier epochs not recorded"
    assert precision_words({"bf16": True, "resumed_from": None}) == "bf16" and precision_words({}) == ""
