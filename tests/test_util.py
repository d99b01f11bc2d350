"""attnlib.util: the one JSON writer, and the package class that keeps a split module's names patchable."""

import json
from pathlib import Path

import numpy as np

import attnlib.data as data_package
from attnlib.data import sources
from attnlib.util import write_json


def test_write_json_writes_what_json_reads_back(tmp_path):
    obj = {"b": [1, 2.5, None], "a": {"z": True, "path": Path("x/y")}, "n": np.int64(3)}
    path = write_json(tmp_path / "sub" / "r.json", obj)
    text = path.read_text()
    assert text.endswith("\n") and text.index('"a"') < text.index('"b"')  # sorted keys
    assert json.loads(text) == {"a": {"path": "x/y", "z": True}, "b": [1, 2.5, None], "n": "3"}
    assert [p.name for p in path.parent.iterdir()] == ["r.json"]  # no temporary file left
    unsorted = write_json(tmp_path / "u.json", {"b": 1, "a": 2}, sort_keys=False).read_text()
    assert unsorted.index('"b"') < unsorted.index('"a"')


def test_a_name_patched_on_a_package_is_patched_where_it_is_used(monkeypatch):
    """attnlib.data.decode_images set by a test reaches sources (whose _decode_imagefolder calls it); undo
    restores both."""
    original = sources.decode_images

    def fake(*a, **k):
        return None

    monkeypatch.setattr(data_package, "decode_images", fake)
    assert sources.decode_images is fake and data_package.decode_images is fake
    monkeypatch.undo()
    assert sources.decode_images is original and data_package.decode_images is original
