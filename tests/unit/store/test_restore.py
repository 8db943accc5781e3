"""Restoring a server from the store (issue 46): one function, ``store.restore_server``, for the
engine's resume and the drift analysis's local update, with one ``to_device``."""

from collections import namedtuple
from types import SimpleNamespace

import torch
from torch import nn

from fedlib import store
from fedlib.store import restore

Pair = namedtuple("Pair", "a b")

def _server():
    return SimpleNamespace(model=nn.Linear(2, 1), device=torch.device("meta"), round=0, extras={})

def test_to_device_moves_tensors_in_dicts_lists_and_tuples_and_keeps_the_rest():
    # the engine's former copy went through dicts and lists, drift's through dicts only: the one
    # version goes through both, and tuples too; anything else is kept as it is
    value = {"state": {"w": torch.ones(2)}, "history": [{"w": torch.zeros(1)}, torch.ones(1)],
             "pair": (torch.ones(1), 3), "count": 2, "rate": 0.5, "name": "x", "none": None, "named": Pair(1, 2)}
    moved = restore.to_device(value, "meta")
    assert moved["state"]["w"].device.type == "meta"
    assert moved["history"][0]["w"].device.type == "meta" and moved["history"][1].device.type == "meta"
    assert isinstance(moved["pair"], tuple) and moved["pair"][0].device.type == "meta" and moved["pair"][1] == 3
    assert (moved["count"], moved["rate"], moved["name"], moved["none"]) == (2, 0.5, "x", None)
    assert moved["named"] == Pair(1, 2) and isinstance(moved["named"], Pair)

def test_restore_server_loads_model_round_and_extras_on_the_servers_device():
    # the engine's resume: a checkpoint's model, round and extras (a FedGKD-like list of states)
    source = nn.Linear(2, 1)
    state = {"round": 3, "model": source.state_dict(), "extras": {"history": [{"w": torch.ones(2)}], "tau": 1.5}}
    server = _server()
    store.restore_server(server, state)
    assert server.round == 3
    assert torch.equal(server.model.weight, source.weight)
    assert server.extras["history"][0]["w"].device.type == "meta" and server.extras["tau"] == 1.5

def test_restore_server_keeps_the_servers_extras_for_another_method():
    # drift.local_update under a method other than the run's: the model only, the fresh extras kept
    state = {"round": 5, "model": nn.Linear(2, 1).state_dict(), "extras": {"teacher": {"w": torch.ones(1)}}}
    server = _server()
    server.extras = {"fresh": 1}
    store.restore_server(server, state, extras=False)
    assert server.extras == {"fresh": 1} and server.round == 5

def test_a_final_state_without_extras_restores_empty_extras():
    server = _server()
    store.restore_server(server, {"round": 1, "model": nn.Linear(2, 1).state_dict()})
    assert server.extras == {}

def test_saved_state_prefers_the_resume_checkpoint_then_the_final_state(tmp_path):
    record = store.RunRecord(tmp_path / "run")
    assert store.saved_state(record, "cpu") is None
    record.write_final({"round": 4, "model": {"w": torch.ones(1)}, "extras": {}})
    assert store.saved_state(record, "cpu")["round"] == 4
    record.write_checkpoint({"round": 2, "model": {"w": torch.zeros(1)}, "extras": {}})
    assert store.saved_state(record, "cpu")["round"] == 2
