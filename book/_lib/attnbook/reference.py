"""The appendix's reference tables, generated from the registry and the literature: the training protocols and
model configurations of a preset laid out to fit the text column (at most ``REFERENCE_COLUMNS`` side by
side), how our protocol differs from the papers', and the [Re] code's quirks measured live.
"""

from __future__ import annotations

from attnbook.phrases import title, word_list
from attnbook.tables import NOT_FOUND_CELL, group


def protocol_differences_table():
    """(table, checked): how our protocol differs from the papers' (``attnlib.analysis.literature.protocol_differences``),
    one row per difference with "applies to" naming the models (their titles, "every model", or "every model
    but" the few it leaves out, whichever is shorter) and the presets where it holds, and a second table of
    where each side was read (for a fold-out)."""
    import pandas as pd

    from attnlib.analysis.literature import protocol_differences
    from attnlib.experiments import EXPERIMENTS

    def models_cell(models) -> str:
        rest = [m for m in EXPERIMENTS if m not in models]
        if "every" in models or not rest:
            return "every model"
        if len(rest) < len(models):
            return "every model but " + word_list([title(m) for m in rest])
        return word_list([title(m) for m in models])

    def where(d) -> str:
        models = models_cell(d.models)
        presets = "every preset" if "every" in d.presets else "preset " + word_list(d.presets)
        return f"{models}; {presets}"

    diffs = protocol_differences()
    table = pd.DataFrame(
        [{"what": d.what, "ours": d.ours, "the papers": d.theirs, "applies to": where(d)} for d in diffs]
    )
    checked = pd.DataFrame([{"what": d.what, "read in": d.checked} for d in diffs])
    return table, checked


def re_quirks_table(preset: str = "budget"):
    """(table, applies): the [Re] code's quirks (``attnlib.models.quirks.QUIRKS``), one row each: what the [Re]
    code does, the intended form, what was compared on which model, and the difference measured now
    (``attnlib.models.quirks.measure``: max |Δ logits| and the images whose predicted class changes, at ``preset``;
    the standard deviations at initialisation, [Re] / intended, at the paper preset); "—" where a measure does
    not apply. ``applies``, for a fold-out: where each was measured and the [Re] rows that carry it."""
    import pandas as pd

    from attnlib.models import quirks

    compared = {
        "logits": f"[Re] form against the intended one, same weights, {preset} size",
        "noise": f"two forwards of the [Re] form, fresh noise, {preset} size",
        "init": "freshly built, each form, paper size",
    }
    rows = []
    for q in quirks.QUIRKS:
        m = quirks.measure(q, preset)
        changed = NOT_FOUND_CELL
        if m["argmax_share"] is not None:
            changed = f"{round(m['argmax_share'] * quirks.IMAGES)} of {quirks.IMAGES}"
        rows.append({
            "quirk": q.name,
            "what the [Re] code does": q.re_code,
            "intended form": q.intended,
            "max |Δ logits|": NOT_FOUND_CELL if m["max_abs"] is None else f"{m['max_abs']:#.2g}",
            "predicted class changed": changed,
            "std at init, [Re] / intended": "; ".join(
                f"{label} {a:#.2g} / {b:#.2g}" for label, (a, b) in m["std"].items()
            ) or NOT_FOUND_CELL,
        })  # fmt: skip
    applies = pd.DataFrame(  # the fold-out: where each was measured, and the rows it applies to
        [
            {
                "quirk": q.name,
                "measured on": f"{title(q.measured_on)}: {compared[q.kind]}",
                "[Re] models": "; ".join(title(n) for n in q.experiments),
            }
            for q in quirks.QUIRKS
        ]
    )
    return pd.DataFrame(rows), applies


def training_table(preset: str):
    """One row per training protocol at ``preset`` (from the registry): the optimiser and schedule."""
    import pandas as pd

    from attnlib import experiments

    rows = []
    for protocol, p in experiments.PRESET_TABLE[preset].items():
        t = p.train
        users = [e.title for e in experiments.EXPERIMENTS.values() if e.protocol == protocol]
        rows.append(
            {
                "protocol": protocol,
                "experiments": ", ".join(users),
                "epochs": t.epochs,
                "batch": t.batch_size,
                "lr": t.lr,
                "schedule": t.schedule
                + (
                    f" (÷10 at {', '.join(f'{m:.0%}' for m in t.milestones)} of training)"
                    if t.milestones
                    else ""
                ),
                "warm-up": f"{t.warmup:.1%} of steps",
                "gradient clipping": f"norm {t.grad_clip:g}" if t.grad_clip else "none",
                "momentum": f"{t.momentum}" + (" (Nesterov)" if t.nesterov else ""),
                "weight decay": t.weight_decay,
                "label smoothing": t.label_smoothing,
                "data": p.data or "CIFAR-10",
                "why": p.reason,
            }
        )
    return pd.DataFrame(rows).set_index("protocol")


def model_table(preset: str, family: str):
    """One row per experiment of ``family`` at ``preset``: every field of its model config (registry)."""
    import dataclasses

    import pandas as pd

    from attnlib import experiments
    from attnlib.models import make_config

    rows = {}
    for e in experiments.EXPERIMENTS.values():
        if e.family == family:
            rc = experiments.resolve(e.name, preset)
            rows[e.name] = dataclasses.asdict(make_config(rc.family, **rc.model))
    return pd.DataFrame.from_dict(rows, orient="index")


