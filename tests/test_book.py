"""The book: jupytext pairs in sync and without outputs, every chapter runs under papermill at the smoke
preset (synthetic data) into a temporary folder, bad parameters stop a chapter in the cell right after
its parameters with one line, and the book builds with warnings as errors. Its reliability tests (issue 9):
damaged and stale results in the book's tables, bad step counts of a chapter."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import jupytext
import nbformat
import papermill
import pytest
import torch
import yaml
from helpers import run_notebook

import attnbook as book
from attnbook import display
from attnbook.display import png
from attnbook.params import check_no_unknown_parameters, unknown_parameters
from attnbook.phrases import MISSING, NOT_MEASURED, NOT_USED, escaped
from attnlib import experiments
from attnlib.analysis.literature import RE, REFERENCES, reference_value
from attnlib.env import TRAIN_MISSING_ENV
from attnlib.lab.run import run_or_load
from attnlib.measures import attention_peaks
from attnlib.results.load import DamagedResult, MissingResult
from attnlib.results.tables import table3

ROOT = Path(__file__).resolve().parent.parent
BOOK = ROOT / "book"
CHAPTERS = sorted(p.stem for p in BOOK.glob("[0-9][0-9]_*.py"))
SMOKE = {"preset": "smoke", "device": "cpu", "train_missing": True}


def _cells(nb) -> list[tuple[str, str, list[str]]]:
    return [(c.cell_type, c.source.strip(), sorted(c.metadata.get("tags", []))) for c in nb.cells]


def _parameters_index(nb) -> int:
    tagged = [i for i, c in enumerate(nb.cells) if "parameters" in c.metadata.get("tags", [])]
    assert len(tagged) == 1, "exactly one cell must be tagged 'parameters'"
    return tagged[0]


def _execute(chapter: str, parameters: dict, out: Path):
    return run_notebook(BOOK / f"{chapter}.ipynb", out, parameters=parameters, cwd=str(ROOT))


# ------------------------------------------------------------------------------------------ structure
def test_chapters_exist():
    assert CHAPTERS == [
        "00_intro",
        "01_theory",
        "02_reproduction",
        "03_san_vit",
        "04_hierarchical",
        "05_appendix",
    ]


@pytest.mark.parametrize("chapter", CHAPTERS)
def test_pair_in_sync_without_outputs(chapter):
    script = jupytext.read(BOOK / f"{chapter}.py")
    notebook = nbformat.read(BOOK / f"{chapter}.ipynb", as_version=4)
    assert _cells(script) == _cells(notebook), (
        f"book/{chapter}.py and book/{chapter}.ipynb differ: run `jupytext --sync book/{chapter}.py`"
    )
    for cell in notebook.cells:
        if cell.cell_type == "code":
            assert cell.outputs == [] and cell.execution_count is None, f"book/{chapter}.ipynb holds outputs"
    for nb in (script, notebook):
        assert nb.metadata["kernelspec"]["name"] == "python3"
        assert nb.metadata["jupytext"]["formats"] == "ipynb,py:percent"


@pytest.mark.parametrize("chapter", CHAPTERS)
def test_headings_and_toggles_read_as_a_paper(chapter):
    """No heading hides as a comment in a code cell (the [Re] Fig. 8 section of chapter 4 did: its title and
    paragraph folded away as code), and no two toggles ("Show code cell source", hide-input) stand with no
    text between them (issue 49): a cell whose output is only glue is removed whole (remove-input)."""
    nb = nbformat.read(BOOK / f"{chapter}.ipynb", as_version=4)
    kinds = []
    for cell in nb.cells:
        if cell.cell_type == "code":
            headings = [line for line in cell.source.splitlines() if re.match(r"# #+ \S", line)]
            assert not headings, f"book/{chapter}: a Markdown heading in a code cell: {headings[0]!r}"
        tags = cell.metadata.get("tags", [])
        kinds.append("toggle" if "hide-input" in tags else "" if "remove-input" in tags else cell.cell_type)
    shown = [k for k in kinds if k]  # what a reader sees, in order
    pairs = [i for i in range(len(shown) - 1) if shown[i] == shown[i + 1] == "toggle"]
    assert not pairs, f"book/{chapter}: two code toggles with no text between them ({len(pairs)} places)"


@pytest.mark.parametrize("chapter", CHAPTERS)
def test_parameters_then_validation(chapter):
    nb = nbformat.read(BOOK / f"{chapter}.ipynb", as_version=4)
    i = _parameters_index(nb)
    assert "book.check_params(" in nb.cells[i + 1].source, "the cell after the parameters must validate them"
    assert "import" not in nb.cells[i].source


def test_single_configuration_and_toc():
    assert (ROOT / "_config.yml").is_file()
    assert not (BOOK / "_config.yml").exists(), "the book folder must not carry a second configuration"
    config = yaml.safe_load((ROOT / "_config.yml").read_text())
    assert config["execute"]["execute_notebooks"] == "force"
    assert config["only_build_toc_files"] is True
    assert "attnbook.sphinx" in config["sphinx"]["extra_extensions"]
    toc = yaml.safe_load((BOOK / "_toc.yml").read_text())
    listed = [toc["root"]] + [c["file"] for part in toc["parts"] for c in part["chapters"]]
    assert [c for c in listed if c in CHAPTERS] == CHAPTERS
    numbered = [c["file"] for part in toc["parts"] if part.get("numbered") for c in part["chapters"]]
    assert numbered == CHAPTERS[1:]  # chapters 1-5 numbered (the introduction, the root, and references not)
    for name in listed:
        assert (BOOK / f"{name}.ipynb").exists() or (BOOK / f"{name}.md").exists(), name


# ------------------------------------------------------------------------------------------ parameters
def test_check_params_resolves_defaults(monkeypatch, tmp_path):
    monkeypatch.delenv(TRAIN_MISSING_ENV, raising=False)
    p = book.check_params(heads=16, preset="smoke", data=None, device="auto", seed=0, results_dir=tmp_path)
    assert (p.heads, p.preset, p.data, p.device, p.train_missing) == (16, "smoke", None, "cpu", True)
    assert p.results_dir == tmp_path.resolve()
    monkeypatch.setenv(TRAIN_MISSING_ENV, "0")  # what the book build sets
    assert book.check_params(preset="budget").train_missing is False
    assert book.check_params(preset="budget", train_missing=True).train_missing is True
    assert book.check_params(preset="budget", data="synthetic:8:4").data == "synthetic:8:4"


@pytest.mark.parametrize(
    ("kwargs", "parameter", "allowed"),
    [
        ({"heads": 7}, "heads", "9, 16"),
        ({"heads": True}, "heads", "9, 16"),
        ({"heads": 16.0}, "heads", "9, 16"),
        ({"seed": 1.0}, "seed", "integer"),
        ({"counts": {"steps": 600.0}}, "steps", "integer"),
        ({"preset": "huge"}, "preset", ", ".join(experiments.PRESETS)),
        ({"seed": -1}, "seed", "integer"),
        ({"device": "tpu"}, "device", "cpu"),
        ({"data": "/no/such/folder"}, "data", "synthetic"),
        ({"data": "synthetic:x"}, "data", "synthetic"),
        ({"train_missing": "yes"}, "train_missing", "True"),
        ({"counts": {"steps": 0}}, "steps", "integer"),
    ],
)
def test_check_params_rejects(kwargs, parameter, allowed):
    with pytest.raises(book.ParameterError) as err:
        book.check_params(**kwargs)
    assert err.value.parameter == parameter
    assert str(err.value).startswith(f"{parameter}: got ")
    assert allowed in str(err.value)
    assert err.value._render_traceback_() == [f"ParameterError: {err.value}"]  # one line in a notebook


def test_unknown_parameters_from_the_cells_run():
    """What papermill ran: the chapter's parameters cell, then its injected cell (papermill's header);
    injected names that the parameters cell does not assign are unknown."""
    parameters = 'preset = "budget"  # paper | budget\nseed: int = 0\nresults_dir = None\n'
    injected = '# Parameters\nheads = 7\npreset = "smoke"\n'
    history = ["", "import attnbook as book", parameters, injected, "params = book.check_params()"]
    assert unknown_parameters(history) == (["heads"], ["preset", "seed", "results_dir"])
    assert unknown_parameters(history[:3]) == ([], [])  # not run by papermill: nothing to check
    injected_known = "# Parameters\nseed = 3\n"
    assert unknown_parameters(["", parameters, injected_known]) == (
        [],
        ["preset", "seed", "results_dir"],
    )
    check_no_unknown_parameters()  # outside a kernel: checks nothing


def test_references_have_sources():
    for r in REFERENCES:
        assert r.where and r.kind in ("printed", "claimed", "run-log", "derived")
        assert r.experiment in experiments.EXPERIMENTS
        assert (0 < r.value <= 1) if r.quantity == "test_accuracy" else r.value > 1000
    assert reference_value("learned_content_9h_ha", RE, "test_accuracy") == pytest.approx(0.91)
    assert reference_value("vit", RE, "test_accuracy") != reference_value("vit", RE, "test_accuracy")


@pytest.mark.slow
def test_learned_convolution_lands_on_the_kernel_grid():
    """The theory chapter's last experiment: with weight decay on the filters, gradient descent puts one
    quadratic head on every tap of a 3x3 kernel (``attnlib.theory.learn_convolution``)."""
    from attnlib.theory import learn_convolution

    torch.manual_seed(0)
    conv = torch.nn.Conv2d(3, 8, 3, padding=1)
    kernel = conv.weight.detach().clone()
    fit = learn_convolution(conv, steps=600, seed=0)  # on one thread itself (tiny tensors)
    distance = torch.cdist(fit.centers[-1], fit.targets)
    assert len(set(distance.argmin(1).tolist())) == 9  # every tap has a head
    assert distance.min(1).values.max() < 0.3
    assert fit.loss[-1] < 1e-3 * fit.loss[0]
    assert fit.centers.shape == (len(fit.steps), 9, 2) and fit.steps[-1] == 600
    assert fit.centers.dtype == torch.float64  # the run's dtype (float64: reproducible across CPUs)
    # the caller's conv untouched
    assert conv.weight.dtype == torch.float32 and torch.equal(conv.weight, kernel)


def test_viz_figures_are_labelled():
    import matplotlib

    matplotlib.use("Agg")
    import numpy as np

    from attnbook import viz

    rng = np.random.default_rng(0)
    rows = rng.dirichlet(np.ones(16), size=(2, 3))  # (layers, heads, N = 4 x 4)
    fig = viz.attention_grid(rows, (4, 4), (1, 2), title="t")
    panels = [a for a in fig.axes if a.get_visible() and a.images]
    assert len(panels) == 2 * (3 + 1) and fig._suptitle.get_text() == "t"
    weights = [rng.dirichlet(np.ones(9), size=(4, 4)).transpose(2, 0, 1) for _ in range(2)]  # (K², H, W)
    assert len([a for a in viz.window_maps(weights, (0.5, 0.5), title="w").axes if a.images]) == 2
    means = viz.window_means([rng.random((3, 9))] * 2, title="m")
    assert len([a for a in means.axes if a.get_visible() and a.images]) == 8
    traj = rng.normal(size=(5, 2, 9, 2))
    fig = viz.centre_trajectories(traj, title="c", targets=np.zeros((1, 2)))
    assert all(a.get_xlabel() and a.get_ylabel() for a in fig.axes)
    fig = viz.quadratic_centres(traj[-1], np.tile(np.eye(2), (2, 9, 1, 1)), title="q")
    assert all(a.get_xlabel() == "column shift δ₂ (pixels)" for a in fig.axes if a.get_visible())
    fig = viz.error_vs_alpha(np.arange(1.0, 5.0), {"a": np.exp(-np.arange(1.0, 5.0))}, title="e")
    assert fig.axes[0].get_yscale() == "log" and "α" in fig.axes[0].get_xlabel()
    assert png(fig).format == "png"
    import pandas as pd

    calm = pd.DataFrame(
        {"epoch": [1, 2], "train_loss": [2.0, 1.5], "test_loss": [1.9, 1.4], "test_acc": [0.3, 0.4]}
    )
    blown = calm.assign(test_loss=[4e24, 1.4])  # one blow-up must not flatten the curve
    fig = viz.training_curves({"calm": calm, "blown": blown}, title="curves")
    loss_axes = [a for a in fig.axes if a.get_ylabel().startswith("loss")]
    assert [a.get_yscale() for a in loss_axes] == ["linear", "log"]


# ------------------------------------------------------------------------------------------ execution
@pytest.fixture(scope="module", autouse=True)
def one_thread_kernels():
    """Kernels (children of this process) inherit the environment: one OpenMP thread each. Smoke-sized
    tensors gain nothing from more, and on shared cores extra threads only spin."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("OMP_NUM_THREADS", "1")
        yield


