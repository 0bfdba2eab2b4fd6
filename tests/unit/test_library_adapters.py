"""What the skrl and torchrl adapters, and ``gym.make`` of the vector-only id, refuse: exact messages that say what
to use instead, raised before any scene is built."""

from __future__ import annotations

import re

import gymnasium as gym
import pytest
from gymnasium.vector import AutoresetMode

from gs_gym import GenesisVectorEnv
from gs_gym.errors import VectorOnlyError
from gs_gym.registration import ENV_ID, VECTOR_ONLY_MESSAGE


def unbuilt_env(output: str, mode: AutoresetMode) -> GenesisVectorEnv:
    """A GenesisVectorEnv with only the attributes the checks read (no workers, no scene)."""
    env = object.__new__(GenesisVectorEnv)
    env.output, env.autoreset_mode = output, mode
    return env


def test_gym_make_names_make_vec_and_the_torchrl_adapter():
    assert "gym.make_vec" in VECTOR_ONLY_MESSAGE and "gs_gym.adapters.torchrl.make_env" in VECTOR_ONLY_MESSAGE
    with pytest.raises(VectorOnlyError, match=f"^{re.escape(VECTOR_ONLY_MESSAGE)}$"):
        gym.make(ENV_ID)
    with pytest.raises(gym.error.Error, match="is a vector env"):  # also Gymnasium's error type
        gym.make_vec(ENV_ID, num_envs=2, vectorization_mode="sync")


def test_torchrl_gym_env_names_what_to_use():
    pytest.importorskip("torchrl", reason='needs the torchrl extra: pip install "gs-gym[torchrl]"')
    from torchrl.envs import GymEnv

    with pytest.raises(VectorOnlyError, match=re.escape("use gs_gym.adapters.torchrl.make_env(N, ...)")):
        GymEnv(ENV_ID, num_envs=4)  # (its backend= names the gym library, not ours)


def test_torchrl_refuses_next_step_shards_and_other_envs():
    pytest.importorskip("torchrl", reason='needs the torchrl extra: pip install "gs-gym[torchrl]"')
    from gs_gym.adapters.torchrl import check_venv, make_env, wrap_env

    instead = "or use gs_gym.adapters.torchrl.make_env(num_envs, ...)"
    with pytest.raises(ValueError) as refused:
        wrap_env(unbuilt_env("torch", AutoresetMode.NEXT_STEP))
    assert str(refused.value) == (
        "gs_gym.adapters.torchrl: torchrl's GymWrapper refuses autoreset_mode=AutoresetMode.NEXT_STEP (it resets "
        f'done envs itself); build the GenesisVectorEnv with autoreset_mode="disabled" (preferred) or "same_step", '
        f"{instead}"
    )
    with pytest.raises(ValueError, match=re.escape("output='shards' (torchrl's batch is one tensor per key")):
        check_venv(unbuilt_env("shards", AutoresetMode.DISABLED))
    with pytest.raises(TypeError, match=re.escape("expected a gs_gym.GenesisVectorEnv, got str")):
        check_venv("not an env")
    check_venv(unbuilt_env("numpy", AutoresetMode.SAME_STEP))
    check_venv(unbuilt_env("torch", AutoresetMode.DISABLED))
    with pytest.raises(ValueError, match=r'autoreset_mode must be "disabled" \(preferred\) or "same_step"'):
        make_env(4, autoreset_mode="next_step", backend="cpu")  # refused before anything is built


def test_skrl_refuses_next_step_and_numpy():
    pytest.importorskip("skrl", reason='needs the skrl extra: pip install "gs-gym[skrl]"')
    from gs_gym.adapters.skrl import make_env, wrap_env

    with pytest.raises(ValueError) as refused:
        wrap_env(unbuilt_env("torch", AutoresetMode.NEXT_STEP))
    assert str(refused.value) == (
        "gs_gym.adapters.skrl.wrap_env: the GenesisVectorEnv must be built with "
        "autoreset_mode=AutoresetMode.SAME_STEP, got AutoresetMode.NEXT_STEP (skrl's wrapper resets the vector env "
        "once and counts every step towards an episode; or use gs_gym.adapters.skrl.make_env(num_envs, ...))"
    )
    with pytest.raises(ValueError, match=re.escape("output must be 'torch' (skrl's agents work on torch tensors")):
        make_env(4, output="numpy", backend="cpu")
    with pytest.raises(ValueError, match=re.escape("gs_gym.adapters.skrl.make_env: autoreset_mode must be")):
        make_env(4, autoreset_mode="next_step", backend="cpu")
