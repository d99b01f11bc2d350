"""claims.yaml, the claims ledger's claims as data (attnlib.analysis.claims_file.load): a damaged file is
refused on load in one line naming the claim and the key, and every claim of the file is judged by the ledger."""

import copy
from importlib import resources
from pathlib import Path

import pytest
import yaml

from attnlib.analysis import claims, claims_file
from attnlib.analysis.rules import NOT_MEASURED, REPRODUCED, VERDICTS, Evidence
from attnlib.errors import ConfigError


def _text() -> str:
    return resources.files("attnlib.analysis").joinpath("claims.yaml").read_text("utf-8")


def _damaged(key: str, change) -> dict:
    """claims.yaml as parsed, with `change` applied to the claim `key`."""
    doc = copy.deepcopy(claims_file.document())
    change(next(c for c in doc["claims"] if c["key"] == key))
    return doc


def test_a_damaged_file_names_the_claim_and_the_key():
    """The file's own text with its ha_gain claim's `where` line deleted, or its ha_params rule misspelt."""
    text = _text()
    missing = text.replace("    where: §4.4\n    words: “at least", "    words: “at least", 1)
    assert missing != text
    with pytest.raises(ConfigError) as err:
        claims_file.load(yaml.safe_load(missing), claims.RULES)
    assert str(err.value) == "claims.yaml: claim ha_gain: where: got None; allowed: a string"
    unknown = text.replace("name: ha_share", "name: ha_fifth")
    assert unknown != text
    with pytest.raises(ConfigError) as err:
        claims_file.load(yaml.safe_load(unknown), claims.RULES)
    assert str(err.value).startswith("claims.yaml: claim ha_params: rule.name: got 'ha_fifth'; allowed: ")
    assert str(err.value).endswith(", ".join(claims.RULES)) and "ha_share" in claims.RULES


@pytest.mark.parametrize(
    "change,key,allowed",
    [
        (lambda c: c["measure"].pop("words"), "measure.words", "a string"),
        (lambda c: c.pop("measure"), "measure", "a mapping of name, words"),
        (lambda c: c.update(colour="red"), "colour", "key, title, source"),
        (lambda c: c.update(source="a blog"), "source", "paper, re"),
        (lambda c: c["measure"].update(name="peak"), "measure.name", "accuracy (what ha_gain reads)"),
        (lambda c: c["rule"]["params"].pop("gain"), "rule.params", "pairs, gain, untestable_at"),
        (lambda c: c["rule"]["params"].update(gain="5"), "rule.params.gain", "a number"),
        (
            lambda c: c["rule"]["params"].update(pairs=["vit", "vitt"]),
            "rule.params.pairs",
            "a family (quadratic",
        ),
        (
            lambda c: c["rule"]["params"].update(untestable_at=["budgett"]),
            "rule.params.untestable_at",
            "presets",
        ),
        (lambda c: c["rule"].update(words="above +{gains:g}"), "rule.words", "words over pairs, gain"),
        (lambda c: c["evidence"].update(kind="guessed"), "evidence.kind", "live, maps, seeds"),
        (lambda c: c["evidence"].update(models="has"), "evidence.models", "a family (quadratic"),
    ],
)
def test_each_key_of_a_claim_is_checked_on_load(change, key, allowed):
    with pytest.raises(ConfigError) as err:
        claims_file.load(_damaged("ha_gain", change), claims.RULES)
    said = str(err.value)
    assert said.startswith(f"claims.yaml: claim ha_gain: {key}: got ") and allowed in said, said


def test_the_families_and_the_claims_list_are_checked_on_load():
    doc = copy.deepcopy(claims_file.document())
    doc["claims"].append(copy.deepcopy(doc["claims"][0]))
    with pytest.raises(ConfigError, match=r"^claims.yaml: claim 17: key: got 'theorem'; allowed: a new key$"):
        claims_file.load(doc, claims.RULES)
    doc = copy.deepcopy(claims_file.document())
    doc["families"]["quadratic"] = ["quadratic_iso_9h", "quadratic_9h"]
    with pytest.raises(ConfigError, match=r"^claims.yaml: families: quadratic: got \["):
        claims_file.load(doc, claims.RULES)


def test_every_claim_of_the_file_is_judged_by_the_ledger():
    """Each claim of claims.yaml, in the file's order, is a row of the ledger judged by the rule the file names
    with the file's parameters: with nothing saved not measured; with the theorem's error it is judged."""
    entries = claims_file.document()["claims"]
    frame = claims.ledger(Evidence("budget"))
    assert list(frame["claim"]) == [e["key"] for e in entries] == list(claims.EVIDENCE)
    assert list(frame["title"]) == [e["title"] for e in entries]
    assert list(frame["words"]) == [" ".join(e["words"].split()) for e in entries]
    assert set(frame["verdict"]) == {NOT_MEASURED}
    for entry, claim in zip(entries, claims.CLAIMS, strict=True):
        assert claim.judge is claims.RULES[entry["rule"]["name"]][0]
        assert set(claim.params) == set(entry["rule"]["params"])
    judged = claims.ledger(Evidence("budget", theorem_error=1e-12)).set_index("claim")["verdict"]
    assert judged["theorem"] == REPRODUCED and set(judged) <= set(VERDICTS)


def test_the_file_ships_with_the_package():
    """pyproject's package data carries claims.yaml, as it carries the registry's protocol history."""
    pyproject = (Path(__file__).parents[1] / "pyproject.toml").read_text("utf-8")
    assert '\n"attnlib.analysis" = ["*.yaml"]' in pyproject.split("[tool.setuptools.package-data]")[1]
