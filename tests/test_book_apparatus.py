"""The book's apparatus (issue 31): chapter labels, the repository link, the downloads (results/, the book's PDF,
the executed notebooks) and the bibliography as the build prints it (attnbook.sphinx, book/references.bib)."""

from __future__ import annotations

import json
import re
import subprocess
import zipfile
from pathlib import Path

import pytest

from attnbook.sphinx import executed_sources, remote_url, repository, zip_results

ROOT = Path(__file__).resolve().parent.parent
BIB = ROOT / "book" / "references.bib"


def test_every_chapter_has_a_label_before_its_title():
    """Each chapter's title carries (chapter-<name>)=, so that a page refers to it by number,
    {numref}`Chapter %s <chapter-theory>`: with no label there is only the bare "chapter 1" the issue removes."""
    toc = (ROOT / "book" / "_toc.yml").read_text()
    chapters = re.findall(r"^\s*(?:root|- file):\s*(\d\d_\w+)\s*$", toc, flags=re.M)
    assert len(chapters) == 6, chapters
    for chapter in chapters:
        name = chapter[3:].replace("_", "-")
        source = (ROOT / "book" / f"{chapter}.py").read_text()
        assert re.search(rf"^# \(chapter-{name}\)=\n# # ", source, flags=re.M), chapter


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("git@github.com:owner/attnlib.git", "https://github.com/owner/attnlib"),
        ("https://gitlab.example.org/group/attnlib.git", "https://gitlab.example.org/group/attnlib"),
        ("/srv/git/attnlib", None),  # a local path is no link for a reader
    ],
)
def test_the_repository_link_comes_from_the_origin_remote(tmp_path, url, expected):
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    assert remote_url(tmp_path) is None  # no remote: _config.yml's repository.url stays
    subprocess.run(["git", "-C", str(tmp_path), "remote", "add", "origin", url], check=True)
    assert remote_url(tmp_path) == expected


def test_the_repository_is_written_once_in_config_yml(tmp_path):
    """``_config.yml``'s ``repository`` is the one place of its URL: the header's link and the PDF's links
    read it through ``repository``; the origin remote, where there is one, replaces it."""
    config = (ROOT / "_config.yml").read_text()
    url = re.search(r"^repository:\n\s+url:\s*(\S+)", config, re.M)[1]
    tracked = subprocess.run(
        ["git", "-C", str(ROOT), "ls-files"], capture_output=True, text=True
    ).stdout.split()
    files = [ROOT / name for name in tracked if (ROOT / name).is_file()]
    assert [p.name for p in files if url in p.read_text(errors="replace")] == ["_config.yml"]
    (tmp_path / "_config.yml").write_text(config)
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    assert repository(tmp_path) == {"url": url, "branch": "main", "path_to_book": "book"}
    subprocess.run(
        ["git", "-C", str(tmp_path), "remote", "add", "origin", "git@host.org:o/r.git"], check=True
    )
    assert repository(tmp_path)["url"] == "https://host.org/o/r"


def test_the_ipynb_download_is_the_executed_notebook_with_its_figures(tmp_path):
    """After the build, ``_sources/*.ipynb`` (the page's ".ipynb" download) is the executed notebook, and each
    figure glued out of it (myst-nb's .glue.json) is back in the cell that showed it, before its Markdown."""
    import nbformat

    sources, executed = tmp_path / "html" / "_sources", tmp_path / "jupyter_execute"
    sources.mkdir(parents=True)
    executed.mkdir()
    source = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("book.show(fig)")])
    nbformat.write(source, sources / "01_a.ipynb")
    (sources / "references.md").write_text("# References")
    figure = {"output_type": "display_data", "metadata": {"scrapbook": {"name": "fig-a"}},
              "data": {"image/png": "iVBORw0KGgo=", "text/plain": "<Figure>"}}  # fmt: skip
    shown = nbformat.v4.new_output(
        "display_data", {"text/markdown": "```{glue:figure} fig-a\n:name: fig-a\n```"}
    )
    table = nbformat.v4.new_output("display_data", {"text/html": "<table></table>"})
    run = nbformat.v4.new_notebook(
        cells=[nbformat.v4.new_code_cell("book.show(fig)", outputs=[table, shown])]
    )
    nbformat.write(run, executed / "01_a.ipynb")
    (executed / "01_a.glue.json").write_text(
        json.dumps({"fig-a": figure, "n": {"data": {"text/plain": "1"}}})
    )
    assert executed_sources(tmp_path / "html", executed) == 1
    got = nbformat.read(sources / "01_a.ipynb", as_version=4)
    nbformat.validate(got)
    outputs = got.cells[0].outputs
    assert [list(o.data) for o in outputs] == [["text/html"], ["image/png", "text/plain"], ["text/markdown"]]
    assert "scrapbook" not in outputs[1].metadata  # a plain output now, no glue of the book's
    assert (sources / "references.md").read_text() == "# References"
    assert not list(sources.glob("*.part"))