@pytest.fixture(scope="module")
def results_dir(tmp_path_factory) -> Path:
    """One results folder shared by the chapters, so each smoke run trains once."""
    return tmp_path_factory.mktemp("results")


@pytest.mark.slow
def test_kernel_is_this_interpreter_over_ipc(tmp_path):
    """The tests' kernel is this interpreter, and it listens on socket files in the test's folder (no TCP
    port another process could take before the kernel binds it)."""
    shown = "from ipykernel.kernelapp import IPKernelApp as K; print(sys.executable, K.instance().transport, K.instance().ip)"
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(f"import sys; {shown}")])
    nb.metadata["kernelspec"] = {"name": "python3", "language": "python", "display_name": "Python 3"}
    executable, transport, ip = run_notebook(nb, tmp_path / "k.ipynb").cells[0].outputs[0]["text"].split()
    assert Path(executable).resolve() == Path(sys.executable).resolve()
    assert (transport, ip) == ("ipc", str(tmp_path / "kernel"))


@pytest.mark.slow
@pytest.mark.parametrize("chapter", CHAPTERS)
def test_chapter_runs_at_smoke(chapter, results_dir, tmp_path):
    declared = papermill.inspect_notebook(str(BOOK / f"{chapter}.ipynb"))
    parameters = {k: v for k, v in {**SMOKE, "results_dir": str(results_dir)}.items() if k in declared}
    if "preset" in declared:
        assert all(p.data.startswith("synthetic") for p in experiments.PRESET_TABLE["smoke"].values())
    nb = _execute(chapter, parameters, tmp_path / f"{chapter}.ipynb")
    outputs = [o for c in nb.cells if c.cell_type == "code" for o in c.outputs]
    assert not [o for o in outputs if o.get("output_type") == "error"]
    glued = [
        o for o in outputs if any(k.startswith("application/papermill.record") for k in o.get("data", {}))
    ]
    prose = "".join(c.source for c in nb.cells if c.cell_type == "markdown")
    needed = set(re.findall(r"\{glue:text\}`([a-z0-9_]+)`", prose))
    names = {o["metadata"]["scrapbook"]["name"] for o in glued}
    assert needed <= names, f"glue keys used in the prose but never glued: {needed - names}"
    texts = {
        o["metadata"]["scrapbook"]["name"]: str(o["data"].get("application/papermill.record/text/plain", ""))
        for o in glued
    }
    sentences = {k: v for k, v in texts.items() if len(v) > 100 or re.search(r"\w[.;:] [A-Z]", v)}
    assert not sentences, f"glue carries numbers and short verdicts, the prose its sentences: {sentences}"
    if (
        chapter != "03_san_vit"
    ):  # figures as PNG (shown, or glued for a numbered figure), whatever the backend
        assert any(k.endswith("image/png") for o in outputs for k in o.get("data", {}))
    assert not any(str(o.get("data", {}).get("text/plain", "")).startswith("<Figure") for o in outputs)
    if chapter in ("02_reproduction", "04_hierarchical", "05_appendix"):  # trained at smoke: no gaps
        assert not any(MISSING in str(o.get("data", {}).get("text/markdown", "")) for o in outputs)