#: The most protocols or models side by side in one transposed reference table of the appendix: with the
#: field names beside them, four columns of short settings fit the book's text column (`make check-book`).
REFERENCE_COLUMNS = 4


def breakable(name) -> str:
    """``name`` (an identifier such as ``learned_content_16h_ha``) as HTML that may wrap after each
    underscore (``<wbr>``), so that a narrow column breaks a long name there instead of widening the table;
    the text a reader sees and copies is unchanged."""
    return str(name).replace("_", "_<wbr>")


def shown_model(name) -> str:
    """How a reference table names a model: an experiment of the registry by its display name (its title,
    "SA learned 2D + content, 9 heads"), anything else as ``breakable``."""
    from attnlib.experiments import EXPERIMENTS

    return EXPERIMENTS[name].title if name in EXPERIMENTS else breakable(name)


def pack_groups(groups: dict[str, list], most: int = REFERENCE_COLUMNS) -> list[tuple[list[str], list]]:
    """``groups`` ({name: members}) packed in order into chunks of at most ``most`` members: a group joins the
    chunk before it when it fits there whole, and only a group of more than ``most`` members is split.
    Returns [(group names, members)]."""
    chunks: list[tuple[list[str], list]] = []
    for name, members in groups.items():
        for start in range(0, len(members), most):
            part = list(members[start : start + most])
            if chunks and start == 0 and len(chunks[-1][1]) + len(part) <= most:
                chunks[-1][0].append(name)
                chunks[-1][1].extend(part)
            else:
                chunks.append(([name], part))
    return chunks


def transposed(frame, rows, field: str = "field", header=breakable):
    """The ``rows`` (index labels) of ``frame`` laid out one row per field (its columns, named in a first
    column ``field``) and one column per row label, headed by ``header(label)`` (default: the label, which may
    wrap after underscores: ``breakable``); every cell as text, as ``str`` writes it ("0.1", "False",
    "(2, 2, 2, 2)"), and "—" where a row has no such field (None or NaN, never "nan")."""
    table = frame.loc[list(rows)].astype(object).T.map(_cell)
    table.columns = [header(c) for c in table.columns]
    return table.rename_axis(None).reset_index(names=field)


def _cell(value) -> str:
    """A reference table's cell: ``str(value)``, "—" for a field the model does not have (None, NaN)."""
    if value is None or (isinstance(value, float) and value != value):
        return "—"
    return str(value)


def protocol_tables(preset: str):
    """``training_table(preset)`` laid out to fit the text column: (settings, reasons). ``settings``: a list
    of (families, table), each table one row per setting and one column per protocol (at most
    ``REFERENCE_COLUMNS``), the protocols grouped by the model families that train with them (a protocol
    in the group of its first experiment's family); ``reasons``: one row per protocol with the experiments
    that use it and the reason recorded next to the preset in the registry, its one-line reason in ``why``
    and what led to it (the dated history of protocol_history.yaml, "" where none) in ``history``."""
    from attnlib import experiments

    table = training_table(preset)
    families: dict[str, list[str]] = {}
    for protocol in table.index:
        users = [e for e in experiments.EXPERIMENTS.values() if e.protocol == protocol]
        families.setdefault(users[0].family if users else "other", []).append(protocol)
    settings = table.drop(columns=["experiments", "why"])
    chunks = pack_groups(families)
    reasons = table[["experiments", "why"]].reset_index()
    past = [experiments.history(preset, p) for p in reasons["protocol"]]
    short = [w.removesuffix(h).rstrip() if h else w for w, h in zip(reasons["why"], past, strict=True)]
    reasons["why"] = [w[:-1] + "; the history below says why." if w.endswith((":", ",")) else w for w in short]
    reasons["history"] = past
    return [(names, transposed(settings, members, "setting")) for names, members in chunks], reasons


def model_tables(preset: str, family: str):
    """``model_table(preset, family)`` laid out to fit the text column: (shared, chunks). ``shared``: the
    fields of the same value in every model of a family of more than ``REFERENCE_COLUMNS`` models, one row
    each (field, value; else None). ``chunks``: a list of (groups, table), each table one row per other field
    and one column per experiment (at most ``REFERENCE_COLUMNS``), the experiments of a large family grouped
    as in the introduction's figure (``group``: "SA quadratic", "SA learned 2D"...), so that what sets each
    model apart reads down one column, headed by its display name; a field a model does not have reads "—"."""
    table = model_table(preset, family)
    same = [c for c in table.columns if len(table) > REFERENCE_COLUMNS and table[c].map(_cell).nunique() == 1]
    shared = transposed(table[same], table.index[:1], header=lambda _: "every model") if same else None
    groups: dict[str, list[str]] = {}
    for name in table.index:
        groups.setdefault(group(name), []).append(name)
    rest, chunks = table.drop(columns=same), pack_groups(groups)
    return shared, [(names, transposed(rest, members, header=_title)) for names, members in chunks]


def _title(experiment: str) -> str:
    """A model table's column header: the experiment's display name (the registry's title)."""
    from attnlib.experiments import get

    return get(experiment).title
