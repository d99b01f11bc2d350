"""What only the book uses: its chapters' parameters, the wording and display of results, the figures and the
Sphinx hook. It lives beside the chapters (``book/_lib/attnbook/``), outside the ``attnlib`` package, and is
imported as ``attnbook``: ``pyproject.toml`` lists ``book/_lib`` as a second source root, so the editable
install of ``make setup`` puts it on the path of every interpreter of the venv (the book build's kernels, a
chapter run by papermill from any folder, the tests, ``tools/golden.py``).

The chapters (``book/*.py``, jupytext percent format) stay thin: a ``parameters`` cell, then
``params = check_params(...)`` (the one place bad values are caught), then calls into attnlib. The science
lives in the library (``attnlib.results``, ``attnlib.analysis``, ``attnlib.measures``);
this package only words and shows it:

    params      chapter parameters: checks, defaults, papermill's unknown parameters
    runs        the results a chapter shows (read, never trained; statuses kept in ``Runs``), ``train_missing``
    phrases     number formats, the marks of missing results, verdict words, the ledger's claims in full
    tables      the tables chapters show (results as the papers' tables, literature, HA over seeds, ledger)
    reference   the appendix's reference tables (protocols, model configurations, protocol differences, quirks)
    display     glue, figures, tables, fold-outs and notes in a cell's output
    maps        the figures of a saved run's attention: maps, quadratic centres, measures per epoch
    benchmarks  the saved speed benchmarks as the appendix reads them
    sphinx      the Sphinx extension of the book build (``_config.yml``: ``attnbook.sphinx``)
    viz         the figures (numpy in, matplotlib ``Figure`` out)

Reading is not training: every run a chapter shows is read and checked by the results side
(``attnlib.results.load.read``, through ``load_status`` / ``load_all``), never trained. A chapter that may train
says so in a cell of its own, ``if params.train_missing: book.train_missing(names, params)``, which trains
what results/ lacks through the lab (``attnlib.lab.run``). Its parameter ``train_missing``: ``None`` (the
default) means "train what results/ lacks" -- *except* during the book build, where the Sphinx extension
(``attnbook.sphinx``, ``_config.yml: sphinx.extra_extensions``) sets ``ATTNLIB_TRAIN_MISSING=0`` for every
kernel the build starts, so the build only reads saved results and shows missing ones as "not yet
trained". ``True`` / ``False`` force either behaviour (``papermill ... -p train_missing False``); the
environment variable can be set by hand too (``ATTNLIB_TRAIN_MISSING=1 jupyter-book build book``).

Every public name of these modules is importable from ``attnbook`` (what the chapters call), with the
library's names the chapters use beside them (``results_frame``, ``REFERENCES``, ``attention_peaks``...).
"""

from __future__ import annotations

from attnlib.analysis.literature import (
    NOT_FOUND,
    PAPER,
    RE,
    RE_QUADRATIC_9H_HA,
    REFERENCES,
    Reference,
    best_reference,
    logged_gain,
    reference_value,
    references,
    references_frame,
    short,
)
from attnlib.env import TRAIN_MISSING_ENV
from attnlib.measures import NEAR_UNIFORM, attention_peaks
from attnlib.results.load import Runs
from attnlib.results.tables import frame as results_frame

