"""``gs_gym.testing.check_vector_env``: passes on GenesisVectorEnv and Gymnasium's vector envs, and names what fails
on deliberately broken ones.

GenesisVectorEnv: the session's shared envs (in-process and 1 worker, each autoreset mode; ``max_episode_steps=8``),
checked without closing them, plus one in-process numpy env of its own for the close checks. The broken envs are
small wrappers around Gymnasium's ``SyncVectorEnv`` of CartPole (no scene).
"""

from __future__ import annotations

import re

import gymnasium as gym
import numpy as np
import pytest
import torch
from gymnasium.vector import AutoresetMode, VectorWrapper
from gymnasium.vector.utils import batch_space

from gs_gym import GenesisVectorEnv
from gs_gym.testing import CheckResult, VectorEnvCheckError, check_vector_env
from tests.conftest import MAX_EPISODE_STEPS, NUM_ENVS, TASK_KWARGS

MODES = ["next_step", "same_step", "disabled"]


def cartpole(num_envs: int = 3, mode: AutoresetMode = AutoresetMode.NEXT_STEP, vectorization_mode: str = "sync"):
    return gym.make_vec(
        "CartPole-v1", num_envs=num_envs, vectorization_mode=vectorization_mode, vector_kwargs={"autoreset_mode": mode}
    )


# -- passes ----------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("num_workers", [0, 1])
def test_passes_on_genesis_vector_env(shared_env, num_workers, mode):
    env = shared_env(num_workers, mode)
    result = check_vector_env(env, seed=3, max_steps=4 * MAX_EPISODE_STEPS, check_close=False)
    assert isinstance(result, CheckResult) and result.array_type == "torch"
    assert result.autoreset_mode is env.metadata["autoreset_mode"]
    assert result.episode_ends >= 1 and result.steps <= MAX_EPISODE_STEPS + 2
    assert not env.closed  # shared: left open


def test_passes_on_genesis_numpy_output_and_close():
    env = GenesisVectorEnv(
        NUM_ENVS,
        "cartpole",
        backend="cpu",
        num_workers=0,
        seed=0,
        output="numpy",
        autoreset_mode="same_step",
        task_kwargs=TASK_KWARGS,
    )
    try:
        result = check_vector_env(env, max_steps=4 * MAX_EPISODE_STEPS)  # ends with the close checks
    finally:
        env.close()
    assert result.array_type == "numpy" and env.closed


@pytest.mark.parametrize("mode", list(AutoresetMode))
def test_passes_on_gymnasium_sync_vector_env(mode):
    result = check_vector_env(cartpole(mode=mode), close_must_raise=False)
    assert result.array_type == "numpy" and result.autoreset_mode is mode and result.episode_ends >= 1


def test_passes_on_gymnasium_async_vector_env():
    check_vector_env(cartpole(2, vectorization_mode="async"))  # AsyncVectorEnv raises after close


def test_gymnasium_sync_vector_env_keeps_stepping_after_close():
    """Gymnasium's own SyncVectorEnv steps after close(): the default close check reports it."""
    with pytest.raises(VectorEnvCheckError, match=r"use after close: step\(\) on a closed env returned"):
        check_vector_env(cartpole())


# -- fails, naming the check ---------------------------------------------------------------------------------------


class Broken(VectorWrapper):
    """A SyncVectorEnv of CartPole with one thing changed by ``change(name, value, info)``."""

    def __init__(self, env, change=None, metadata=None, **attributes) -> None:
        super().__init__(env)
        self.change = change or (lambda name, value, info: value)
        if metadata is not None:
            self.metadata = metadata
        for name, value in attributes.items():
            setattr(self, name, value)

    def reset(self, *, seed=None, options=None):
        obs, info = self.env.reset(seed=seed, options=options)
        return self.change("reset_obs", obs, info), info

    def step(self, actions):
        obs, rewards, terminated, truncated, info = self.env.step(actions)
        outputs = {"obs": obs, "rewards": rewards, "terminated": terminated, "truncated": truncated}
        outputs = {name: self.change(name, value, info) for name, value in outputs.items()}
        return (*outputs.values(), self.change("info", info, info))


def only(target: str, transform):
    return lambda name, value, info: transform(value) if name == target else value


def expect_failure(env, message: str, **kwargs) -> VectorEnvCheckError:
    with pytest.raises(VectorEnvCheckError, match=message) as caught:
        check_vector_env(env, close_must_raise=False, **kwargs)
    assert isinstance(caught.value, AssertionError)
    assert str(caught.value).startswith(f"check_vector_env: {caught.value.check}: ")
    return caught.value


