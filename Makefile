# attnlib — `make book` builds the HTML book, `make test` runs the whole test suite.
# Both do all set-up on a fresh clone: a virtual environment in .venv, the package with its extras,
# and a `python3` Jupyter kernel inside that environment (the user's own Jupyter config is not touched).

PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.attnlib-setup

# The kernelspec lives in the venv; JUPYTER_PATH puts it before any user-level `python3` spec.
export JUPYTER_PATH := $(abspath $(VENV))/share/jupyter
export MPLBACKEND   := Agg
export PYDEVD_DISABLE_FILE_VALIDATION := 1

.PHONY: setup test test-fast lint rings book check-book pdf chromium bench long seeds clean

# What the built book depends on: `check-book` rebuilds it only when one of these is newer than the build.
BOOK_STAMP  := _build/html/.attnlib-built
BOOK_INPUTS := _config.yml $(wildcard book/*.ipynb book/*.md book/*.bib book/*.yml book/_static/*) \
               $(shell find attnlib book/_lib results -type f \( -name '*.py' -o -name '*.yaml' -o -name '*.json' -o -name '*.csv' -o -name '*.npz' \) 2>/dev/null)

setup: $(STAMP)

$(STAMP): pyproject.toml
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --disable-pip-version-check -e '.[book,dev]'
	$(PY) -m ipykernel install --prefix $(abspath $(VENV)) --name python3 --display-name "Python 3 (attnlib)" >/dev/null
	@touch $@

lint: setup
	$(PY) -m ruff check attnlib book/_lib book/*.py tests tools

# Each ring's lines against its budget in CONTRIBUTING.md, and the modules, classes and functions grown too long
# (tools/rings.py; tests/test_rings.py runs it too).
rings:
	$(PYTHON) tools/rings.py

# The book is built once, with warnings as errors, before the suite; the suite checks that build
# (tests/test_book.py, $$ATTNLIB_BUILT_BOOK) and `make check-book` opens it without building it again.
test: setup lint $(BOOK_STAMP)
	ATTNLIB_BUILT_BOOK=$(CURDIR)/_build/html $(PY) -m pytest

test-fast: setup
	$(PY) -m pytest -m "not slow"

book: setup
	$(VENV)/bin/jupyter-book build book --all -W -n --keep-going
	@touch $(BOOK_STAMP)
	@echo "The book is at $(CURDIR)/_build/html/index.html"

$(BOOK_STAMP): $(STAMP) $(BOOK_INPUTS)
	$(MAKE) book

# Every page of the built book in headless Chromium, network off (tools/bookcheck.py): fails on
# unrendered TeX, a remote request, a JavaScript error, a figure wider than the page, one figure shown twice
# on a page, a model's code id or "not yet trained" in a sentence, an image that is not a numbered figure or
# a formula wider than its box; screenshots in _build/screenshots/. Needs Debian's `chromium`
# (apt-get install chromium).
check-book: setup chromium $(BOOK_STAMP)
	$(PY) tools/bookcheck.py _build/html

# The whole book as one PDF, _build/attnlib.pdf (A4; PAPER=Letter for US letter): a title page and contents,
# then every chapter page of the HTML build printed by the same Chromium, network off, numbered and joined,
# its links made internal (tools/bookpdf.py, tools/pdfparts.py); prints each chapter's page count and the
# links by kind (fails on a file:// link left, or on A4 chapters 0-4 over 40 pages or an appendix over 25:
# bookpdf.GROUPS); then the PDF is copied to _build/html/attnlib.pdf, which every
# page's download menu links (attnbook.sphinx.BOOK_PDF).
PAPER ?= A4
pdf: setup chromium $(BOOK_STAMP)
	$(PY) tools/bookpdf.py _build/html -o _build/attnlib.pdf --paper $(PAPER)
	cp _build/attnlib.pdf _build/html/attnlib.pdf

chromium: setup   # before the build: say at once how to install Chromium where it is missing
	@$(PY) tools/bookcheck.py --find-chromium

# The book's golden snapshot (tools/golden.py): every glued value, table, figure hash, the table1/table3 output
# and every fingerprint, at the chapters' default parameters, against tests/golden/book.json. `golden-write`
# rewrites it after a change made on purpose (say which in the commit).
golden: setup
	$(PY) tools/golden.py check

golden-write: setup
	$(PY) tools/golden.py write

bench: setup
	$(PY) -m attnlib bench

# The runs behind the claims ledger (attnlib.analysis.plan.LONG_PLAN), one single-thread lane per core; stop it
# any time (Ctrl-C): each run saves a checkpoint, and the same command goes on from there.
DATA ?= ../shared/data/cifar10
long: setup
	$(PY) -m attnlib queue --preset long --data $(DATA)

# The budget seeds the HA comparisons still lack by the project's standard (3 per side, 5 while the pair is
# inconclusive after Holm's adjustment over the HA pairs): rerun after they finish, since a comparison
# still inconclusive at 3 asks for 5.
seeds: setup
	$(PY) -m attnlib queue --preset budget --asked --data $(DATA)

clean:
	rm -rf _build book/_build book/_executed .pytest_cache
