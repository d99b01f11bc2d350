"""`preset` means one thing in the book (issue 32): a chapter shows runs of its `preset`, and the longer runs it
shows beside them are those of its own `long_preset` parameter, nowhere rewritten on the way (the ledger's
evidence, the measures per epoch, the attention maps of the appendix, the plan of the long runs)."""

from __future__ import annotations

import dataclasses

import pytest

import attnbook
from attnbook import display, maps
from attnbook.params import LONG_PRESET, default_data
from attnlib.analysis import claims


def _params(results_dir, **kw):
    return attnbook.check_params(preset="smoke", results_dir=results_dir, train_missing=False, **kw)


def test_long_preset_is_checked_like_preset(tmp_path):
    assert _params(tmp_path).long_preset == LONG_PRESET == "long"
    assert _params(tmp_path, long_preset="smoke").long_preset == "smoke"
    with pytest.raises(attnbook.ParameterError) as err:
        _params(tmp_path, long_preset="converge")
    assert str(err.value) == "long_preset: got 'converge'; allowed: paper, budget, smoke, long, budget30, tokens16"
    assert err.value._render_traceback_() == [f"ParameterError: {err.value}"]


def test_the_longer_runs_shown_are_those_of_long_preset(trained):
    """`trained` holds vit and vit_ha at smoke only: named as the long preset, they are found; at `long`,
    nothing is (no preset is read that the parameter does not name)."""
    at_long = maps.measured_runs(["vit", "vit_ha"], _params(trained))
    assert set(at_long.values()) == {None}
    at_smoke = maps.measured_runs(["vit", "vit_ha"], _params(trained, long_preset="smoke"))
    assert {run.preset for run in at_smoke.values()} == {"smoke"}
    assert {run.experiment for run in at_smoke.values()} == {"vit", "vit_ha"}


def test_a_chapter_at_its_long_preset_draws_nothing_twice(trained, monkeypatch):
    shown = []
    monkeypatch.setattr(display, "show", lambda fig, name=None, caption=None: shown.append(name))
    same = _params(trained, long_preset="smoke")
    assert attnbook.show_measured_attention(["vit"], same) == []  # the chapter's own figures are those runs
    assert attnbook.show_measured_centres(["quadratic_iso_9h"], same) == {}
    assert not shown
    other = dataclasses.replace(same, long_preset="paper")
    assert attnbook.show_measured_attention(["vit"], other) == [] and not shown  # none saved at `paper`


def test_the_ledger_prefers_the_chapters_long_preset(tmp_path, monkeypatch):
    """claims_ledger asks `claims.gather` for the chapter's long preset, not the ledger's own default."""
    asked = []

    def gather(results_dir, preset, seeds=range(10), data=None, prefer=None):
        asked.append((preset, prefer))
        raise LookupError("stop here")

    monkeypatch.setattr(claims, "gather", gather)
    for long_preset in ("long", "smoke", "paper"):
        with pytest.raises(LookupError):
            attnbook.claims_ledger(_params(tmp_path, long_preset=long_preset))
    assert asked == [("smoke", "long"), ("smoke", "smoke"), ("smoke", "paper")]


def test_data_defaults_to_the_librarys_one_default(tmp_path, monkeypatch):
    """A chapter's `data=None` is $ATTNLIB_DATA (what attnlib.data.load_cifar10 reads), else None: no folder
    of the book's own (reading needs none: a fingerprint records "cifar10" for any copy)."""
    monkeypatch.delenv(attnbook.params.DATA_ENV, raising=False)
    assert default_data() is None
    assert (
        attnbook.check_params(preset="budget", data=None, results_dir=tmp_path, train_missing=True).data
        is None
    )
    folder = tmp_path / "cifar"
    folder.mkdir()
    monkeypatch.setenv(attnbook.params.DATA_ENV, str(folder))
    assert attnbook.check_params(preset="budget", data=None, results_dir=tmp_path).data == str(
        folder.resolve()
    )
    assert attnbook.check_params(preset="smoke", data=None, results_dir=tmp_path).data is None  # its own
    monkeypatch.setenv(attnbook.params.DATA_ENV, str(tmp_path / "gone"))
    with pytest.raises(attnbook.ParameterError, match="does not exist: set ATTNLIB_DATA or pass data"):
        attnbook.check_params(preset="budget", data=None, results_dir=tmp_path, train_missing=True)


def test_reading_never_trains_and_training_is_the_chapters_explicit_call(tmp_path):
    """load_all reads (a missing run stays missing and nothing is written, even where the chapter may
    train); train_missing trains what is missing, then reads find it, and a second call trains nothing."""
    params = attnbook.check_params(preset="smoke", device="cpu", results_dir=tmp_path, train_missing=True)
    runs = attnbook.load_all(["vit"], params)
    assert runs["vit"] is None and runs.status["vit"][0] == "missing" and not any(tmp_path.iterdir())
    assert attnbook.train_missing(["vit"], params) == ["vit"]
    runs = attnbook.load_all(["vit"], params)
    assert runs["vit"] is not None and runs.status["vit"] == ("complete", "")
    assert runs["vit"].preset == "smoke" and not runs["vit"].trained
    assert attnbook.train_missing(["vit"], params) == []


def test_a_data_folder_is_checked_by_the_librarys_one_check(tmp_path):
    """attnlib.data.load.check_data decides; the chapter says it in one line with the reason in brackets."""
    folder = tmp_path / "cifar"
    (folder / "train").mkdir(parents=True)
    with pytest.raises(
        attnbook.ParameterError, match=r"^data: got '.*cifar'; allowed: .*\(no CIFAR-10 there"
    ):
        _params(tmp_path, data=str(folder))  # train/ without test/
    (folder / "test").mkdir()
    assert _params(tmp_path, data=str(folder)).data == str(folder.resolve())
    with pytest.raises(attnbook.ParameterError, match=r"^data: got 'synthetic:0:4'; allowed: None"):
        _params(tmp_path, data="synthetic:0:4")
    assert _params(tmp_path, data="synthetic:8:4").data == "synthetic:8:4"
