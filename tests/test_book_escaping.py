"""The book escapes what it shows (attnbook.phrases.escaped, display.show_table): a results folder
holding the reviewer's payload — provenance strings that are HTML with an event handler, MyST roles and
Markdown — reaches the page as text. The Markdown is rendered by markdown-it (MyST's parser) and the HTML
checked by tools/bookcheck.py's injected_markup, which finds the payload when it is not escaped."""

from __future__ import annotations

import json

import IPython.display
import pandas as pd
import pytest
from bookcheck import injected_markup
from markdown_it import MarkdownIt

import attnbook as book
from attnbook import display
from attnbook.params import repo_root
from attnbook.phrases import escaped, markdown_table, unused_markdown
from attnlib.results.config import run_dir
from attnlib.results.load import inspect_run
from attnlib.results.tables import collect

PAYLOAD = '<b onmouseover="alert(document.domain)">cifar10</b> {eval-rst}`x` **bold** $x$ [l](javascript:x)'


def _page(markdown: str) -> str:
    """The article MyST would make of `markdown` (CommonMark: raw HTML passes through, as in MyST)."""
    return f"<article><section>{MarkdownIt('commonmark').render(markdown)}</section></article>"


@pytest.fixture
def payload(copy):
    """The suite's smoke results with vit's provenance dataset and device set to the payload: a result that
    is otherwise complete (strings are free text)."""
    folder = run_dir(copy, "vit", "smoke")
    metrics = json.loads((folder / "metrics.json").read_text())
    metrics["provenance"]["dataset"] = PAYLOAD
    metrics["wall_time_device"] = PAYLOAD
    (folder / "metrics.json").write_text(json.dumps(metrics))
    assert inspect_run(folder)[0] == "complete"
    return copy


def test_the_payload_is_live_markup_when_not_escaped():
    """The check can fail: the payload glued as is would be an event handler on the page."""
    assert injected_markup(_page(f"data: {PAYLOAD}")) == ['<b onmouseover="alert(document.domain)">']


def test_escaped_text_renders_as_typed():
    rendered = MarkdownIt("commonmark").render(escaped(PAYLOAD + "\n:::{warning}\n<script>x</script>"))
    assert injected_markup(f"<article><section>{rendered}</section></article>") == []
    assert "<strong>" not in rendered and "<a " not in rendered and rendered.count("<p>") == 1
    assert "&lt;b onmouseover=&quot;alert(document.domain)&quot;&gt;cifar10&lt;/b&gt;" in rendered


def test_unused_detail_shows_a_payload_as_text(payload):
    folder = run_dir(payload, "vit", "smoke")
    metrics = json.loads((folder / "metrics.json").read_text())
    metrics["params"] = PAYLOAD  # damaged: the detail quotes the value
    (folder / "metrics.json").write_text(json.dumps(metrics))
    frame = collect(payload, "smoke", ["vit", "vit_ha"])
    assert frame.set_index("experiment").at["vit", "status"] == "damaged"
    page = _page(unused_markdown(frame))
    assert injected_markup(page) == [] and "is damaged" in page


def test_tables_and_folded_tables_show_the_payload_as_text(payload, monkeypatch):
    shown = []
    monkeypatch.setattr(IPython.display, "display", lambda obj: shown.append(obj))
    frame = collect(payload, "smoke", ["vit", "vit_ha"])
    display.show_table(frame[["experiment", "dataset", "wall_time_device"]], caption=PAYLOAD)
    html = shown[0].data  # the HTML shown
    assert (
        injected_markup(f"<article><section>{html}</section></article>") == [] and "&lt;b onmouseover" in html
    )
    assert injected_markup(_page(markdown_table(frame[["experiment", "dataset"]]))) == []
    # the one tag the library writes in headers, a soft line break, is kept; a results file's is not
    display.show_table(pd.DataFrame({"seed<wbr>s": ["<wbr><b onclick=x>"]}))
    assert "seed<wbr>s" in shown[-1].data and "<b onclick" not in shown[-1].data


#: Every bidirectional control: a right-to-left override in a results string would show "cifar10 ... evil"
#: reordered (the page's text after it reversed) without being visible itself
BIDI = "\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069\u200e\u200f\u061c"


def _bidi(text: str) -> list[str]:
    return [c for c in text if c in BIDI]


def test_bidirectional_controls_are_shown_as_code_points_not_obeyed(payload, monkeypatch):
    """In Markdown (escaped, code spans of a damaged result's detail), glued text and tables (cells, headers,
    caption): each control is written as its code point, which shows where it was and reorders nothing."""
    from attnbook.phrases import visible

    text = "cifar10\u202egpj.exe" + BIDI
    assert visible(text).startswith("cifar10[U+202E]gpj.exe[U+202A]") and _bidi(visible(text)) == []
    rendered = MarkdownIt("commonmark").render(escaped(text))
    assert _bidi(rendered) == [] and "[U+202E]" in rendered
    folder = run_dir(payload, "vit", "smoke")
    metrics = json.loads((folder / "metrics.json").read_text())
    metrics["provenance"]["dataset"] = text
    metrics["wall_time_device"] = text
    (folder / "metrics.json").write_text(json.dumps(metrics))
    frame = collect(payload, "smoke", ["vit", "vit_ha"])
    shown = []
    monkeypatch.setattr(IPython.display, "display", lambda obj: shown.append(obj))
    table = frame[["experiment", "dataset", "wall_time_device"]].rename(columns={"dataset": "data\u202e"})
    display.show_table(table, caption="caption \u2066x\u2069")
    assert _bidi(shown[0].data) == [] and "cifar10[U+202E]gpj.exe" in shown[0].data
    assert _bidi(markdown_table(frame[["experiment", "dataset"]])) == []
    page = unused_markdown(pd.DataFrame([{"experiment": "vit", "status": "damaged", "detail": text}]))
    assert "is damaged (``cifar10[U+202E]gpj.exe" in page and _bidi(page) == []  # a code span


def test_timing_note_shows_the_timing_file_as_text(tmp_path):
    timing = tmp_path / "timing"
    timing.mkdir()
    report = json.loads((repo_root() / "results" / "timing" / "budget.json").read_text())
    report["machine"]["cpu"] = PAYLOAD
    (timing / "budget.json").write_text(json.dumps(report))
    params = book.check_params(preset="budget", results_dir=tmp_path, device="cpu", train_missing=False)
    page = _page(book.timing_markdown(params))
    assert injected_markup(page) == [] and "&lt;b onmouseover" in page
