"""claims.yaml, the claims ledger's claims as data: the file read once (`document`), its families of
experiments (`families`) and its claims, each checked on load and made a `Claim` (`load`): its source and
words, its measure, and the rule that judges it, looked up by name among the rule functions the ledger offers
(`attnlib.analysis.claims.RULES`), with its parameters. A damaged file stops the import with a ConfigError
naming the claim and the key."""

from __future__ import annotations

import functools
import inspect
import string
from collections.abc import Callable
from dataclasses import dataclass, field

from attnlib import experiments
from attnlib.analysis.literature import PAPER, RE
from attnlib.checks import check
from attnlib.errors import ConfigError

# The types of a rule's parameters in claims.yaml, as its annotations name them
Experiment = str  # one experiment of the registry
Experiments = tuple[str, ...]  # a family's name, or a list of experiments and families
Presets = tuple[str, ...]  # a list of presets


@dataclass(frozen=True)
class Claim:
    """One claim of claims.yaml: its words and the rule that judges it (`test`)."""

    key: str
    title: str  # a few words, for tables
    source: str  # paper
    where: str  # section / figure
    words: str  # the claim in the source's words (quoted) or, where the text was not recovered, a paraphrase
    measure: str  # how it is measured, in words
    rule: str  # the rule, in words
    judge: Callable[..., tuple[str, str]]  # the rule function: (evidence, **params) -> (value, verdict)
    params: dict = field(default_factory=dict)  # the rule's parameters (claims.yaml)

    def test(self, ev) -> tuple[str, str]:
        """(value, verdict) of the claim on the evidence `ev` (`attnlib.analysis.rules.Evidence`, which imports
        this module: no annotation, no import circle)."""
        return self.judge(ev, **self.params)


@functools.cache
def document() -> dict:
    """claims.yaml as parsed (read once per process): ``families`` and ``claims``, checked by `families` and
    `load`."""
    from importlib import resources

    import yaml

    found = yaml.safe_load(resources.files("attnlib.analysis").joinpath("claims.yaml").read_text("utf-8"))
    check(isinstance(found, dict), "claims.yaml", type(found).__name__, "a mapping of families and claims")
    return found


FAMILY_NAMES = ("quadratic", "learned_positional", "learned_content", "resnets", "ha_pairs")


def families(doc: dict) -> dict[str, tuple[str, ...]]:
    """claims.yaml's ``families`` (those of FAMILY_NAMES and any other, each a list of the registry's
    experiments) and ``ha_family``, derived: each model of ``ha_pairs`` followed by its HA variant. A
    ConfigError names a missing family or one with a name the registry does not know."""
    found, known = doc.get("families"), experiments.names(variants=True)
    found = found if isinstance(found, dict) else {}
    for name in dict.fromkeys([*FAMILY_NAMES, *found]):
        ok = isinstance(found.get(name), list) and all(m in known for m in found[name])
        check(ok, f"claims.yaml: families: {name}", found.get(name), "a list of the registry's experiments")
    out = {name: tuple(members) for name, members in found.items()}
    return out | {"ha_family": tuple(n for b in out["ha_pairs"] for n in (b, b + "_ha"))}


SOURCES = {"paper": PAPER, "re": RE}  # claims.yaml's source -> the paper's name
#: A claim of claims.yaml: each key and what it holds (a type, a mapping of keys, or the names allowed).
#: evidence.kind says what the verdict rests on (claims.yaml's header says what each means).
SCHEMA = {
    "key": str,
    "title": str,
    "source": tuple(SOURCES),
    "where": str,
    "words": str,
    "measure": {"name": str, "words": str},
    "rule": {"name": str, "params": dict, "words": str},
    "evidence": {
        "kind": ("live", "maps", "seeds", "means", "counted", "measured", "timed"),
        "models": (str, list),
    },
}
_TYPES = {str: "a string", dict: "a mapping", (str, list): "a family's name or a list"}


class _Words(string.Formatter):
    """The words of a claim's measure and rule, formatted over its rule's parameters: {x!t} the display name of
    experiment x, {x!i} the reciprocal of number x."""

    def convert_field(self, value, conversion):
        if conversion == "t":
            return experiments.get(value).title
        return 1 / value if conversion == "i" else super().convert_field(value, conversion)