from .benchmarks import (
    bench_machine_markdown,
    bench_reports,
    engine_report,
    engine_rerun,
    engine_tables,
    peak_shared,
    profile_layout,
    throughput_tables,
)
from .display import (
    glue_numbers,
    glue_str,
    glue_text,
    glue_verdicts,
    note,
    note_below_target,
    note_missing,
    png,
    show,
    show_bench,
    show_folded,
    show_folded_table,
    show_ledger,
    show_models,
    show_protocols,
    show_sources,
    show_table,
)
from .ha import (
    INIT_FORMS,
    LENGTH_BAND,
    ha_by_length,
    ha_cost_numbers,
    ha_effects,
    ha_effects_split,
    ha_family,
    ha_family_numbers,
    ha_pair_numbers,
    ha_pairs,
    init_forms,
    length_reading,
    paired_cell,
    welch_labels,
)
from .ledger import (
    centre_numbers,
    claims_evidence,
    claims_ledger,
    ledger_table,
    long_plan,
    long_run_numbers,
    training_time,
)
from .maps import (
    measured_runs,
    show_attention,
    show_centre_paths,
    show_centres,
    show_measure_curves,
    show_measured_attention,
    show_measured_centres,
)
from .params import (
    HEADS,
    INJECTED_HEADER,
    LONG_PRESET,
    ParameterError,
    Params,
    assigned_names,
    check_no_unknown_parameters,
    check_params,
    default_data,
    default_results_dir,
    repo_root,
    unknown_parameters,
)
from .phrases import (
    MISSING,
    NOT_MEASURED,
    NOT_USED,
    VERDICT_SHORT,
    dataset_words,
    epoch_range,
    fmt,
    is_missing,
    ledger_markdown,
    markdown_table,
    peak_range,
    rank_counts,
    timing_markdown,
    title,
    unused_markdown,
    word_list,
)
from .reference import (
    REFERENCE_COLUMNS,
    breakable,
    model_table,
    model_tables,
    pack_groups,
    protocol_differences_table,
    protocol_tables,
    re_quirks_table,
    training_table,
    transposed,
)
from .runs import load_all, load_status, seed_accuracies, seed_map, train_missing
from .sphinx import setup
from .tables import (
    KIND_MARKS,
    KIND_MEANING,
    NOT_FOUND_CELL,
    architecture_table,
    below_target,
    best_attention,
    cost_table,
    glance_points,
    group,
    literature_caption,
    literature_table,
    rank_flips,
    resolution_control,
    results_table,
    seeds_frame,
    short_label,
    sources_markdown,
    split_title,
    table3_frame,
)

__all__ = [
    "HEADS",
    "INJECTED_HEADER",
    "LONG_PRESET",
    "KIND_MARKS",
    "KIND_MEANING",
    "MISSING",
    "NEAR_UNIFORM",
    "NOT_FOUND",
    "NOT_FOUND_CELL",
    "NOT_MEASURED",
    "NOT_USED",
    "PAPER",
    "RE",
    "REFERENCES",
    "REFERENCE_COLUMNS",
    "RE_QUADRATIC_9H_HA",
    "TRAIN_MISSING_ENV",
    "VERDICT_SHORT",
    "ParameterError",
    "Params",
    "Reference",
    "Runs",
    "assigned_names",
    "attention_peaks",
    "below_target",
    "bench_machine_markdown",
    "bench_reports",
    "best_attention",
    "centre_numbers",
    "long_run_numbers",
    "best_reference",
    "breakable",
    "check_no_unknown_parameters",
    "check_params",
    "claims_evidence",
    "claims_ledger",
    "cost_table",
    "default_data",
    "default_results_dir",
    "epoch_range",
    "fmt",
    "glance_points",
    "glue_str",
    "glue_numbers",
    "glue_text",
    "glue_verdicts",
    "group",
    "ha_cost_numbers",
    "ha_effects",
    "LENGTH_BAND",
    "ha_by_length",
    "length_reading",
    "init_forms",
    "INIT_FORMS",
    "ha_effects_split",
    "ha_family",
    "ha_family_numbers",
    "ha_pairs",
    "is_missing",
    "ledger_markdown",
    "markdown_table",
    "peak_range",
    "unused_markdown",
    "architecture_table",
    "ha_pair_numbers",
    "long_plan",
    "ledger_table",
    "literature_caption",
    "literature_table",
    "logged_gain",
    "load_all",
    "load_status",
    "model_table",
    "model_tables",
    "note",
    "note_below_target",
    "note_missing",
    "pack_groups",
    "paired_cell",
    "peak_shared",
    "png",
    "profile_layout",
    "protocol_differences_table",
    "protocol_tables",
    "rank_counts",
    "rank_flips",
    "re_quirks_table",
    "reference_value",
    "references",
    "references_frame",
    "repo_root",
    "results_frame",
    "resolution_control",
    "results_table",
    "seed_accuracies",
    "seed_map",
    "seeds_frame",
    "setup",
    "short",
    "short_label",
    "show",
    "show_attention",
    "show_bench",
    "show_folded",
    "show_folded_table",
    "show_ledger",
    "measured_runs",
    "show_centre_paths",
    "show_centres",
    "show_measure_curves",
    "show_measured_attention",
    "show_measured_centres",
    "show_models",
    "show_protocols",
    "show_sources",
    "show_table",
    "sources_markdown",
    "split_title",
    "table3_frame",
    "throughput_tables",
    "engine_report",
    "engine_rerun",
    "engine_tables",
    "timing_markdown",
    "title",
    "dataset_words",
    "training_table",
    "train_missing",
    "training_time",
    "transposed",
    "unknown_parameters",
    "welch_labels",
    "word_list",
]
