"""The book build fails where the missing mark "not yet trained" stands inside a sentence (a number or verdict
the prose needs is not there), and passes it in a table cell, a figure caption, code or quoted as a term
(attnbook.sphinx: missing_in_sentences, run on every page by the build's Sphinx extension)."""

from __future__ import annotations

import pytest
from docutils.core import publish_doctree

from attnbook.phrases import MISSING
from attnbook.sphinx import MISSING_MARK, missing_in_sentences

ALLOWED = f"""
+----------+------------------+
| ResNet18 | {MISSING}  |
+----------+------------------+

.. figure:: placeholder.png

   ResNet18: {MISSING}.

.. table:: Table 1: {MISSING}

   ===  ===
   a    b
   ===  ===

A result that is not saved is shown as "{MISSING}", and tables say “{MISSING}.”

Run ``python -m attnlib train`` where a cell reads ``{MISSING}``.
"""


def test_the_mark_is_the_books_missing_mark():
    assert MISSING == MISSING_MARK


def test_tables_captions_code_and_quotes_pass():
    assert missing_in_sentences(publish_doctree(ALLOWED)) == []


@pytest.mark.parametrize(
    "text",
    [
        f"In the [Re] logs ResNet18 ends {MISSING} points above the best attention model.",  # the bug
        f"- the best attention model: {MISSING}",  # a list item is a sentence
        f".. note::\n\n   Table 1: {MISSING.capitalize()} at preset budget.",  # so is a note, any case
        f"HA keeps *{MISSING}* of the parameters.",  # emphasis is still the sentence's text
    ],
)
def test_a_sentence_holding_the_mark_fails(text):
    found = missing_in_sentences(publish_doctree(ALLOWED + "\n" + text + "\n"))
    assert len(found) == 1 and MISSING_MARK in found[0].lower()


@pytest.mark.slow
def test_the_build_fails_on_it(tmp_path):
    """A one-page Sphinx build with the book's extension and warnings as errors (`-W`, as `make book`
    builds), in a fresh process: a clean page passes, a sentence with the mark fails the build and the
    message quotes it."""
    import subprocess
    import sys

    def build(name: str, body: str) -> subprocess.CompletedProcess:
        src = tmp_path / name
        src.mkdir()
        (src / "conf.py").write_text("extensions = ['attnbook.sphinx']\n")
        (src / "index.rst").write_text("Title\n=====\n\n" + body)
        command = [sys.executable, "-m", "sphinx", "-W", "-q", "-b", "html", str(src), str(src / "_build")]
        return subprocess.run(command, capture_output=True, text=True, timeout=120)

    clean = build("clean", f'A cell reads "{MISSING}".\n')
    assert clean.returncode == 0, clean.stderr
    dirty = build("dirty", f"ResNet18 ends {MISSING} points above.\n")
    assert dirty.returncode != 0
    assert f"'{MISSING_MARK}' inside a sentence" in dirty.stderr and "ResNet18 ends" in dirty.stderr
