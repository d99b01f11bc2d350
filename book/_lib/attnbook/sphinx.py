"""The book build's Sphinx extension (``_config.yml``: ``sphinx.extra_extensions: attnbook.sphinx``)."""

from __future__ import annotations

import os
import re
import subprocess
import zipfile
from pathlib import Path

from attnlib.env import TRAIN_MISSING_ENV

#: Where the zip of results/ lands in the HTML build, linked from every page's header.
RESULTS_ZIP = "_downloads/attnlib-results.zip"
#: The whole book as one PDF in the HTML build, linked from every page's download menu: `make pdf`
#: copies it there (the Makefile: tools/bookpdf.py prints it), after the build.
BOOK_PDF = "attnlib.pdf"

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


def remote_url(root: Path) -> str | None:
    """The https URL of the repository's ``origin`` remote (``git@host:owner/name.git`` rewritten as
    ``https://host/owner/name``), or None where there is no such remote (or no git)."""
    try:
        url = subprocess.run(
            ["git", "-C", str(root), "remote", "get-url", "origin"],
            capture_output=True,
            text=True,
            timeout=10,
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return None
    ssh = re.match(r"^git@([^:]+):(.+)$", url)
    if ssh:
        url = f"https://{ssh[1]}/{ssh[2]}"
    return url.removesuffix(".git") if url.startswith(("https://", "http://")) else None


def repository(root: Path) -> dict[str, str]:
    """The book's repository: ``url``, ``branch`` and ``path_to_book`` of ``_config.yml``'s ``repository``
    (the one place they are written), its url replaced by the ``origin`` remote's where there is one
    (``remote_url``). The header's repository link and the PDF's links to files (tools/bookpdf.py) read it."""
    import yaml

    found = yaml.safe_load((root / "_config.yml").read_text())["repository"]
    return {
        "url": (remote_url(root) or found["url"]).rstrip("/"),
        "branch": found.get("branch", "main"),
        "path_to_book": found.get("path_to_book", "book"),
    }


def _repository_link(app, config) -> None:
    """The header's repository link: ``repository(root)['url']``; nothing for a build without the book's
    ``_config.yml`` beside its sources (a one-page Sphinx build of the extension, as the tests make)."""
    root = Path(app.srcdir).parent
    if (root / "_config.yml").is_file():
        config.html_theme_options["repository_url"] = repository(root)["url"]


#: The header's entries for results/ and the book's PDF: in the theme's download menu, beside the page's own
#: downloads. The PDF is there once `make pdf` has run, as the entry says.
_RESULTS_BUTTON = {
    "type": "link",
    "text": "results/ (zip)",
    "tooltip": "Download every saved result (results/ as a zip)",
    "icon": "fas fa-file-zipper",
    "label": "download-results-button",
}
_BOOK_PDF_BUTTON = {
    "type": "link",
    "text": "book PDF (make pdf)",
    "tooltip": "The whole book as one PDF, which `make pdf` writes beside the pages",
    "icon": "fas fa-book",
    "label": "download-book-pdf-button",
}


def _results_button(app, pagename, templatename, context, doctree) -> None:
    """Put the download of results/ (``RESULTS_ZIP``) and of the book's PDF (``BOOK_PDF``) in every page's
    header: entries of the theme's download menu, whose ".pdf" entry (the browser's print of the page) is
    renamed "print page"; or buttons of their own on a page without that menu (the index, the search page)."""
    buttons = context.get("header_buttons")
    if buttons is None:
        return
    added = [
        {**b, "url": context["pathto"](path, 1)}
        for b, path in ((_BOOK_PDF_BUTTON, BOOK_PDF), (_RESULTS_BUTTON, RESULTS_ZIP))
    ]
    menu = next((b for b in buttons if b.get("label") == "download-buttons"), None)
    if menu is None:
        buttons.extend({**b, "text": None} for b in added)
        return
    for entry in menu["buttons"]:
        if entry.get("label") == "download-pdf-button":
            entry.update(text="print page", tooltip="Print this page (the whole book: book PDF)")
    menu["buttons"].extend(added)


def zip_results(results: Path, target: Path) -> int:
    """Write every file under ``results`` into the zip ``target`` (paths inside as ``results/...``, sorted),
    written beside and renamed into place; returns the number of files."""
    files = sorted(p for p in results.rglob("*") if p.is_file())
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_name(target.name + ".part")
    with zipfile.ZipFile(partial, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        for file in files:
            archive.write(file, Path("results") / file.relative_to(results))
    partial.replace(target)
    return len(files)


_GLUED_FIGURE = re.compile(r"\{glue:figure\}\s+(\S+)")


def with_glued_figures(notebook: dict, glued: dict) -> dict:
    """An executed notebook with each glued figure (``glued``: myst-nb's ``.glue.json``, which holds what
    ``glue(..., display=False)`` kept out of the notebook) put back as an output of the cell that showed it,
    before its Markdown output whose ``{glue:figure}`` directive names it (``attnbook.display.show``)."""
    for cell in notebook["cells"]:
        if "outputs" in cell:
            outputs = []
            for output in cell["outputs"]:
                markdown = "".join(output.get("data", {}).get("text/markdown", ""))
                for name in (n for n in _GLUED_FIGURE.findall(markdown) if n in glued):
                    meta = {k: v for k, v in glued[name].get("metadata", {}).items() if k != "scrapbook"}
                    outputs.append({**glued[name], "metadata": meta})  # no longer a glue of the book's
                outputs.append(output)
            cell["outputs"] = outputs
    return notebook


def executed_sources(outdir: Path, executed: Path) -> int:
    """Replace each notebook of the build's ``_sources`` (what the page's ".ipynb" download serves: the
    unexecuted source) by the notebook the build executed (myst-nb's ``jupyter_execute`` folder), with its
    outputs and its figures (``with_glued_figures``); returns how many it replaced. Glued numbers and phrases
    stay in the prose's ``{glue:text}`` roles, which only the book renders."""
    import json

    replaced = 0
    for source in sorted((outdir / "_sources").rglob("*.ipynb")):
        run = executed / source.relative_to(outdir / "_sources")
        if run.is_file():
            glue = run.with_suffix(".glue.json")
            glued = json.loads(glue.read_text()) if glue.is_file() else {}
            notebook = with_glued_figures(json.loads(run.read_text()), glued)
            partial = source.with_name(source.name + ".part")
            partial.write_text(json.dumps(notebook, indent=1, ensure_ascii=False) + "\n")
            partial.replace(source)
            replaced += 1
    return replaced


def _after_build(app, exception) -> None:
    """After an HTML build: results/ as ``RESULTS_ZIP`` in the output, the header's download, and the
    executed notebooks as the pages' ".ipynb" downloads (``executed_sources``)."""
    if exception is None and app.builder.format == "html":
        from myst_nb.sphinx_ext import OUTPUT_FOLDER

        outdir = Path(app.outdir)
        zip_results(Path(app.srcdir).parent / "results", outdir / RESULTS_ZIP)
        executed_sources(outdir, outdir.parent / OUTPUT_FOLDER)


def setup(app):
    """Sphinx extension hook (listed in ``_config.yml``): chapters executed by the book build read saved
    results and never train, unless ``ATTNLIB_TRAIN_MISSING`` was set explicitly; and every page carries
    each of its scripts once (see ``_unique_scripts``); a page whose sentences hold the missing mark fails
    the build (``_check_missing``); every page's
    header links to the repository, to a zip of results/ and to the book's PDF, and its ".ipynb" download
    carries the outputs (``_repository_link``, ``_results_button``, ``_after_build``)."""
    os.environ.setdefault(TRAIN_MISSING_ENV, "0")
    app.connect("config-inited", _repository_link)
    app.connect("html-page-context", _results_button, priority=600)  # after the theme's own buttons (501)
    app.connect("build-finished", _after_build)
    app.connect("html-page-context", _unique_scripts, priority=900)
    app.connect("doctree-resolved", _check_missing)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
