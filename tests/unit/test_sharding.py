import pytest

from gs_gym.vector.sharding import EnvRange, split_envs


def test_even_and_uneven_splits():
    assert split_envs(8, 2) == [EnvRange(0, 4), EnvRange(4, 4)]
    assert split_envs(7, 3) == [EnvRange(0, 3), EnvRange(3, 2), EnvRange(5, 2)]
    assert split_envs(5, 1) == [EnvRange(0, 5)]


def test_more_workers_than_envs_is_refused():
    with pytest.raises(ValueError, match=r"^num_envs: expected at least one env per worker \(4 workers\), got 3$"):
        split_envs(3, 4)
