"""Config handling of the shared domain randomization (no scene is built here)."""

from __future__ import annotations

import pytest

from gs_gym.tasks import resolve_task
from gs_gym.tasks.randomization import DomainRandomizer, RandomizationConfig


def test_randomization_is_off_by_default():
    for name in ("go2-walk", "franka-reach"):
        config = resolve_task(name).make_config()
        assert config.randomization == RandomizationConfig()
        assert not config.randomization.enabled


def test_task_kwargs_accept_a_dict_for_the_nested_config():
    config = resolve_task("go2-walk").make_config(
        randomization={"friction_range": [0.5, 1.5], "push_interval_s": 4.0}, max_episode_steps=10
    )
    assert isinstance(config.randomization, RandomizationConfig)
    assert config.randomization.friction_range == (0.5, 1.5)
    assert config.randomization.push_interval_s == 4.0
    assert config.randomization.enabled
    assert config.max_episode_steps == 10


def test_unknown_and_invalid_randomization_options_are_named():
    go2 = resolve_task("go2-walk")
    with pytest.raises(ValueError, match="frictoin_range"):
        go2.make_config(randomization={"frictoin_range": (0.5, 1.0)})
    with pytest.raises(ValueError, match="friction_range"):
        RandomizationConfig(friction_range=(1.5, 0.5))
    with pytest.raises(ValueError, match="kp_scale_range"):
        RandomizationConfig(kp_scale_range=(0.0, 1.0))
    with pytest.raises(ValueError, match="obs_noise_scale"):
        RandomizationConfig(obs_noise_scale=-1.0)
    with pytest.raises(ValueError, match="push_interval_s"):
        RandomizationConfig(push_interval_s=0.0)


def test_franka_rejects_what_it_cannot_randomize():
    franka = resolve_task("franka-reach")
    with pytest.raises(ValueError, match="friction_range"):
        franka.make_config(randomization={"friction_range": (0.5, 1.0)})
    with pytest.raises(ValueError, match="push_interval_s"):
        franka.make_config(randomization={"push_interval_s": 1.0})
    franka.make_config(randomization={"added_mass_range": (0.0, 1.0), "kp_scale_range": (0.9, 1.1)})


def test_batched_genesis_info_is_requested_only_when_needed():
    def options(**kwargs):
        return DomainRandomizer(RandomizationConfig(**kwargs), 2, "cpu", 0.02).rigid_options()

    assert options() == {}
    assert options(friction_range=(0.5, 1.0), obs_noise_scale=1.0, push_interval_s=1.0) == {}
    assert options(added_mass_range=(0.0, 1.0)) == {"batch_links_info": True}
    assert options(kv_scale_range=(0.9, 1.1)) == {"batch_dofs_info": True}
    assert DomainRandomizer(RandomizationConfig(push_interval_s=1.0), 2, "cpu", 0.02).push_interval_steps == 50
