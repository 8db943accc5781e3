"""Folders a user names (options, notebook parameters, environment variables) are read one way:
a blank one is one line, ``~`` is the home folder, a symbolic link loop is one line; profile files
that cannot be read and a dataset cache that cannot be written say so in one line; meta.json
names the data folder relative to where the data live."""

import os
from pathlib import Path

import pytest

from fedlib import store
from fedlib.commands import cli
from fedlib.core.config import RunConfig
from fedlib.datasets import data
from fedlib.engine.engine import recorded_source
from fedlib.errors import FedlibError
from fedlib.folders import check_environment, user_folder
from fedlib.reporting.notebook import load_profiles, resolve_parameters
from tests.helpers import ROOT

HOME = Path.home()


@pytest.mark.parametrize("value", ["", " ", "\t"])
def test_a_blank_folder_is_one_line(value):
    with pytest.raises(FedlibError, match="names no folder"):
        user_folder(value, "--results")


def test_a_leading_tilde_is_the_home_folder():
    assert user_folder("~/fedres", "--results") == HOME / "fedres"
    assert user_folder(None, "--results") is None


@pytest.mark.parametrize("env", ["FEDLIB_RESULTS", "FEDLIB_DATA", "FEDLIB_CACHE", "FEDLIB_REFERENCE"])
@pytest.mark.parametrize("value", ["", " "])
def test_a_blank_folder_variable_is_one_line(monkeypatch, env, value):
    monkeypatch.setenv(env, value)
    with pytest.raises(FedlibError, match=rf"\${env} '{value}' names no folder.*unset {env}"):
        check_environment()


def test_folder_variables_expand_their_tilde_for_every_reader(monkeypatch):
    monkeypatch.setenv("FEDLIB_DATA", "~/fedlib-data")
    monkeypatch.setenv("FEDLIB_REFERENCE", "off")
    check_environment()
    assert os.environ["FEDLIB_DATA"] == str(HOME / "fedlib-data") and os.environ["FEDLIB_REFERENCE"] == "off"


def test_the_results_store_reads_a_tilde_and_refuses_a_blank(monkeypatch):
    monkeypatch.setenv("FEDLIB_RESULTS", "~/fedres")
    assert store.results_root() == HOME / "fedres"
    assert store.results_root("~/other") == HOME / "other"
    monkeypatch.setenv("FEDLIB_RESULTS", " ")
    with pytest.raises(FedlibError, match="FEDLIB_RESULTS ' ' names no folder"):
        store.results_root()


def test_a_config_expands_its_folders_and_refuses_blank_ones():
    cfg = RunConfig(dataset="digits", model="mlp", data_dir="~/d", results_dir="~/r")
    assert (cfg.data_dir, cfg.results_dir) == (str(HOME / "d"), str(HOME / "r"))
    with pytest.raises(FedlibError, match="results_dir '' names no folder"):
        RunConfig(dataset="digits", model="mlp", results_dir="")


def test_a_notebook_folder_parameter_that_is_blank_is_refused_and_a_tilde_expanded():
    with pytest.raises(FedlibError, match="results_dir '' names no folder"):
        resolve_parameters("getting_started", {"profile": None}, {"results_dir": ""}, ROOT)
    resolved = resolve_parameters("getting_started", {"profile": None}, {"results_dir": "~/fedres"}, ROOT)
    assert resolved["results_dir"] == str((HOME / "fedres").resolve())


def test_a_results_folder_that_is_a_symlink_loop_is_one_line(tmp_path, capsys):
    (tmp_path / "a").symlink_to(tmp_path / "b")
    (tmp_path / "b").symlink_to(tmp_path / "a")
    assert cli.main(["list", "--results", str(tmp_path / "a")]) == 2
    error = capsys.readouterr().err
    assert error.count("\n") == 1 and "symbolic link loop" in error, error


def test_a_profile_file_that_is_a_folder_or_not_utf8_is_one_line(tmp_path):
    (tmp_path / "folder.yaml").mkdir()
    with pytest.raises(FedlibError, match="folder.yaml is not a file"):
        load_profiles(tmp_path, "folder")
    (tmp_path / "latin.yaml").write_bytes("smoke: {note: caf\xe9}\n".encode("latin-1"))
    with pytest.raises(FedlibError, match="latin.yaml is not UTF-8 text"):
        load_profiles(tmp_path, "latin")


def test_a_profile_section_that_sets_profile_is_refused(tmp_path):
    (tmp_path / "nb.yaml").write_text("quick:\n  profile: paper\n  rounds: 3\n")
    with pytest.raises(FedlibError, match="profile 'quick' sets profile"):
        load_profiles(tmp_path, "nb")


def test_a_full_disk_under_the_dataset_cache_is_a_warning(tmp_path, monkeypatch):
    def full_disk(*args, **kwargs):
        raise RuntimeError("[enforce fail at inline_container.cc:595] . PytorchStreamWriter failed writing file")

    monkeypatch.setattr(data.torch, "save", full_disk)
    with pytest.warns(UserWarning, match="could not write its dataset cache"):
        data._write_cache(tmp_path / "digits.pt", data.load_dataset("digits"))
    assert list(tmp_path.iterdir()) == []


def test_meta_json_names_the_data_source_relative_to_its_data_folder(tmp_path, monkeypatch):
    (tmp_path / "MNIST" / "raw").mkdir(parents=True)
    monkeypatch.delenv("FEDLIB_DATA", raising=False)
    assert recorded_source(str(tmp_path / "MNIST" / "raw"), str(tmp_path)) == "MNIST/raw"
    monkeypatch.setenv("FEDLIB_DATA", str(tmp_path))
    assert recorded_source(str(tmp_path / "MNIST" / "raw"), None) == "MNIST/raw"
    monkeypatch.setenv("FEDLIB_DATA", str(tmp_path / "elsewhere"))
    assert recorded_source(str(tmp_path / "MNIST" / "raw"), None) == "raw"
    assert recorded_source("sklearn.datasets.load_digits", None) == "sklearn.datasets.load_digits"