@pytest.mark.slow
@pytest.mark.parametrize(
    ("chapter", "parameters", "message"),
    [
        ("04_hierarchical", {"heads": 7}, "heads: got 7; allowed: 9, 16"),
        (
            "04_hierarchical",
            {"preset": "huge"},
            "preset: got 'huge'; allowed: paper, budget, smoke, long, budget30, tokens16",
        ),
        (
            "04_hierarchical",
            {"data": "/no/such/folder"},
            "data: got '/no/such/folder'; allowed: None (the preset's data), 'synthetic', "
            "'synthetic:N_TRAIN:N_TEST' or a CIFAR-10 folder (no such folder)",
        ),
        ("01_theory", {"steps": -1}, "steps: got -1; allowed: an integer >= 1"),
        # papermill passes -p heads 16.0 as a float: integers must be integers
        ("04_hierarchical", {"heads": 16.0}, "heads: got 16.0; allowed: 9, 16"),
        (  # synthetic data: the check must not depend on a CIFAR-10 copy beside the clone
            "05_appendix",
            {"query": 2.0, "data": "synthetic"},
            "query: got 2.0; allowed: 0, 1, 2, 3 (the saved query pixels)",
        ),
        # a parameter the chapter does not have (papermill only warns "Passed unknown parameter")
        (
            "02_reproduction",
            {"heads": 7},
            "heads: not a parameter of this chapter (got 7); its parameters are preset, data, device, seed, "
            "train_missing, results_dir, long_preset",
        ),
    ],
)
def test_bad_parameter_stops_right_after_the_parameters(chapter, parameters, message, tmp_path):
    out = tmp_path / "out.ipynb"
    results = tmp_path / "results"
    if "results_dir" in papermill.inspect_notebook(str(BOOK / f"{chapter}.ipynb")):
        parameters = {**parameters, "results_dir": str(results)}
    with pytest.raises(papermill.PapermillExecutionError) as err:
        _execute(chapter, parameters, out)
    assert not results.exists()  # nothing written
    assert err.value.ename == "ParameterError"
    assert err.value.evalue == message
    assert err.value.traceback == [f"ParameterError: {message}"]  # one line, no traceback
    nb = nbformat.read(out, as_version=4)
    code = [c for c in nb.cells if c.cell_type == "code"]  # papermill adds markdown cells around the error
    i = _parameters_index(nbformat.v4.new_notebook(cells=code))
    assert "injected-parameters" in code[i + 1].metadata.get("tags", [])
    failed = [j for j, c in enumerate(code) if any(o.get("output_type") == "error" for o in c.outputs)]
    assert failed == [i + 2]
    assert all(c.execution_count is None for c in code[i + 3 :])


