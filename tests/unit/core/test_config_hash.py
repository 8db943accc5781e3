"""The config hash covers only the partition settings the scheme reads; ``fedlib migrate`` moves
runs stored under their old hash to the new one, once, setting aside runs that now coincide."""

import json
import os
import shutil
import socket
import warnings
from pathlib import Path

import numpy as np
import pytest

from fedlib import store
from fedlib.commands import cli
from fedlib.core.config import RunConfig, hash_with_unread_settings, unread_partition_defaults
from fedlib.datasets.partition import FIELDS_READ, PARTITIONS, SCHEME_SETTINGS, make_partition
from fedlib.engine import engine
from fedlib.errors import FedlibError
from fedlib.store import migration as store_migration
from tests.helpers import tiny_config

# a value off the default for every partition setting, valid for RunConfig
OFF_DEFAULT = {"beta": 0.1, "shards_per_client": 5, "classes_per_client": 1, "quantity_split": "official",
               "min_client_size": 2, "global_balance": True}
# natural refuses global_balance rather than ignoring it
UNREAD = [(scheme, name) for scheme in PARTITIONS for name in SCHEME_SETTINGS
          if name not in FIELDS_READ[scheme] and (scheme, name) != ("natural", "global_balance")]
READ = [(scheme, name) for scheme in PARTITIONS for name in FIELDS_READ[scheme]]


# ---------------------------------------------------------------------- the hash
def test_every_scheme_declares_what_it_reads_and_only_partition_settings():
    assert set(FIELDS_READ) == set(PARTITIONS)
    assert set(SCHEME_SETTINGS) == set(OFF_DEFAULT)
    assert FIELDS_READ["iid"] == ("global_balance",)
    assert set(FIELDS_READ["dirichlet"]) == {"beta", "min_client_size", "global_balance"}


@pytest.mark.parametrize("scheme, name", UNREAD)
def test_a_setting_the_scheme_ignores_leaves_the_hash_alone(scheme, name):
    plain = RunConfig(partition=scheme)
    changed = plain.replace(**{name: OFF_DEFAULT[name]})
    assert changed.hash() == plain.hash()
    assert hash_with_unread_settings(changed) != plain.hash(), "the old rule hashed it"


@pytest.mark.parametrize("scheme, name", READ)
def test_a_setting_the_scheme_reads_changes_the_hash(scheme, name):
    plain = RunConfig(partition=scheme)
    assert plain.replace(**{name: OFF_DEFAULT[name]}).hash() != plain.hash()


def test_hashes_of_configs_with_unread_settings_at_their_defaults_are_those_before_the_rule():
    # computed by the code before partition settings left the hash
    assert RunConfig().hash() == "83519abd8e67"
    assert RunConfig(partition="iid").hash() == "0b8a64308b0f"
    assert RunConfig(partition="quantity", classes_per_client=3, quantity_split="official").hash() == "d20e99800cfa"
    assert hash_with_unread_settings(RunConfig(partition="iid", beta=0.1)) == "4afb5f1421e0"
    assert RunConfig(partition="iid", beta=0.1).hash() == "0b8a64308b0f"


def test_global_balance_off_leaves_every_hash_as_it_was():
    """Off (the default), global_balance stays out of the hash; on, it is a new run (not for balanced,
    which is balanced already); on the natural partition it is refused in one line."""
    assert "global_balance" not in RunConfig().hashed_fields()
    assert RunConfig(global_balance=False).hash() == RunConfig().hash() == "83519abd8e67"
    pathological = RunConfig(partition="pathological", classes_per_client=1)
    assert pathological.replace(global_balance=True).hash() != pathological.hash()
    assert RunConfig(partition="balanced", global_balance=True).hash() == RunConfig(partition="balanced").hash()
    with pytest.raises(FedlibError, match="natural") as caught:
        RunConfig(partition="natural", global_balance=True)
    assert "\n" not in str(caught.value)


def test_unread_settings_enter_at_their_defaults():
    fields = RunConfig(partition="balanced", classes_per_client=1, beta=0.05).hashed_fields()
    assert fields["classes_per_client"] == 2 and fields["beta"] == 0.5
    assert unread_partition_defaults("dirichlet") == {"shards_per_client": 2, "classes_per_client": 2,
                                                      "quantity_split": "symmetric"}


