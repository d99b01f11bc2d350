"""The book build's Sphinx extension (``_config.yml``: ``sphinx.extra_extensions: attnbook.sphinx``)."""

from __future__ import annotations

import os
import re

from attnlib.env import TRAIN_MISSING_ENV

#: The mark of a result that is not saved (``attnbook.phrases.MISSING``). It belongs where a table or a
#: figure stands for a missing run, never where a sentence needs a number or a verdict.
MISSING_MARK = "not yet trained"

# The mark named as a term, in quotation marks ('shown as "not yet trained"'), is not a use of it.
_QUOTED = re.compile(r"[\"“‘']\s*" + re.escape(MISSING_MARK) + r"\s*[.,]?\s*[\"”’']", re.IGNORECASE)
_MARK = re.compile(re.escape(MISSING_MARK), re.IGNORECASE)


def _allowed(node) -> bool:
    """Whether a text node lies where the missing mark may stand: in a table (a cell, its title), in a
    figure (a placeholder's caption or legend), in code or in raw HTML (pandas' tables)."""
    from docutils import nodes

    allowed = (nodes.table, nodes.figure, nodes.caption, nodes.literal, nodes.literal_block, nodes.raw)
    while node is not None:
        if isinstance(node, allowed):
            return True
        node = node.parent
    return False


def missing_in_sentences(doctree) -> list[str]:
    """The sentences of a page that hold the missing mark "not yet trained" (case-insensitive), each as its
    paragraph's text (at most 160 characters around the mark).

    A *sentence* is the text of a paragraph (a docutils ``paragraph`` node: prose, list items, notes and
    admonitions, glued phrases inside them) outside the allowed places of ``_allowed``: table cells and
    titles, figure captions and legends, code and raw HTML. The mark in quotation marks, naming the mark
    itself ('shown as "not yet trained"'), does not count."""
    from docutils import nodes

    found = []
    for paragraph in doctree.findall(nodes.paragraph):
        if _allowed(paragraph):
            continue
        text = "".join(t.astext() for t in paragraph.findall(nodes.Text) if not _allowed(t.parent))
        text = _QUOTED.sub("", text)
        for m in _MARK.finditer(text):
            found.append(text[max(0, m.start() - 80) : m.end() + 80].replace("\n", " "))
    return found


def _check_missing(app, doctree, docname) -> None:
    """Warn (an error under ``-W``, as the book build runs) for every sentence of a page that holds the
    missing mark (``missing_in_sentences``): a number or verdict that the prose needs is not there."""
    from sphinx.util import logging

    log = logging.getLogger(__name__)
    for sentence in missing_in_sentences(doctree):
        log.warning(f"'{MISSING_MARK}' inside a sentence: …{sentence}…", location=docname)


def _unique_scripts(app, pagename, templatename, context, doctree) -> None:
    """Drop repeated ``<script>`` entries from a page. Jupyter Book 1.x registers some inline scripts
    twice (sphinx-thebe's ``const THEBE_JS_URL = ...``), and a second ``const`` of one name is a
    JavaScript error in every page."""
    scripts = context.get("script_files")
    if not scripts:
        return
    seen, unique = set(), []
    for js in scripts:
        # an inline script is registered once with filename None and once with "" (same body)
        key = (getattr(js, "filename", js) or "", tuple(sorted(getattr(js, "attributes", {}).items())))
        if key not in seen:
            seen.add(key)
            unique.append(js)
    context["script_files"] = unique


def setup(app):
    """Sphinx extension hook (listed in ``_config.yml``): chapters executed by the book build read saved
    results and never train, unless ``ATTNLIB_TRAIN_MISSING`` was set explicitly; and every page carries
    each of its scripts once (see ``_unique_scripts``); a page whose sentences hold the missing mark fails
    the build (``_check_missing``)."""
    os.environ.setdefault(TRAIN_MISSING_ENV, "0")
    app.connect("html-page-context", _unique_scripts, priority=900)
    app.connect("doctree-resolved", _check_missing)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