BUILT_BOOK_ENV = "ATTNLIB_BUILT_BOOK"  # `make test` builds the book once (-W) and names its html folder here


def _built_book(tmp_path) -> Path:
    """The html folder of a book built with warnings as errors: the one `make test` has just built (so that
    `make check-book` after it opens that build instead of building the book a second time), else a fresh
    build in ``tmp_path``."""
    built = os.environ.get(BUILT_BOOK_ENV)
    if built:
        html = Path(built)
        assert (html / ".attnlib-built").is_file(), f"{BUILT_BOOK_ENV}={built}: no finished `make book` there"
        return html
    executable = Path(sys.executable).with_name("jupyter-book")
    command = [str(executable) if executable.exists() else shutil.which("jupyter-book")]
    command += ["build", "book", "-W", "-n", "--keep-going", "--path-output", str(tmp_path)]
    env = {k: v for k, v in os.environ.items() if k != TRAIN_MISSING_ENV}  # the build sets it to 0 itself
    result = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=900)
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-4000:]
    return tmp_path / "_build" / "html"


@pytest.mark.slow
def test_book_builds_with_warnings_as_errors(tmp_path):
    html = _built_book(tmp_path)
    for chapter in CHAPTERS:
        page = (html / f"{chapter}.html").read_text()
        assert "{glue:" not in page and ":::{" not in page, f"{chapter}: unrendered glue or admonition"
        assert "Traceback" not in page
    assert "Cordonnier" in (html / "references.html").read_text()
    assert not (ROOT / "book" / "_build").exists()
    # self-contained: every script, style sheet and image is a local file; MathJax is served from the book
    for page in html.glob("*.html"):
        assets = re.findall(r'<(?:script|link|img)\b[^>]*?\b(?:src|href)="([^"]+)"', page.read_text())
        remote = [a for a in assets if re.match(r"^(?:[a-z]+:)?//", a)]
        assert not remote, f"{page.name} loads from a remote host: {remote}"
    assert 'src="_static/mathjax/tex-chtml.js' in (html / "01_theory.html").read_text()
    assert (html / "_static" / "mathjax" / "tex-chtml.js").is_file()
    assert list((html / "_static" / "mathjax" / "output" / "chtml" / "fonts").rglob("*.woff"))


def test_epoch_range_names_the_shortest_and_longest_protocol(monkeypatch):
    from attnlib import experiments

    budget = sorted({p.train.epochs for p in experiments.PRESET_TABLE["budget"].values()})
    assert len(budget) > 1 and book.epoch_range("budget") == f"{budget[0]}–{budget[-1]}"
    assert book.epoch_range("smoke") == "1"  # one count: no range
    table = {"only": experiments.PRESET_TABLE["budget"]["resnet"]}
    monkeypatch.setitem(experiments.PRESET_TABLE, "budget", table)
    assert book.epoch_range("budget") == str(table["only"].train.epochs)


def _frame(rows):
    import pandas as pd

    return pd.DataFrame(rows, columns=["experiment", "status", "accuracy"])


def test_below_target_names_only_saved_attention_models():
    from attnlib import experiments

    low = experiments.BUDGET_TARGET - 0.01
    frame = _frame(
        [
            ("resnet18", "complete", low),  # the baseline is never held to the attention target
            ("learned_9h", "complete", low),
            ("learned_16h", "missing", low),
            ("vit", "complete", experiments.BUDGET_TARGET),
        ]
    )
    assert book.below_target(frame, "budget") == [("learned_9h", low)]
    assert book.below_target(frame, "paper") == []  # the target is the budget preset's


