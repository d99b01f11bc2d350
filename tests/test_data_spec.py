"""attnlib.data.load.check_data, the one check of a data spec (issue 32)."""

import os

import pytest
from helpers import image_folder

from attnlib.data import DataFormatError, DataNotFoundError, check_data, load_dataset
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
            load_dataset(spec)
        assert str(loaded.value) == str(checked.value)