@pytest.mark.parametrize("scheme", [s for s in PARTITIONS if s != "natural"])
def test_make_partition_reads_no_setting_its_scheme_does_not_declare(scheme):
    """Unread settings set to values no scheme would accept give the very same split."""
    labels = np.repeat(np.arange(4), 30)
    kwargs = {"beta": 1.0, "shards_per_client": 2, "classes_per_client": 2, "min_size": 1}
    junk = {"beta": -1.0, "shards_per_client": "x", "classes_per_client": "x", "quantity_split": "x", "min_size": "x",
            "global_balance": "x"}
    keyword = {"min_client_size": "min_size"}
    unread = {keyword.get(n, n): junk[keyword.get(n, n)] for n in SCHEME_SETTINGS if n not in FIELDS_READ[scheme]}
    plain = make_partition(scheme, labels, 4, 4, seed=3, **kwargs)
    other = make_partition(scheme, labels, 4, 4, seed=3, **{**kwargs, **unread})
    assert all(np.array_equal(a, b) for a, b in zip(plain.client_indices, other.client_indices))
    assert plain.params == other.params


# ---------------------------------------------------------------------- migration
@pytest.fixture(autouse=True)
def _no_reference_store(monkeypatch):
    monkeypatch.setenv("FEDLIB_REFERENCE", "off")


PLAIN_IID = dict(partition="iid", rounds=2, momentum=0.0, backend="sequential")


@pytest.fixture(scope="module")
def trained(tmp_path_factory) -> Path:
    """One finished run's folder (iid, beta 0.5), to copy from."""
    root = tmp_path_factory.mktemp("trained")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return engine.run(tiny_config(PLAIN_IID), results_dir=root, progress=False).folder


def stored_as_old_code(trained: Path, root: Path, rounds: int | None = None, **changes) -> str:
    """A copy of the trained run with ``changes`` in its config, laid out as code before the rule
    wrote it: folder and summary under the old hash; ``rounds``: an unfinished run of that many."""
    cfg = tiny_config(PLAIN_IID, **changes)
    old = hash_with_unread_settings(cfg)
    folder = root / old
    shutil.copytree(trained, folder)
    (folder / store.DIGEST_FILE).unlink()  # code of that time sealed nothing
    (folder / "config.json").write_text(cfg.to_json())
    summary = json.loads((folder / "summary.json").read_text())
    (folder / "summary.json").write_text(json.dumps({**summary, "config_hash": old}, indent=2, sort_keys=True))
    if rounds is not None:
        (folder / "summary.json").unlink()
        lines = (folder / "rounds.jsonl").read_text().splitlines(keepends=True)
        (folder / "rounds.jsonl").write_text("".join(lines[:rounds]))
    return old


def test_a_run_given_its_store_warns_about_an_old_hash_folder_there(trained, tmp_path, render_only):
    cfg = tiny_config(PLAIN_IID, beta=0.1)
    stored_as_old_code(trained, tmp_path, beta=0.1)
    store_migration._HINTED.clear()
    with pytest.warns(UserWarning, match=f"fedlib migrate --results {tmp_path}"), pytest.raises(engine.NotRun):
        engine.run(cfg, results_dir=tmp_path, progress=False)


def snapshot(root: Path) -> dict:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def test_migration_renames_an_old_hash_folder_and_the_run_is_served_again(trained, tmp_path):
    cfg = tiny_config(PLAIN_IID, beta=0.1)
    old = stored_as_old_code(trained, tmp_path, beta=0.1)
    assert old != cfg.hash()
    with pytest.warns(UserWarning, match=f"fedlib migrate --results {tmp_path}"):
        assert not store.is_stored(cfg, tmp_path)
    migration = store.migrate_hashes(tmp_path)
    assert migration.renamed == [(old, cfg.hash())] and not migration.set_aside and not migration.left
    assert sorted(p.name for p in tmp_path.iterdir()) == [cfg.hash()]
    assert json.loads((tmp_path / cfg.hash() / "summary.json").read_text())["config_hash"] == cfg.hash()
    # beta is unread: the same run
    served = engine.run(tiny_config(PLAIN_IID, beta=0.3), results_dir=tmp_path, progress=False)
    assert served.folder == tmp_path / cfg.hash() and served.origin == "served"