def test_attention_peaks_measure_distance_from_uniform():
    from types import SimpleNamespace

    import numpy as np

    keys = 16
    flat = np.full((2, 3, 4, 2, keys), 1 / keys)  # (images, layers, heads, queries, keys)
    sharp = flat.copy()
    sharp[1, 2, 3, 0] = np.eye(keys)[5]  # one head of layer 3 attends to one key, for one image and query
    runs = {
        "learned_9h": SimpleNamespace(attention={"rows": flat}),
        "learned_16h": SimpleNamespace(attention={"rows": sharp}),
        "san_pairwise": SimpleNamespace(attention={"weights_0": np.ones(3)}),  # no token maps
        "vit": None,
    }
    assert np.allclose(attention_peaks(runs["learned_9h"]), [1, 1, 1])
    assert np.allclose(attention_peaks(runs["learned_16h"]), [1, 1, keys])
    assert attention_peaks(runs["san_pairwise"]) is None and attention_peaks(None) is None
    assert book.peak_range(attention_peaks(runs["learned_9h"])) == "1.00×"
    assert book.peak_range(attention_peaks(runs["learned_16h"])) == "1.00–16×"
    assert book.peak_range(None) == "—"  # a model without token maps (or not saved): the table's mark


def _saved_hours(preset: str, seed: int, names=None) -> tuple[int, float]:
    from attnlib.results.tables import collect

    frame = collect(ROOT / "results", preset, names, seed=seed)
    done = frame[frame["status"] == "complete"]
    return len(done), done["cpu_seconds"].sum() / 3600


def test_readme_quotes_the_saved_budget_grid():
    """The README's CPU-hours of the budget grid and of its extra seeds are those of the saved results."""
    readme = " ".join((ROOT / "README.md").read_text().split())
    runs, hours = _saved_hours("budget", 0)
    quoted = re.search(r"\((\d+) seed-0 runs\): \*\*(\d+\.\d\d) CPU-hours\*\*", readme)
    assert quoted, "the README must quote the budget grid's CPU time as '(N seed-0 runs): **H CPU-hours**'"
    assert (int(quoted[1]), float(quoted[2])) == (runs, round(hours, 2))
    seeds = {int(p.name.rsplit("seed", 1)[1]) for p in (ROOT / "results").glob("*/budget-seed*")}
    extra = [_saved_hours("budget", s) for s in sorted(seeds)]
    quoted = re.search(r"(\d+\.\d\d) CPU-hours more \((\d+) runs\b", readme)
    assert quoted, "the README must quote the extra seeds' CPU time as 'H CPU-hours more (N runs)'"
    assert (float(quoted[1]), int(quoted[2])) == (
        round(sum(h for _, h in extra), 2),
        sum(n for n, _ in extra),
    )
    variants = [n for n in experiments.names(variants=True) if n not in experiments.names()]
    saved = [_saved_hours("budget", s, variants) for s in sorted(seeds | {0})]
    quoted = re.search(r"(\d+\.\d\d) CPU-hours more \((\d+) variant runs\)", readme)
    assert quoted, "the README must quote the variants' CPU time as 'H CPU-hours more (N variant runs)'"
    assert (float(quoted[1]), int(quoted[2])) == (
        round(sum(h for _, h in saved), 2),
        sum(n for n, _ in saved),
    )


def test_one_run_is_one_reference():
    """A logged run is attached to one row only, so that comparisons of model order never count a pair that
    rests on one number twice (issue 15: the [Re] 93.65% quadratic run is the non-isotropic row's)."""
    runs = [(r.source, r.where) for r in REFERENCES if r.quantity == "test_accuracy"]
    assert len(runs) == len(set(runs))
    assert reference_value("quadratic_aniso_9h", RE, "test_accuracy") == pytest.approx(0.9365)
    assert reference_value("quadratic_iso_9h", RE, "test_accuracy") != reference_value(
        "quadratic_iso_9h", RE, "test_accuracy"
    )  # NaN: no [Re] run of the isotropic model was found
    assert "[Re]" in experiments.get("quadratic_aniso_16h").source  # their non-isotropic 16-head run


def test_appendix_b_follows_the_report():
    """The appendix's attention maps follow the [Re] report's appendix: each section names its figure ([Re] Fig.
    B.1-B.10), in the report's order."""
    report_order = [
        "learned_content_9h",
        "learned_9h",
        "learned_content_9h_ha",
        "learned_content_16h",
        "learned_16h",
        "learned_content_16h_ha",
        "san_pairwise_ha",
        "san_patchwise_ha",
        "vit",
        "vit_ha",
    ]
    text = (BOOK / "05_appendix.py").read_text()
    found = re.findall(
        r"### [^\n]* \(\[Re\] Fig\. (B\.\d+)\)\n\n# %% tags=\[\"hide-input\"\]\n"
        r"book\.show_attention\((?:\s*#[^\n]*)?\s*runs\[\"(\w+)\"\]",
        text,
    )
    assert found == [(f"B.{i}", name) for i, name in enumerate(report_order, 1)]
    assert len(re.findall(r"\(\[Re\] Fig\. B\.\d+\)", text)) == 10  # extra figures get other labels


