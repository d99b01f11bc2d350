"""attnlib.data.spec.check_data, the one check of a data spec, and the cache's build lock (issue 32)."""

import fcntl
import logging
import os
import threading
import time

import pytest
from helpers import image_folder

from attnlib.data import DataFormatError, DataNotFoundError, load_cifar10, load_dataset
from attnlib.data.spec import check_data
from attnlib.errors import ConfigError


def test_the_specs_that_pass_and_what_they_become(tmp_path):
    folder = image_folder(tmp_path / "cifar")
    assert check_data(None) is None
    assert check_data("synthetic") == "synthetic" and check_data("synthetic:30:20") == "synthetic:30:20"
    assert check_data(folder) == check_data(str(folder)) == str(folder.resolve())
    os.symlink(folder, tmp_path / "link")
    assert check_data(tmp_path / "link") == str(folder.resolve())


@pytest.mark.parametrize(
    "spec", ["synthetic:x", "synthetic:1", "synthetic:0:5", "synthetic:1:999999999", 3, b"x"]
)
def test_bad_specs_name_the_parameter(spec):
    for parameter in ("data", "--data"):
        with pytest.raises(ConfigError) as err:
            check_data(spec, parameter)
        assert err.value.parameter == parameter and "\n" not in str(err.value)


def test_folders_without_cifar10_are_refused_before_anything_is_read(tmp_path):
    with pytest.raises(DataNotFoundError, match="not an existing folder") as err:
        check_data(tmp_path / "missing")
    assert isinstance(err.value, FileNotFoundError) and err.value.parameter == "data"
    (tmp_path / "empty").mkdir()
    with pytest.raises(DataNotFoundError, match=r"no CIFAR-10 in .*train/<class>"):
        check_data(tmp_path / "empty")
    (tmp_path / "half" / "train").mkdir(parents=True)
    with pytest.raises(DataFormatError, match="has train/ but no test/"):
        check_data(tmp_path / "half")


def test_load_dataset_refuses_what_check_data_refuses(tmp_path):
    (tmp_path / "empty").mkdir()
    for spec in ("synthetic:0:5", tmp_path / "missing", tmp_path / "empty", 3):
        with pytest.raises(ConfigError) as checked:
            check_data(spec)
        with pytest.raises(ConfigError) as loaded:
            load_dataset(spec, cache_dir=tmp_path / "cache")
        assert str(loaded.value) == str(checked.value)


def test_a_load_waiting_for_the_build_lock_says_so_and_leaves_no_lock_file(tmp_path, caplog):
    """The build lock is on the cache folder itself: a second load waits for it (one line says so), then
    decodes, and the folder holds the cache only."""
    folder, cache = image_folder(tmp_path / "cifar"), tmp_path / "cache"
    cache.mkdir()
    caplog.set_level(logging.INFO, logger="attnlib.data")
    fd = os.open(cache, os.O_RDONLY | os.O_DIRECTORY)
    fcntl.flock(fd, fcntl.LOCK_EX)  # another process building
    result = []
    loader = threading.Thread(target=lambda: result.append(load_cifar10(folder, cache_dir=cache)))
    loader.start()
    time.sleep(1.0)
    assert not result and "waiting for another load" in caplog.text
    os.close(fd)
    loader.join(timeout=60)
    assert len(result[0].train) == 10 and [p.suffix for p in cache.iterdir()] == [".pt"]
