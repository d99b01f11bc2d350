"""The [Re] code's quirks as data (attnlib/models/quirks.yaml, read by quirks.py): each names a real field of its model's config, whose
default is the intended form; the registry's [Re] rows carry the [Re] value and Paper A's the intended one;
and the measures chapter 4 shows: Δ logits exactly 0 for a network compared with itself, > 0 for a switched
quirk, the init standard deviations those of the draws each form documents."""

import dataclasses
import re

import pytest

from attnlib.errors import ConfigError
from attnlib.experiments import EXPERIMENTS, PRESETS, resolve
from attnlib.models import FAMILIES, quirks

PAPER_A = "Cordonnier et al."


def _field(q):
    return {f.name: f for f in dataclasses.fields(FAMILIES[q.family][0])}.get(q.field)


def _value(name, preset, q):
    run = resolve(name, preset)
    return run.model.get(q.field, _field(q).default)


@pytest.mark.parametrize("q", quirks.QUIRKS, ids=lambda q: q.name)
def test_each_quirk_is_a_field_of_its_config_whose_default_is_the_intended_form(q):
    field = _field(q)
    assert field is not None, f"{q.family} has no field {q.field}"
    assert field.default == q.intended_value != q.re_value
    assert q.kind in quirks.KINDS and q.measured_on in q.experiments
    assert all(EXPERIMENTS[n].family == q.family for n in q.experiments)
    assert "/" in q.re_code and ".py" in q.re_code  # names the [Re] code's file


@pytest.mark.parametrize("q", quirks.QUIRKS, ids=lambda q: q.name)
def test_the_re_rows_carry_the_re_value_and_paper_a_rows_the_intended_one(q):
    for preset in PRESETS:
        for name in q.experiments:
            assert EXPERIMENTS[name].source.startswith("[Re]")
            assert _value(name, preset, q) == q.re_value, (name, preset)
        # every row of the registry that carries the [Re] value is listed, our variants aside
        carriers = {
            n
            for n, e in EXPERIMENTS.items()
            if e.family == q.family
            and (e.variant_of is None or e.source.startswith("[Re]"))  # a [Re] row kept out of the grid
            and _value(n, preset, q) == q.re_value
        }
        assert carriers == set(q.experiments), preset
        for name, e in EXPERIMENTS.items():
            if e.family == q.family and e.source.startswith(PAPER_A):
                assert _value(name, preset, q) == q.intended_value, (name, preset)


def test_paper_a_rows_exist_for_the_paper_model_quirks():
    assert any(e.family == "paper" and e.source.startswith(PAPER_A) for e in EXPERIMENTS.values())


@pytest.mark.parametrize("q", [q for q in quirks.QUIRKS if q.kind == "logits"], ids=lambda q: q.name)
def test_logit_change_is_zero_unswitched_and_positive_switched(q):
    same = quirks.logit_change(q.measured_on, q.field, q.re_value, "smoke", images=4)
    assert same == {"max_abs": 0.0, "argmax_share": 0.0}
    switched = quirks.logit_change(q.measured_on, q.field, q.intended_value, "smoke", images=4)
    assert switched["max_abs"] > 1e-6 and 0.0 <= switched["argmax_share"] <= 1.0


def test_a_switch_that_changes_the_parameters_is_refused():
    with pytest.raises(ConfigError, match="pool"):  # the noise slot's position row goes away
        quirks.logit_change("vit", "pool", "tokens", "smoke", images=2)


def test_the_noise_slot_gives_two_forwards_of_one_model_different_logits():
    assert quirks.noise_spread("vit", "smoke", images=2)["max_abs"] > 1e-6