def test_panels_share_one_colour_scale_with_a_bar():
    """Panels compared side by side share one colour scale of multiples of uniform attention (log, centred
    on 1: a uniform map sits at the scale's middle), shown by one colour bar; weights of both signs (SAN
    patchwise) get a diverging scale symmetric around 0."""
    import matplotlib

    matplotlib.use("Agg")
    import numpy as np

    from attnbook import viz

    rows = np.full((2, 3, 16), 1 / 16)
    rows[0, 0] = np.eye(16)[5]  # one sharp head; the others uniform
    fig = viz.attention_grid(rows, (4, 4), (1, 2))
    images = [im for a in fig.axes for im in a.images]
    assert len(images) == 2 * (3 + 1)
    assert {im.get_clim() for im in images} == {(1 / 16, 16.0)}  # the sharp head: 16 × uniform
    uniform = images[1]  # head 2 of layer 1: uniform, drawn as 1 × uniform, the log scale's centre
    np.testing.assert_allclose(uniform.get_array(), 1.0)
    assert uniform.norm(1.0) == 0.5
    bars = [a for a in fig.axes if a.get_ylabel() == "multiple of uniform attention 1/16 (log scale)"]
    assert len(bars) == 1 and not fig._suptitle  # the caption, not a title, names the figure
    weights = [
        np.broadcast_to(np.linspace(low, high, 9)[:, None, None], (9, 2, 2))
        for low, high in ((-2, 1), (0, 0.5))
    ]
    fig = viz.window_maps(weights, (0.5, 0.5), layer_names=["application 1", "application 2"])
    clims = {im.get_clim() for a in fig.axes for im in a.images}
    assert clims == {(-2.0, 2.0)} and fig.axes[0].images[0].get_cmap().name == viz.DIVERGING
    assert [a.get_title() for a in fig.axes if a.images] == ["application 1", "application 2"]


def _results_frame():
    """Rows of ``attnlib.tables.frame``: two complete, one stale, one missing."""
    import pandas as pd

    frame = pd.DataFrame(
        [
            ("quadratic_iso_9h", "complete", 0.49, 235_574, 1.8),
            ("learned_content_9h", "complete", 0.478, 555_466, 4.57),
            ("learned_content_9h_ha", "stale", None, None, None),
            ("resnet18", MISSING, None, None, None),
        ],
        columns=["experiment", "status", "accuracy", "params", "wall_time_ms"],
    )
    frame["pair"] = [book.title(experiments.get(n).baseline or n) for n in frame["experiment"]]
    frame["variant"] = ["HA" if experiments.get(n).baseline else "normal" for n in frame["experiment"]]
    return frame


def _seeds_frame():
    """Rows of ``book.table3_frame``: seed statistics (one seed, two, none) and wall times measured together."""
    import pandas as pd

    return pd.DataFrame(
        {
            "experiment": ["vit", "vit_ha", "san_pairwise_ha"],
            "pair": ["ViT", "ViT", "SAN pairwise"],
            "variant": ["normal", "HA", "HA"],
            "status": ["complete", "complete", MISSING],
            "seeds": [1, 2, 0],
            "accuracy": [0.4337, 0.479, None],
            "accuracy_sd": [None, 0.001, None],
            "params": [665_418, 172_362, None],
            "wall_time_measured": [True, True, False],
            "wall_time_ms": [2.888, 2.362, None],
            "time_ratio": [None, 1.0213, None],
        }
    )


def test_results_and_literature_tables_read_like_the_report():
    frame = _results_frame()
    table = book.results_table(frame, "budget")  # Table 1: units in the grouped headers, numbers in the cells
    assert table.columns.tolist() == [
        ("", "model"),
        ("", "heads"),
        ("test accuracy (%)", "budget"),
        ("trainable parameters", "budget"),
        ("wall time, median", "ms"),
    ]  # one wall-time statistic in both tables, named in the header
    assert table.iloc[0].tolist() == ["SA quadratic (isotropic)", "9", "49.0", "235,574", "1.80"]
    assert table.iloc[2, :2].tolist() == ["SA learned 2D + content, HA", "9"]
    assert table.iloc[2, 2] == NOT_USED["stale"] and table.iloc[3].tolist()[1:3] == ["—", "—"]
    pairs = book.results_table(
        frame, "budget", pairs=True, paper_params={n: 2e6 for n in frame["experiment"]}
    )
    assert pairs.columns.tolist() == [
        ("", "model"),
        ("", "variant"),
        ("test accuracy (%)", "budget"),
        ("trainable parameters", "budget"),
        ("trainable parameters", "paper"),
        ("wall time, median", "ms"),
    ]
    assert pairs.iloc[2, :2].tolist() == ["SA learned 2D + content, 9 heads", "HA"]
    assert pairs.iloc[0, 2:].tolist() == ["49.0", "235,574", "2,000,000", "1.80"]  # whole counts
    assert pairs["trainable parameters", "paper"].eq("2,000,000").all()
    assert pairs.iloc[2, 2] == NOT_USED["stale"] and pairs.iloc[3, 3] == "—"  # a missing run: "—"
    shown = book.results_table(_seeds_frame(), "smoke", pairs=True)  # Table 3 with seeds
    assert shown.columns.tolist()[2:] == [
        ("test accuracy (%), smoke", "mean ± sd (n)"),
        ("trainable parameters", "smoke"),
        ("wall time, median", "ms"),
        ("wall time, median", "HA / model"),
    ]
    assert shown.iloc[:, 2:].values.tolist() == [
        ["43.4 (1)", "665,418", "2.89", ""],
        ["47.9\u00a0±\u00a00.1 (2)", "172,362", "2.36", "1.02×"],  # a number does not break across lines
        ["—", "—", NOT_MEASURED, ""],
    ]
    # a ratio whose per-round quartiles hold 1 is starred (its direction not resolved), one beside 1 is not
    for quartiles, cell in [((0.86, 1.09), "1.02×*"), ((1.01, 1.04), "1.02×")]:
        frame = _seeds_frame().assign(
            time_ratio_p25=[None, quartiles[0], None], time_ratio_p75=[None, quartiles[1], None]
        )
        assert book.results_table(frame, "smoke", pairs=True).iloc[1, -1] == cell
    names = ["resnet18", "quadratic_iso_9h", "quadratic_aniso_9h", "san_pairwise", "learned_content_9h_ha"]
    literature = book.literature_table(names)  # laid out as Table 1: units in the grouped headers
    accuracy, params = "test accuracy (%)", "trainable parameters"
    assert literature.columns.tolist()[:2] == [("", "model"), ("", "heads")]
    assert {c[0] for c in literature.columns[2:]} == {accuracy, params}
    by_model = literature.set_index(("", "model"))
    assert "SAN pairwise" not in set(by_model.index)  # no figure found: no row of dashes
    iso = by_model.loc["SA quadratic (isotropic)"]
    assert iso[accuracy, "[Re]"] == "—" and iso[accuracy, "Cordonnier et al."] == "93.8*"
    aniso = by_model.loc["SA quadratic (non-isotropic)"]
    assert aniso[accuracy, "[Re]"] == "93.7†" and aniso[params, "[Re]"] == "11,124,606‡"  # the one logged run
    unit = re.compile(r"%|\d\s*M$")
    assert not any(unit.search(str(v)) for v in literature.to_numpy().ravel())
    only_re = book.literature_table(names, paper=False)
    assert not any("Cordonnier" in c[1] for c in only_re.columns)
    pairs = book.literature_table(["vit", "vit_ha", "san_pairwise"], pairs=True, paper=False)
    assert pairs.columns.tolist()[:2] == [("", "model"), ("", "variant")] and len(pairs) == 2
    assert book.literature_table(["san_pairwise"]).empty
    caption = book.literature_caption(names, "Figures")
    assert "† run-log" in caption and "‡ derived" in caption and "* claimed" in caption


