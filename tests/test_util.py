"""attnlib.util: the one JSON writer."""

import json
from pathlib import Path

import numpy as np

from attnlib.util import write_json


def test_write_json_writes_what_json_reads_back(tmp_path):
    obj = {"b": [1, 2.5, None], "a": {"z": True, "path": Path("x/y")}, "n": np.int64(3)}
    path = write_json(tmp_path / "sub" / "r.json", obj)
    text = path.read_text()
    assert text.endswith("\n") and text.index('"a"') < text.index('"b"')  # sorted keys
    assert json.loads(text) == {"a": {"path": "x/y", "z": True}, "b": [1, 2.5, None], "n": 3}  # a number
    assert [p.name for p in path.parent.iterdir()] == ["r.json"]  # no temporary file left
