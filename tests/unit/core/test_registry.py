"""The method registry (fedlib.core.registry): names, aliases, compositions, and one config hash per
computation whatever its spelling."""

import pytest

from fedlib.core.registry import build_algorithm, get_class, method_class, method_names
from fedlib.errors import FedlibError
from tests.helpers import tiny_config


def test_registry_names_aliases_and_compositions():
    assert get_class("feded") is get_class("fedvls")
    assert get_class("fedcodl") is get_class("fedavg_kd")
    assert build_algorithm("fedvls", {}, dataset="mnist").hp["lam"] == 0.1
    for combo in ("fedlmd+fedprox", "fedlmd_tf+fedprox", "fedvls+fedprox"):
        assert method_class(combo).name == combo
    with pytest.raises(FedlibError):
        build_algorithm("fedlmd", {"variant": "code"})


def test_registry_and_composition():
    assert {"fedavg", "fedprox"} <= set(method_names())
    algorithm = build_algorithm("fedprox", {"mu": "0.5"})
    assert algorithm.hp["mu"] == 0.5  # string from the CLI converted to float
    combined = method_class("fedavg+fedprox")
    assert combined.name == "fedavg+fedprox" and combined.defaults == {"mu": 0.01}
    with pytest.raises(FedlibError):
        method_class("fedprox+fedprox")  # the same penalty hook twice


@pytest.mark.parametrize("spelling", [" fedvls + fedavg ", "feded", "fedavg+feded", "fedvls"])
def test_one_computation_has_one_hash_whatever_its_spelling(spelling):
    assert tiny_config(method=spelling).hash() == tiny_config(method="fedvls").hash()
    assert tiny_config(method=spelling).method == "fedvls"


def test_composition_order_is_kept_and_fedprox_plus_fedavg_is_fedprox():
    assert tiny_config(method="fedprox+fedavg").hash() == tiny_config(method="fedprox").hash()
    assert tiny_config(method="fedlmd+fedprox").method == "fedlmd+fedprox"