def test_results_table_cells_hold_no_units():
    """The units of Tables 1 and 3 are in their headers; the cells hold numbers (or the words of a missing
    result), never "49.0%", "0.24 M", "1.80 ms" or "(n = 2)"."""
    paper = {n: 2e6 for n in _results_frame()["experiment"]}
    tables = [
        book.results_table(_results_frame(), "budget"),
        book.results_table(_results_frame(), "budget", pairs=True, paper_params=paper),
        book.results_table(_seeds_frame(), "smoke", pairs=True),
    ]
    unit = re.compile(r"%|\d\s*(M|ms)$|\(n = ")
    for table in tables:
        numbers = table.drop(columns=[c for c in table.columns if c[0] == ""])  # not model / heads / variant
        assert numbers.map(lambda v: bool(unit.search(v))).sum().sum() == 0, numbers
        assert numbers.map(lambda v: v[:1].isdigit()).any().all()  # every column shows numbers
        assert {c[0] for c in numbers.columns} <= {
            "test accuracy (%)", "test accuracy (%), smoke", "trainable parameters", "wall time, median"
        }  # fmt: skip


def test_rank_counts_and_flips_table():
    from types import SimpleNamespace

    runs = {  # [Re]: ResNet18 94.6 > quadratic 93.7 > learned 90.4; ours put the quadratic model first
        "resnet18": SimpleNamespace(test_accuracy=0.50),
        "quadratic_aniso_9h": SimpleNamespace(test_accuracy=0.60),
        "learned_9h": SimpleNamespace(test_accuracy=0.40),
        "vit": SimpleNamespace(test_accuracy=0.45),  # no [Re] accuracy: not compared
    }
    assert book.rank_counts(runs) == {"pairs": 3, "same": 2, "flipped": 1, "tied": 0}
    flips = book.rank_flips(runs)
    assert flips.values.tolist() == [["ResNet18", "SA quadratic (non-isotropic), 9 heads", "+1.0", "-10.0"]]
    # a seeds_frame orders by the means over seeds: learned_9h's mean 0.55 now beats ResNet18's 0.50
    import pandas as pd

    frame = pd.DataFrame(
        {
            "experiment": ["resnet18", "quadratic_aniso_9h", "learned_9h", "vit", "learned_16h"],
            "status": ["complete"] * 4 + ["missing"],
            "accuracy": [0.50, 0.60, 0.55, 0.45, None],
        }
    )
    counts = book.rank_counts(frame)  # only quadratic > learned keeps [Re]'s order
    assert (counts["same"], counts["pairs"], counts["flipped"]) == (1, 3, 2)


