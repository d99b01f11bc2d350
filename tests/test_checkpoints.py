"""Checkpoints are validated before use (attnlib.train.checkpoint.checkpoint_problem through attnlib.train.fit): a
bad last.pt falls back to previous.pt, then to a fresh start, each in one line, and the run still ends
with the uninterrupted history and weights; a resumed complete run is re-evaluated, not trusted from its
history; divergence is detected on every update including the last, and the kept checkpoint is the last
finite one."""

from __future__ import annotations

import errno
import logging
import os

import pytest
import torch
from test_train import CFG, run, same_weights, strip

from attnlib.train import Checkpoints, TrainingDiverged, make_optimizer
from attnlib.train.checkpoint import checkpoint_problem


@pytest.fixture(scope="module")
def reference():
    model, out = run(None)
    return {k: v.clone() for k, v in model.state_dict().items()}, out


def crash_in_epoch_3(tmp_path):
    """Checkpoints of a run killed in its third epoch: last.pt (end of epoch 2), previous.pt (epoch 1)."""

    def crash(epoch, step, x, y):
        if epoch == 2:
            raise RuntimeError("simulated crash")

    with pytest.raises(RuntimeError):
        run(tmp_path, crash)


def edit(path, change) -> None:
    state = torch.load(path, weights_only=True)
    change(state)
    torch.save(state, path)


DAMAGES = {
    "weights of another shape": lambda s: s["model"].__setitem__("fc.weight", torch.zeros(3, 3)),
    "a weight missing": lambda s: s["model"].pop("conv.bias"),
    "NaN weights": lambda s: s["model"]["fc.weight"].fill_(float("nan")),
    "epoch a string": lambda s: s.__setitem__("epoch", "2"),
    "epoch past the end, empty history": lambda s: s.update(epoch=CFG.epochs, history=[]),
    "huge step": lambda s: s.__setitem__("step", 10**12),
    "optimizer of another shape": lambda s: s["optimizer"]["state"][0].__setitem__(
        "momentum_buffer", torch.zeros(2)
    ),
    "a history row forged": lambda s: s["history"][-1].__setitem__("test_acc", 1.5),
    "another format": lambda s: s.__setitem__("format", 2),
}


@pytest.mark.parametrize("damage", list(DAMAGES))
def test_a_bad_last_checkpoint_falls_back_to_previous_in_one_line(tmp_path, reference, caplog, damage):
    ref_weights, ref = reference
    crash_in_epoch_3(tmp_path)
    edit(tmp_path / "last.pt", DAMAGES[damage])
    with caplog.at_level(logging.WARNING, logger="attnlib"):
        model, out = run(tmp_path)
    warnings = [r.getMessage() for r in caplog.records if "checkpoint" in r.getMessage()]
    assert len(warnings) == 1 and "\n" not in warnings[0], (
        warnings
    )  # what is wrong and what it does: one line
    assert "last.pt is damaged" in warnings[0] and "; resuming from previous.pt (epoch 1)" in warnings[0]
    assert out.resumed.startswith("previous.pt (epoch 1")
    assert strip(out.history) == strip(ref.history) and same_weights(model.state_dict(), ref_weights)


def test_both_checkpoints_bad_start_afresh(tmp_path, reference, caplog):
    ref_weights, ref = reference
    crash_in_epoch_3(tmp_path)
    edit(tmp_path / "last.pt", DAMAGES["weights of another shape"])
    edit(tmp_path / "previous.pt", DAMAGES["NaN weights"])
    with caplog.at_level(logging.WARNING, logger="attnlib"):
        model, out = run(tmp_path)
    warnings = [r.getMessage() for r in caplog.records if "checkpoint" in r.getMessage()]
    assert len(warnings) == 1 and "\n" not in warnings[0], warnings
    assert "last.pt is damaged" in warnings[0] and "previous.pt is damaged" in warnings[0]
    assert warnings[0].endswith("; training from scratch") and out.resumed is None
    assert strip(out.history) == strip(ref.history) and same_weights(model.state_dict(), ref_weights)


def test_a_resumed_complete_run_is_reevaluated_not_trusted(tmp_path, reference, caplog):
    """A complete last.pt whose history claims 0.99: the result carries what its weights give."""
    _, ref = reference
    run(tmp_path)
    edit(tmp_path / "last.pt", lambda s: s["history"][-1].__setitem__("test_acc", 0.99))
    with caplog.at_level(logging.WARNING, logger="attnlib"):
        _, out = run(tmp_path)
    assert out.history[-1]["test_acc"] == ref.history[-1]["test_acc"] != 0.99
    assert "says test accuracy 0.99" in caplog.text


KILLED = 77  # the forked run's exit status when killed at its point


def _killed_at(folder, point: str) -> None:
    """`run(folder)` in a forked process killed at `point` of its second checkpoint (end of epoch 2) by
    os._exit, as SIGKILL would: no finally block, no handler, no clean-up. "between": after last.pt (epoch 1)
    became previous.pt too, before the new last.pt is renamed into place; "after": right after that rename;
    "no hard links": on a file system without them, after last.pt was renamed to previous.pt (no last.pt)."""
    pid = os.fork()
    if pid == 0:  # the child: never returns into pytest
        try:
            saves, save, keep = [], Checkpoints.save, Checkpoints._keep_previous

            def counted_save(self, state):
                saves.append(state["epoch"])
                save(self, state)
                if point == "after" and len(saves) == 2:
                    os._exit(KILLED)

            def keep_then_die(self, folder):
                keep(self, folder)
                if point != "after" and len(saves) == 2:
                    os._exit(KILLED)

            def no_link(*args, **kwargs):
                raise OSError(errno.EPERM, "Operation not permitted")

            Checkpoints.save, Checkpoints._keep_previous = counted_save, keep_then_die
            if point == "no hard links":
                os.link = no_link
            run(folder)
        finally:
            os._exit(1)
    _, status = os.waitpid(pid, 0)
    assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == KILLED, status


