"""fedlib.core.state: the keyed randomness of a run."""

from fedlib.core.state import sample_clients


def test_client_sampling_is_keyed_by_seed_and_round():
    first = sample_clients(0, 5, 100, 0.1)
    assert first == sample_clients(0, 5, 100, 0.1)
    assert len(first) == 10 and first == sorted(set(first))
    assert first != sample_clients(0, 6, 100, 0.1)
    assert sample_clients(0, 0, 10, 1.0) == list(range(10))