def test_results_zip_holds_every_file_under_results(tmp_path):
    results = tmp_path / "results"
    (results / "vit" / "budget-seed0").mkdir(parents=True)
    (results / "vit" / "budget-seed0" / "result.json").write_text('{"accuracy": 0.5}')
    (results / "bench.csv").write_bytes(b"a,b\n1,2\n")
    target = tmp_path / "html" / "_downloads" / "attnlib-results.zip"
    assert zip_results(results, target) == 2
    with zipfile.ZipFile(target) as archive:
        assert sorted(archive.namelist()) == ["results/bench.csv", "results/vit/budget-seed0/result.json"]
        assert archive.read("results/bench.csv") == b"a,b\n1,2\n"
    assert not list(target.parent.glob("*.part"))


def _printed():
    """Each entry of references.bib as the build's bibliography style (``bibtex_default_style`` of
    _config.yml) prints it: (key, label, text)."""
    import pybtex.database
    import pybtex.plugin
    import yaml

    config = yaml.safe_load((ROOT / "_config.yml").read_text())
    name = config["sphinx"]["config"].get("bibtex_default_style", "alpha")  # sphinxcontrib-bibtex's default
    bib = pybtex.database.parse_file(str(BIB))
    style = pybtex.plugin.find_plugin("pybtex.style.formatting", name)()
    return bib, [
        (e.key, e.label, e.text.render_as("text")) for e in style.format_entries(bib.entries.values())
    ]


def test_bibliography_titles_keep_their_capitals_and_labels_are_short():
    bib, printed = _printed()
    for key, label, text in printed:
        title = re.sub(r"[{}]", "", bib.entries[key].fields["title"])
        title = title.replace("``", "“").replace("''", "”").replace("\\%", "%")
        assert title in text, (key, text)  # as written: "[Re] On the ...", never "[re] on the ..."
        assert len(label) <= 3, label  # numeric: no "[PMukundVT21]" overflowing its column


def test_each_author_is_spelled_one_way_across_entries():
    bib, _ = _printed()
    spellings = {}
    for entry in bib.entries.values():
        for person in entry.persons.get("author", []):
            # one person: a family name and the first initial (Zhilin and Yiming Yang are two)
            first = (person.first_names or [""])[0][:1]
            spellings.setdefault((person.last_names[0], first), set()).add(str(person))
    assert {name: s for name, s in spellings.items() if len(s) > 1} == {}
    assert spellings["Varma", "M"] == {"Varma T, Mukund"}


def test_every_page_header_offers_the_results_and_the_book_pdf():
    """The download menu links results/ (zip) and the whole book's PDF, which `make pdf` writes beside the
    pages (the entry says so); the theme's ".pdf" entry, the browser's print of the page, says "print page"."""
    from attnbook import sphinx

    def pathto(name, resource):  # Sphinx's: a path relative to the page (here one folder down)
        return f"../{name}"

    printing = {
        "type": "javascript",
        "javascript": "window.print()",
        "text": ".pdf",
        "label": "download-pdf-button",
    }
    menu = {
        "type": "group",
        "label": "download-buttons",
        "buttons": [{"label": "download-source-button"}, printing],
    }
    context = {"header_buttons": [menu, {"label": "fullscreen-button"}], "pathto": pathto}
    sphinx._results_button(None, "sub/page", "page.html", context, None)
    book_pdf, results = menu["buttons"][-2:]
    assert results["url"] == f"../{sphinx.RESULTS_ZIP}" and results["text"] == "results/ (zip)"
    assert book_pdf["url"] == f"../{sphinx.BOOK_PDF}" and "make pdf" in book_pdf["text"]
    assert printing["text"] == "print page"
    assert len(context["header_buttons"]) == 2  # in the download menu, no second button
    bare = {"header_buttons": [], "pathto": pathto}  # a page without the menu (search, index)
    sphinx._results_button(None, "search", "search.html", bare, None)
    assert [b["url"] for b in bare["header_buttons"]] == [f"../{sphinx.BOOK_PDF}", f"../{sphinx.RESULTS_ZIP}"]


def test_a_chapters_claims_in_full_are_printed_once(monkeypatch):
    """A chapter's ledger names the introduction's (``printed_under``): its claims in full fold-out is marked
    ``print-repeat`` (left out on paper) and a ``print-only`` sentence refers to the introduction's ledger,
    whose label exists; the introduction's own fold-out is not marked."""
    import IPython.display

    from attnbook import display
    from attnlib.analysis import claims

    shown = []
    monkeypatch.setattr(IPython.display, "display", lambda obj: shown.append(getattr(obj, "data", obj)))
    frame = claims.ledger(claims.Evidence("budget"))
    display.show_ledger(frame, caption="All claims.")
    display.show_ledger(frame.iloc[:2], caption="Two claims.", printed_under="intro-claims")
    own, repeated = shown[1], shown[3]  # each call: the table, then the fold-out's Markdown
    assert own.startswith(":::{dropdown} The claims in full") and "print-" not in own
    assert repeated.count(":::{dropdown}") == 1 and "\n:class-container: print-repeat\n" in repeated
    assert ":::{container} print-only\n" in repeated and "{ref}`intro-claims`" in repeated
    assert "# (intro-claims)=\n# ## " in (ROOT / "book" / "00_intro.py").read_text()
    css = (ROOT / "book" / "_static" / "attnlib.css").read_text()
    assert ".print-repeat" in css and ".print-only" in css