def test_init_std_is_that_of_each_form_s_documented_draw():
    """The positional tables: N(0, 1) in the [Re] form (nn.Embedding's default), N(0, 0.02²) intended; the
    query projection U(±1/√fan_in) in the [Re] form, std 1/√(3·fan_in)."""
    probes = (("tables", r"encoding\.(row|col)_embeddings\.weight$"), ("query", r"attn\.query\.weight$"))
    re_form = quirks.init_std("learned_content_9h", probes, {"init": "re"}, "smoke")
    intended = quirks.init_std("learned_content_9h", probes, {"init": "official"}, "smoke")
    hidden = resolve("learned_content_9h", "smoke").model["hidden"]
    assert re_form["tables"] == pytest.approx(1.0, rel=0.15)
    assert intended["tables"] == pytest.approx(0.02, rel=0.15)
    assert re_form["query"] == pytest.approx(1 / (3 * hidden) ** 0.5, rel=0.1)
    assert intended["query"] == pytest.approx(0.02, rel=0.1)
    with pytest.raises(ConfigError, match="probes"):
        quirks.init_std("learned_content_9h", (("none", r"^no_such_parameter$"),), preset="smoke")


def test_get_names_the_quirks():
    assert quirks.get(quirks.QUIRKS[0].name) is quirks.QUIRKS[0]
    with pytest.raises(ConfigError, match="quirk"):
        quirks.get("no such quirk")


def test_the_book_table_marks_what_does_not_apply_and_right_aligns_the_numbers(monkeypatch):
    import IPython.display
    from bookcheck import injected_markup

    import attnbook as book

    def fake(q, preset):
        if q.kind == "init":
            return {
                "max_abs": None,
                "argmax_share": None,
                "std": {label: (1.0, 0.02) for label, _ in q.probes},
            }
        return {"max_abs": 0.125, "argmax_share": 2 / quirks.IMAGES, "std": {}}

    monkeypatch.setattr(quirks, "measure", fake)
    table, applies = book.re_quirks_table("budget")
    assert list(table["quirk"]) == list(applies["quirk"]) == [q.name for q in quirks.QUIRKS]
    for q, (_, row) in zip(quirks.QUIRKS, table.iterrows(), strict=True):
        if q.kind == "init":
            assert row["max |Δ logits|"] == row["predicted class changed"] == "—"
            assert row["std at init, [Re] / intended"].startswith(f"{q.probes[0][0]} 1.0 / 0.020")
        else:
            assert (
                row["max |Δ logits|"] == "0.12" and row["predicted class changed"] == f"2 of {quirks.IMAGES}"
            )
            assert row["std at init, [Re] / intended"] == "—"
    shown = []
    monkeypatch.setattr(IPython.display, "display", lambda obj: shown.append(obj))
    book.show_table(table, right=("max |Δ logits|",))
    html = shown[0].data  # the HTML shown
    assert (
        "text-align: right" in html and injected_markup(f"<article><section>{html}</section></article>") == []
    )
    right = html.split("{")[0]  # the selectors of the one style rule: the column's cells only
    assert "col3" in right and "col4" not in right
    assert "measured on" in applies and "measured on" not in table  # in the fold-out: the table fits the page


def test_a_damaged_quirks_file_is_refused_naming_the_quirk(monkeypatch, tmp_path):
    """quirks.yaml is checked on load: an unknown key or kind is a ConfigError naming the quirk; the package
    data ships it."""
    from importlib import resources
    from pathlib import Path

    import yaml

    text = resources.files("attnlib.models").joinpath("quirks.yaml").read_text(encoding="utf-8")
    doc = yaml.safe_load(text)
    for damage, said in ((dict(colour="red"), "keys"), (dict(kind="vibes"), "kind")):
        broken = {**doc, "quirks": [{**doc["quirks"][0], **damage}, *doc["quirks"][1:]]}
        (tmp_path / "quirks.yaml").write_text(yaml.safe_dump(broken), encoding="utf-8")
        monkeypatch.setattr(resources, "files", lambda package: tmp_path)
        with pytest.raises(ConfigError, match=re.escape(f"quirk '{doc['quirks'][0]['name']}' {said}")):
            quirks._load()
        monkeypatch.undo()
    pyproject = (Path(__file__).parents[1] / "pyproject.toml").read_text("utf-8")
    assert '"attnlib.models" = ["*.yaml"]' in pyproject