def test_migration_is_idempotent_and_dry_run_changes_nothing(trained, tmp_path):
    stored_as_old_code(trained, tmp_path, partition="balanced", classes_per_client=1)
    stored_as_old_code(trained, tmp_path, beta=0.2, seed=2)
    untouched = snapshot(tmp_path)
    assert len(store.migrate_hashes(tmp_path, dry_run=True).renamed) == 2
    assert snapshot(tmp_path) == untouched
    assert len(store.migrate_hashes(tmp_path).renamed) == 2
    once = snapshot(tmp_path)
    again = store.migrate_hashes(tmp_path)
    assert (again.renamed, again.set_aside, again.left) == ([], [], [])
    assert snapshot(tmp_path) == once


def test_runs_that_now_coincide_keep_the_finished_one_and_set_the_other_aside(trained, tmp_path):
    finished = stored_as_old_code(trained, tmp_path, beta=0.1)
    unfinished = stored_as_old_code(trained, tmp_path, rounds=1, beta=0.3)
    new = tiny_config(PLAIN_IID).hash()
    migration = store.migrate_hashes(tmp_path)
    assert migration.renamed == [(finished, new)] and migration.set_aside == [(unfinished, new)]
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([new, store.ASIDE_DIR])
    assert (tmp_path / store.ASIDE_DIR / unfinished / "config.json").exists(), "set aside, not deleted"
    assert json.loads((tmp_path / new / "config.json").read_text())["beta"] == 0.1
    assert [r.folder.name for r in store.list_runs(tmp_path, complete_only=False)] == [new]
    assert any(unfinished in line and store.ASIDE_DIR in line for line in migration.lines())


def test_a_run_already_under_the_new_hash_wins_a_tie_and_an_unfinished_one_loses(trained, tmp_path):
    shutil.copytree(trained, tmp_path / trained.name)  # beta 0.5: the same hash under both rules
    tied = stored_as_old_code(trained, tmp_path, beta=0.1)
    migration = store.migrate_hashes(tmp_path)
    assert migration.renamed == [] and migration.set_aside == [(tied, trained.name)]
    shutil.rmtree(tmp_path)
    stored_as_old_code(trained, tmp_path, rounds=1, beta=0.5)  # unfinished, already named by its new hash
    better = stored_as_old_code(trained, tmp_path, beta=0.1)
    migration = store.migrate_hashes(tmp_path)
    assert migration.renamed == [(better, trained.name)] and migration.set_aside == [(trained.name, trained.name)]
    assert (tmp_path / trained.name / "summary.json").exists()


def test_migration_refuses_with_one_line_and_leaves_stale_and_busy_folders_alone(trained, tmp_path):
    stale = tmp_path / "0123456789ab"
    shutil.copytree(trained, stale)
    busy = stored_as_old_code(trained, tmp_path, beta=0.1)
    (tmp_path / busy / store.CLAIM_FILE).write_text(json.dumps(
        {"host": socket.gethostname(), "pid": os.getpid(), "token": "t", "heartbeat": 1e12}))
    untouched = snapshot(tmp_path)
    migration = store.migrate_hashes(tmp_path)
    assert migration.renamed == [] and migration.set_aside == []
    assert {name for name, _ in migration.left} == {stale.name, busy}
    assert snapshot(tmp_path) == untouched
    (tmp_path / busy / store.CLAIM_FILE).unlink()
    clash = stored_as_old_code(trained, tmp_path, rounds=1, beta=0.3)  # unfinished: the one set aside
    (tmp_path / store.ASIDE_DIR / clash).mkdir(parents=True)  # set aside by an earlier migration
    migration = store.migrate_hashes(tmp_path)
    assert migration.renamed == [] and any(store.ASIDE_DIR in why for _, why in migration.left)
    assert (tmp_path / busy).exists() and (tmp_path / clash).exists()


def test_fedlib_migrate_reports_each_rename(trained, tmp_path, capsys):
    old = stored_as_old_code(trained, tmp_path, beta=0.1)
    assert cli.main(["migrate", "--results", str(tmp_path), "--dry-run"]) == 0
    assert f"renamed {old} -> {tiny_config(PLAIN_IID).hash()}" in capsys.readouterr().out and (tmp_path / old).exists()
    assert cli.main(["migrate", "--results-dir", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "1 renamed" in out and not (tmp_path / old).exists()
    assert cli.main(["migrate", "--results", str(tmp_path)]) == 0
    assert "0 renamed, 0 set aside, 0 left alone" in capsys.readouterr().out