@pytest.mark.parametrize(
    ("point", "resumed"),
    [
        ("between", "last.pt (epoch 1)"),
        ("after", "last.pt (epoch 2)"),
        ("no hard links", "previous.pt (epoch 1)"),
    ],
)
def test_a_kill_at_the_checkpoint_swap_resumes_to_the_uninterrupted_run(
    tmp_path, reference, caplog, point, resumed
):
    """Killed exactly while a checkpoint replaces the last one, the run resumes from a complete checkpoint
    (the old one or the new one, never a part) and ends as an uninterrupted run would; where only previous.pt
    is left, it says so in one line."""
    ref_weights, ref = reference
    _killed_at(tmp_path, point)
    stray = [p.name for p in tmp_path.iterdir() if ".tmp" in p.name]
    assert stray == (
        [] if point == "after" else [stray[0]]
    )  # a real kill leaves the new file's temporary copy
    with caplog.at_level(logging.WARNING, logger="attnlib"):
        model, out = run(tmp_path)
    assert out.resumed == resumed
    said = [
        r.getMessage()
        for r in caplog.records
        if "checkpoint" in r.getMessage() or "last.pt" in r.getMessage()
    ]
    if point == "no hard links":
        assert len(said) == 1 and said[0].endswith("last.pt; resuming from previous.pt (epoch 1)"), said
    else:
        assert said == []
    assert strip(out.history) == strip(ref.history) and same_weights(model.state_dict(), ref_weights)


def _poison(model):
    """Hook the classifier's weight gradient: NaN while ``_poison.armed`` (set by a test's step callback)."""

    def on_grad(grad):
        return grad * float("nan") if _poison.armed else grad

    _poison.armed = False
    model.fc.weight.register_hook(on_grad)


def test_divergence_on_the_last_update_is_divergence(tmp_path):
    """The epoch's last update makes the weights NaN (the loss before it was finite): TrainingDiverged
    after the evaluation, and no checkpoint of those weights; last.pt stays the end of epoch 2."""

    def arm(epoch, step, x, y):
        _poison.armed = epoch == CFG.epochs - 1 and step == 3  # the last step of the last epoch

    with pytest.raises(TrainingDiverged, match="test loss became nan after epoch 3"):
        run(tmp_path, arm, hook=_poison)
    state = torch.load(tmp_path / "last.pt", weights_only=True)
    assert (state["epoch"], state["step"]) == (2, 0)
    assert all(bool(torch.isfinite(w).all()) for w in state["model"].values())


def test_the_kept_checkpoint_is_the_last_finite_one(tmp_path):
    """With a checkpoint after every step, the update of step 2 poisons the weights: the checkpoint due
    after it is not written, and the one kept (named in the message) is the one before, finite."""

    def arm(epoch, step, x, y):
        _poison.armed = epoch == 1 and step == 1

    with pytest.raises(
        TrainingDiverged, match="non-finite in epoch 2; the last good checkpoint is kept"
    ) as err:
        run(tmp_path, arm, checkpoint_every=0, hook=_poison)
    assert str(tmp_path / "last.pt") in str(err.value)
    state = torch.load(tmp_path / "last.pt", weights_only=True)
    assert (state["epoch"], state["step"]) == (1, 1)
    assert all(bool(torch.isfinite(w).all()) for w in state["model"].values())


def test_checkpoint_problem_accepts_what_fit_saves(tmp_path):
    model, _ = run(tmp_path)
    state = torch.load(tmp_path / "last.pt", weights_only=True)
    ours = make_optimizer(model, CFG)
    assert checkpoint_problem(state, model, epochs=CFG.epochs, steps=4, optimizer=ours) == ""
    assert ours.state_dict() == make_optimizer(model, CFG).state_dict()  # checked on a trial optimizer
    one_group = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)  # fit's has two (weight decay)
    assert checkpoint_problem(state, model, epochs=CFG.epochs, steps=4, optimizer=one_group).startswith(
        "its optimizer state is not this optimizer's (ValueError: loaded state dict has a different number"
    )
    assert "not a checkpoint" in checkpoint_problem([1], model, epochs=3, steps=4)
    assert checkpoint_problem({**state, "format": 0}, model, epochs=CFG.epochs, steps=4) == (
        "its format is 0, not 1: another attnlib's"
    )
    assert Checkpoints(tmp_path).load(check=lambda s: "bad")[0] is None
    torch.save([1], tmp_path / "last.pt")  # no checkpoint at all: another run's file, never resumed
    assert Checkpoints(tmp_path).load(check=lambda s: "") == (None, None)


def test_the_model_of_a_result_with_nan_weights_is_damaged(copy):
    from attnlib.lab.run import run_or_load, trained_model
    from attnlib.results.load import DamagedResult

    res = run_or_load("vit", "smoke", results_dir=copy, train_missing=False)
    last = res.path / "checkpoints" / "last.pt"
    edit(last, lambda s: next(v for v in s["model"].values() if v.is_floating_point()).fill_(float("nan")))
    with pytest.raises(
        DamagedResult, match=r"weight \S+ is not finite \(the run diverged before it was saved\)"
    ):
        trained_model(res)