def test_results_at_a_glance():
    import matplotlib

    matplotlib.use("Agg")
    import pandas as pd
    from matplotlib.path import Path

    from attnbook import viz

    frame = pd.DataFrame(
        [
            ("learned_content_9h", "complete", 0.478, 555_466),
            ("learned_content_9h_ha", "complete", 0.490, 141_706),
            ("san_pairwise", "complete", 0.595, 161_372),
            ("san_pairwise_ha", MISSING, None, None),
        ],
        columns=["experiment", "status", "accuracy", "params"],
    )
    points = book.glance_points(frame)
    ours = points[points["source"] == "ours"]
    assert list(ours["experiment"]) == ["learned_content_9h", "learned_content_9h_ha", "san_pairwise"]
    assert set(points["group"]) >= {"SA learned 2D + content", "SAN pairwise", "SA quadratic"}
    assert ours.set_index("experiment").loc["learned_content_9h_ha", "label"] == "9h HA"
    assert (points[points["source"] != "ours"]["kind"] != "measured").all()
    fig = viz.accuracy_vs_params(points, verdicts={"san_pairwise": "verdict"})
    ax = fig.axes[0]
    # the HA arrows: annotations without text (a label far from its point has a leader line, and text)
    arrows = [a for a in ax.texts if getattr(a, "arrow_patch", None) is not None and not a.get_text()]
    # one arrow model -> HA for ours (the SAN HA run is missing) and one per [Re] pair with both points
    re_pairs = sum(
        1
        for r in points.itertuples()
        if r.source != "ours"
        and isinstance(r.baseline, str)
        and ((points["experiment"] == r.baseline) & (points["source"] == r.source)).any()
    )
    # panel (b), ours enlarged, holds our arrow; panel (a), every point, the [Re] pairs' (issue 49)
    overview = fig.axes[1]
    theirs = [a for a in overview.texts if getattr(a, "arrow_patch", None) is not None and not a.get_text()]
    assert len(arrows) == 1 and len(theirs) == re_pairs
    assert "verdict" in [t.get_text() for t in ax.texts] and ax.get_xscale() == "log"
    assert "9h HA, n=1" not in [t.get_text() for t in overview.texts]  # ours are labelled in (b) only
    # no point label is written over an arrow (shaft or head), e.g. "9h HA" over its arrowhead
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    lines = [Path(ax.transData.transform([a.xyann, a.xy])) for a in arrows]
    labels = [t for t in ax.texts if t.get_text() and t not in arrows and t.get_text() != "verdict"]
    assert "9h HA, n=1" in [t.get_text() for t in labels]  # ours: with the seeds behind the point
    for label in labels:
        box = label.get_window_extent(renderer)
        assert not any(line.intersects_bbox(box, filled=False) for line in lines), label.get_text()
    assert book.ha_pairs(frame)["experiment"].tolist() == ["learned_content_9h"]
    numbers = book.ha_pair_numbers(book.ha_pairs(frame))  # what the prose glues: numbers, not a sentence
    assert numbers == {"size": "26%", "pairs": "1", "above": "1", "below": "0", "low": "+1.2", "high": "+1.2"}
    assert set(book.ha_pair_numbers(book.ha_pairs(frame.iloc[2:])).values()) == {"—", "0"}


# ----------------------------------------------------- reliability: damaged and stale results, bad parameters
def test_damaged_and_stale_results_in_the_book(damaged, monkeypatch):
    """The book's tables mark a damaged or stale result as such (not a crash, not its numbers, not "not
    yet trained") when it may not train; with training allowed it retrains both."""
    from attnlib.results import tables

    monkeypatch.delenv(TRAIN_MISSING_ENV, raising=False)
    names = ["vit", "vit_ha", "resnet18"]
    params = book.check_params(
        preset="smoke", data=None, device="cpu", results_dir=damaged, train_missing=False
    )
    runs = book.load_all(names, params)
    assert all(runs[n] is None for n in names)
    assert runs.status["vit_ha"][0] == "damaged" and runs.status["vit"][0] == "stale"
    frame = tables.frame(runs).set_index("experiment")
    assert list(frame["status"]) == ["stale", "damaged", "missing"]
    assert frame.loc[["vit", "vit_ha"], ["accuracy", "params"]].isna().all().all()
    table = book.results_table(frame.reset_index(), "smoke", pairs=True)
    cells = table.set_index(table["", "model"] + "/" + table["", "variant"])
    assert cells.loc["ViT/HA", ("test accuracy (%)", "smoke")] == NOT_USED["damaged"]
    assert cells.loc["ViT/normal", ("trainable parameters", "smoke")] == NOT_USED["stale"]
    assert cells.loc["ResNet18/normal", ("wall time, median", "ms")] == "—"
    prose = book.unused_markdown(frame.reset_index())
    assert f"{escaped(book.title('vit_ha'))} is damaged" in prose  # display names, the details as code
    assert "ViT was trained with another configuration (``" in prose
    assert "train.epochs: 2 saved, 1 now" in prose  # the detail shown as typed, in a code span
    notes = []
    monkeypatch.setattr(display, "note", lambda text, kind="note": notes.append(text))
    book.note_missing("Table 3", "smoke", names, runs.status)
    shown = [escaped(book.title(n)) for n in ("vit", "vit_ha", "resnet18")]
    assert (
        f"{shown[0]} (other configuration (not used)), {shown[1]} (damaged (not used)), {shown[2]}"
        in notes[0]
    )
    with pytest.raises(DamagedResult) as err:  # what book.load caught: status and detail for the table
        run_or_load("vit_ha", **params.run_kwargs())
    assert err.value.status == "damaged" and "metrics.json" in err.value.detail
    with pytest.raises(MissingResult) as err:
        run_or_load("vit", **params.run_kwargs())
    assert err.value.status == "stale"
    # allowed to train: both are retrained and become current results
    retrain = book.check_params(
        preset="smoke", data=None, device="cpu", results_dir=damaged, train_missing=True
    )
    assert book.load_all(["vit", "vit_ha"], retrain).status["vit_ha"][0] == "damaged"  # reading never trains
    assert book.train_missing(["vit", "vit_ha"], retrain) == ["vit", "vit_ha"]  # the chapter's explicit call
    again = book.load_all(["vit", "vit_ha"], retrain)
    assert all(again[n] is not None for n in ("vit", "vit_ha"))
    assert set(table3(damaged, "smoke").set_index("experiment").loc[["vit", "vit_ha"], "status"]) == {
        "complete"
    }


@pytest.mark.parametrize(
    ("counts", "message"),
    [({"steps": -3}, "steps: got -3; allowed: an integer >= 1"), ({"steps": 2.5}, "steps: got 2.5; allowed")],
)
def test_bad_count_parameter_of_a_chapter(counts, message):
    """Negative or non-integer step counts of a chapter (01_theory's `steps`); papermill: tests/test_book.py."""
    with pytest.raises(book.ParameterError, match=re.escape(message)):
        book.check_params(counts=counts)