def test_fails_on_wrong_observation_dtype():
    env = Broken(cartpole(), only("obs", lambda obs: obs.astype(np.float64)))
    error = expect_failure(
        env, re.escape("step 1 observations: expected dtype float32 (the observation space's), got float64")
    )
    assert error.check == "step 1 observations"


def test_fails_on_next_step_env_that_does_not_zero_the_reward():
    env = Broken(cartpole(), only("rewards", lambda rewards: np.ones_like(rewards)))
    error = expect_failure(
        env,
        r"NEXT_STEP autoreset: env\(s\) \[\d+(, \d+)*\] finished an episode at step \d+, so "
        r"step \d+ must reset them with reward 0, got rewards \[1\.0",
    )
    assert error.check == "NEXT_STEP autoreset"


def test_fails_on_next_step_env_that_does_not_reset():
    class Stuck(Broken):
        """Returns the final observation again in the reset step."""

        def step(self, actions):
            obs, rewards, terminated, truncated, info = self.env.step(actions)
            previous_done = getattr(self, "previous_done", np.zeros(self.num_envs, bool))
            obs = np.where(previous_done[:, None], getattr(self, "previous_obs", obs), obs)
            self.previous_obs, self.previous_done = obs.copy(), terminated | truncated
            return obs, rewards, terminated, truncated, info

    expect_failure(
        Stuck(cartpole()),
        r"NEXT_STEP autoreset: env\(s\) \[.*\] finished an episode at step \d+, but step "
        r"\d+ returned their final observation again",
    )


def test_fails_on_same_step_env_without_final_obs():
    def drop(info):
        return {k: v for k, v in info.items() if k not in ("final_obs", "_final_obs")}

    env = Broken(cartpole(mode=AutoresetMode.SAME_STEP), only("info", drop))
    expect_failure(env, r"SAME_STEP autoreset: step \d+: env\(s\) \[.*\] are done, but info has no 'final_obs'")


def test_fails_on_declared_mode_that_is_not_the_behaviour():
    """A NEXT_STEP env declaring SAME_STEP: no final_obs when an episode ends."""
    env = Broken(cartpole(), metadata={"autoreset_mode": AutoresetMode.SAME_STEP})
    expect_failure(env, "SAME_STEP autoreset: .* info has no 'final_obs'")


def test_fails_on_autoreset_mode_not_an_enum():
    env = Broken(cartpole(), metadata={"autoreset_mode": "NextStep"})
    expect_failure(env, r"metadata: expected metadata\['autoreset_mode'\] to be an AutoresetMode, got 'NextStep'")


def test_fails_on_unbatched_space():
    env = cartpole()
    env.observation_space = batch_space(env.single_observation_space, 2)  # num_envs is 3
    expect_failure(
        env,
        re.escape(
            "observation spaces: observation_space (Box, shape (2, 4), dtype float32, low varies, high varies) is not "
            "the batched single_observation_space: expected batch_space(single_observation_space, 3) "
            "(Box, shape (3, 4), dtype float32"
        ),
    )


def test_fails_on_unseeded_reset():
    rng = np.random.default_rng(0)
    jitter = only("reset_obs", lambda obs: (obs + rng.uniform(-0.01, 0.01, obs.shape)).astype(np.float32))
    env = Broken(cartpole(), jitter)
    expect_failure(env, re.escape("seeding: reset(seed=0) twice gave different observations"))


def test_fails_on_mixed_array_types():
    env = Broken(cartpole(), only("rewards", torch.as_tensor))
    message = "step 1 rewards: expected a numpy array like the observations of reset(), got a torch array"
    expect_failure(env, re.escape(message))


def test_fails_on_wrong_done_dtype():
    env = Broken(cartpole(), only("terminated", lambda flags: flags.astype(np.int64)))
    expect_failure(env, "step 1 terminated: expected dtype bool, got int64")


def test_fails_when_no_episode_ends():
    expect_failure(cartpole(), "autoreset: no episode ended within max_steps=3 steps", max_steps=3)
    result = check_vector_env(cartpole(), max_steps=3, require_episode_end=False, close_must_raise=False)
    assert result.episode_ends == 0 and result.steps == 3


def test_fails_on_partial_reset_that_resets_everything():
    class ResetsAll(Broken):
        def reset(self, *, seed=None, options=None):
            return self.env.reset(seed=seed)  # ignores reset_mask

    expect_failure(
        ResetsAll(cartpole(mode=AutoresetMode.DISABLED)),
        r"DISABLED reset_mask: step \d+: reset_mask .* also changed the observations of env\(s\)",
    )


def test_fails_on_non_vector_env():
    with pytest.raises(VectorEnvCheckError, match=r"type: expected a gymnasium\.vector\.VectorEnv, got CartPoleEnv"):
        check_vector_env(gym.make("CartPole-v1").unwrapped)
