"""The book's kit: what only the chapters use, beside them in ``book/_lib/attnbook/``, imported as ``attnbook``
(``pyproject.toml`` lists ``book/_lib`` as a second source root: every interpreter of the venv finds it).

Here: the names the chapters call (``import attnbook as book``), each imported from its home module. Any other
name is taken from its module (``attnbook.phrases.MISSING``), the library's from the library
(``attnlib.analysis.literature.PAPER``). Where things live:

    params      chapter parameters: check_params (the one place bad values are caught), defaults
    runs        the results a chapter shows (read, never trained), and train_missing
    phrases     number formats, the marks of missing results, verdict words, the ledger's claims in full
    tables      the tables chapters show (results as the papers' tables, literature, HA over seeds)
    ha, ledger  chapter 4's comparisons; the claims ledger and the longer runs
    reference   the appendix's reference tables (protocols, model configurations, protocol differences, quirks)
    benchmarks  the saved speed benchmarks as the appendix reads them
    display     glue, figures, tables, fold-outs and notes in a cell's output
    maps        the figures of a saved run's attention: maps, quadratic centres, measures per epoch
    viz         the figures (numpy in, matplotlib ``Figure`` out)
    sphinx      the Sphinx extension of the book build (``_config.yml``: ``attnbook.sphinx``)

Reading is not training: a chapter reads every run through the results side (``load_all``); one that may
train says so in a cell of its own, ``if params.train_missing: book.train_missing(names, params)``, the kit's
one call into the lab. Its ``train_missing=None`` means "train what results/ lacks", except in the book build,
whose Sphinx extension sets ``ATTNLIB_TRAIN_MISSING=0``: read only, missing runs shown as not yet trained.
"""

from .benchmarks import bench_machine_markdown, bench_reports, engine_report, engine_rerun, engine_tables
from .display import (
    glue_numbers,
    glue_str,
    glue_text,
    glue_verdicts,
    note,
    note_below_target,
    note_missing,
    show,
    show_bench,
    show_folded,
    show_folded_table,
    show_ledger,
    show_models,
    show_protocols,
    show_table,
)
from .ha import (
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
    welch_labels,
)
from .ledger import centre_numbers, claims_evidence, claims_ledger, long_plan, long_run_numbers, training_time
from .maps import (
    measured_runs,
    show_attention,
    show_centre_paths,
    show_centres,
    show_measure_curves,
    show_measured_attention,
    show_measured_centres,
)
from .params import ParameterError, check_params
from .phrases import (
    NOT_FOUND_CELL,
    dataset_words,
    epoch_range,
    peak_range,
    rank_counts,
    timing_markdown,
    title,
    unused_markdown,
)
from .reference import protocol_differences_table, re_quirks_table
from .runs import load_all, seed_accuracies, train_missing
from .tables import (
    architecture_table,
    below_target,
    best_attention,
    cost_table,
    glance_points,
    literature_caption,
    literature_table,
    rank_flips,
    resolution_control,
    results_table,
    seeds_frame,
    sources_markdown,
    table3_frame,
)

__all__ = [
    "architecture_table", "below_target", "bench_machine_markdown", "bench_reports", "best_attention",
    "centre_numbers", "check_params", "claims_evidence", "claims_ledger", "cost_table", "engine_report",
    "engine_rerun", "engine_tables", "dataset_words",
    "epoch_range", "glance_points", "glue_numbers", "glue_str", "glue_text",
    "glue_verdicts", "ha_by_length", "ha_cost_numbers", "ha_effects", "ha_effects_split", "ha_family",
    "ha_family_numbers", "ha_pair_numbers", "ha_pairs", "init_forms", "LENGTH_BAND", "length_reading",
    "literature_caption", "literature_table", "load_all", "long_plan", "long_run_numbers", "measured_runs",
    "NOT_FOUND_CELL", "note", "note_below_target", "note_missing", "ParameterError", "peak_range",
    "protocol_differences_table", "rank_counts", "rank_flips", "re_quirks_table", "resolution_control",
    "results_table", "seed_accuracies", "seeds_frame", "show", "show_attention", "show_bench",
    "show_centre_paths", "show_centres", "show_folded", "show_folded_table", "show_ledger",
    "show_measure_curves", "show_measured_attention", "show_measured_centres", "show_models",
    "show_protocols", "show_table", "sources_markdown", "table3_frame", "timing_markdown", "title",
    "train_missing", "training_time", "unused_markdown", "welch_labels",
]  # fmt: skip