def _check(where: str, found: dict, schema: dict, part: str = "") -> None:
    """The mapping `found` (the claim, or its `part`) as `schema` says (SCHEMA or a part of it): every key, each
    of its type or one of its names, and no other key; a ConfigError names the first key that is not."""
    extra = sorted(set(found) - set(schema))
    check(not extra, f"{where}: {part}{extra[0] if extra else ''}", "an unknown key", ", ".join(schema))
    for key, kind in schema.items():
        at, value = f"{where}: {part}{key}", found.get(key)
        if isinstance(kind, dict):
            check(isinstance(value, dict), at, value, f"a mapping of {', '.join(kind)}")
            _check(where, value, kind, f"{part}{key}.")
        elif isinstance(kind, tuple) and isinstance(kind[0], str):
            check(value in kind, at, value, ", ".join(kind))
        else:
            check(isinstance(value, kind), at, value, _TYPES[kind])


def _experiments(where: str, value, families: dict) -> tuple[str, ...]:
    """A family's name, or a list of experiments and families, as the experiments it names (families expanded)."""
    items, known = [value] if isinstance(value, str) else value, experiments.names(variants=True)
    ok = isinstance(items, list) and all(v in families or v in known for v in items)
    check(ok, where, value, f"a family ({', '.join(families)}) or a list of experiments and families")
    return tuple(n for v in items for n in families.get(v, (v,)))


def _param(where: str, kind: str, value, families: dict):
    """A rule's parameter as its annotation `kind` (Experiment, Experiments, Presets or float) takes it."""
    if kind == "float":
        check(isinstance(value, int | float) and not isinstance(value, bool), where, value, "a number")
    elif kind == "Experiment":
        check(value in experiments.names(variants=True), where, value, "an experiment of the registry")
    elif kind == "Presets":
        ok = isinstance(value, list) and all(v in experiments.PRESETS for v in value)
        check(ok, where, value, f"a list of presets ({', '.join(experiments.PRESETS)})")
        return tuple(value)
    else:
        return _experiments(where, value, families)
    return value


def _claim(entry: dict, rules: dict, families: dict) -> tuple[Claim, tuple[tuple[str, ...], str]]:
    """One claim of claims.yaml and its evidence (the experiments it reads, their kind), each key checked."""
    where = f"claims.yaml: claim {entry['key']}"
    _check(where, entry, SCHEMA)
    rule, measure = entry["rule"], entry["measure"]["name"]
    check(rule["name"] in rules, f"{where}: rule.name", rule["name"], ", ".join(rules))
    judge, reads = rules[rule["name"]]
    check(measure == reads, f"{where}: measure.name", measure, f"{reads} (what {rule['name']} reads)")
    kinds = {p.name: p.annotation for p in list(inspect.signature(judge).parameters.values())[1:]}
    given = rule["params"]
    check(set(given) == set(kinds), f"{where}: rule.params", sorted(given), ", ".join(kinds))
    params = {k: _param(f"{where}: rule.params.{k}", t, given[k], families) for k, t in kinds.items()}
    words = {}
    for part in ("measure", "rule"):
        try:
            words[part] = _Words().format(entry[part]["words"], **params)
        except (KeyError, IndexError, ValueError, TypeError) as e:
            allowed = f"words over {', '.join(params)} ({e!r})"
            raise ConfigError(f"{where}: {part}.words", entry[part]["words"], allowed) from e
    models = _experiments(f"{where}: evidence.models", entry["evidence"]["models"], families)
    text = {k: entry[k] for k in ("key", "title", "where", "words")} | {"source": SOURCES[entry["source"]]}
    found = Claim(**text, measure=words["measure"], rule=words["rule"], judge=judge, params=params)
    return found, (models, entry["evidence"]["kind"])


def load(doc: dict, rules: dict) -> tuple[tuple[Claim, ...], dict[str, tuple[tuple[str, ...], str]]]:
    """(claims, evidence) of claims.yaml as parsed (`doc`), its rules looked up in `rules` ({name: (function,
    the measure it reads)}): every claim, in order, checked on load (its keys and their types, its source, its
    rule and measure by name, the rule's parameters, the experiments and families it names, the words'
    fields; a ConfigError names the claim and the key), and {key: (the experiments it reads, their kind)}."""
    families_, found = families(doc), doc.get("claims")
    check(isinstance(found, list) and bool(found), "claims.yaml: claims", found, "a list of claims")
    out, evidence = [], {}
    for i, entry in enumerate(found, 1):
        key = entry.get("key") if isinstance(entry, dict) else None
        check(isinstance(key, str) and key not in evidence, f"claims.yaml: claim {i}: key", key, "a new key")
        claim, evidence[key] = _claim(entry, rules, families_)
        out.append(claim)
    return tuple(out), evidence
