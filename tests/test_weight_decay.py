"""What models declare to the trainer, checked against the rules it applied before they declared it.

At the smoke preset, every registered experiment gets exactly the optimizer parameter groups of the former
name rule (no decay on the quadratic encodings' `centers` and `spreads`, paper App. A; decay on everything
else), and logs the state the trainer used to find by duck typing (centres, inverse covariances)."""

from __future__ import annotations

import pytest
import torch

from attnlib import experiments
from attnlib.models import logged_state
from attnlib.train import make_optimizer


def _groups_by_name_rule(model: torch.nn.Module, weight_decay: float) -> list[tuple[float, list[str]]]:
    """The parameter groups of the former name rule (names ending in .centers / .spreads: no decay)."""
    decay, no_decay = [], []
    for name, p in model.named_parameters():
        if p.requires_grad:
            exempt = name.endswith((".centers", ".spreads")) or name in ("centers", "spreads")
            (no_decay if exempt else decay).append(name)
    return [(weight_decay, decay)] + ([(0.0, no_decay)] if no_decay else [])


@pytest.mark.parametrize("name", experiments.names())
def test_optimizer_groups_match_the_former_name_rule(name):
    torch.manual_seed(0)
    model = experiments.build_model(name, "smoke")
    cfg = experiments.resolve(name, "smoke").train
    names = {id(p): n for n, p in model.named_parameters()}
    groups = [
        (g["weight_decay"], [names[id(p)] for p in g["params"]])
        for g in make_optimizer(model, cfg).param_groups
    ]
    assert groups == _groups_by_name_rule(model, cfg.weight_decay)
    quadratic = experiments.get(name).model.get("encoding", "").startswith("quadratic")
    assert (len(groups) == 2) == quadratic, "only the quadratic encodings have parameters without decay"


def _state_by_duck_typing(model: torch.nn.Module):
    """What the trainer logged before encodings declared it: every module with `centers` and an
    `inverse_covariance()`, stacked in module order."""
    found = [
        m
        for m in model.modules()
        if hasattr(m, "centers") and callable(getattr(m, "inverse_covariance", None))
    ]
    if not found:
        return None
    with torch.no_grad():
        return {
            "centers": torch.stack([m.centers.detach().float() for m in found]),
            "inverse_covariance": torch.stack([m.inverse_covariance().detach().float() for m in found]),
        }


@pytest.mark.parametrize("name", experiments.names())
def test_logged_state_matches_the_former_duck_typed_extraction(name):
    torch.manual_seed(0)
    model = experiments.build_model(name, "smoke")
    state, expected = logged_state(model), _state_by_duck_typing(model)
    assert (state is None) == (expected is None)
    if expected is not None:
        assert state.keys() == expected.keys()
        assert all(torch.equal(state[k], expected[k]) for k in expected)
