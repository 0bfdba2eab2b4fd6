"""SAME_STEP's ``info`` with ``output="numpy"`` is laid out exactly as ``gymnasium.vector.SyncVectorEnv`` lays it
out (Gymnasium's CartPole-v1: also float32 observations of shape (4,)); tensor outputs keep a dense batch."""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
import pytest
import torch
from gymnasium.vector import AutoresetMode, SyncVectorEnv

from gs_gym import GenesisVectorEnv
from tests.conftest import MAX_EPISODE_STEPS, NUM_ENVS, TASK_KWARGS


def describe(info: dict[str, Any], done: np.ndarray) -> dict[str, Any]:
    """The layout of ``info`` relative to the done mask, independent of which envs are done."""
    layout: dict[str, Any] = {}
    for key, value in info.items():
        if isinstance(value, dict):
            layout[key] = ("dict", describe(value, done))
        elif value.dtype == object:
            rows = {
                "done": sorted({(type(v).__name__, str(v.dtype), v.shape) for v in value[done]}),
                "others": sorted({repr(v) for v in value[~done]}),
            }
            layout[key] = (type(value).__name__, "object", value.shape, rows)
        else:
            layout[key] = (type(value).__name__, str(value.dtype), value.shape, np.array_equal(value, done))
    masks = [info[key] for key in info if key.startswith("_")]
    layout["masks share memory"] = any(np.shares_memory(a, b) for i, a in enumerate(masks) for b in masks[i + 1 :])
    return layout


def first_done_step(env: Any, actions: np.ndarray) -> tuple[dict[str, Any], np.ndarray, np.ndarray]:
    """Step until some env is done; that step's info, done mask and observations (the reset ones for done envs)."""
    for _ in range(MAX_EPISODE_STEPS + 1):
        obs, _, terminated, truncated, info = env.step(actions)
        done = terminated | truncated  # numpy arrays or tensors
        if done.any():
            return info, done, obs
        assert info == {}  # nothing when no env finished, as in SyncVectorEnv
    raise AssertionError("no env finished")


@pytest.fixture(scope="module")
def sync_layout():
    # env i ends after i + 2 steps: on the first done step only env 0 is done
    env = SyncVectorEnv(
        [lambda i=i: gym.make("CartPole-v1", max_episode_steps=i + 2) for i in range(NUM_ENVS)],
        autoreset_mode=AutoresetMode.SAME_STEP,
    )
    env.reset(seed=0)
    info, done, _ = first_done_step(env, np.zeros(NUM_ENVS, dtype=np.int64))
    env.close()
    assert 0 < done.sum() < NUM_ENVS
    return describe(info, done)


@pytest.mark.parametrize("num_workers", [0, 2])
def test_numpy_final_obs_layout_is_sync_vector_envs(sync_layout, num_workers):
    env = GenesisVectorEnv(NUM_ENVS, "cartpole", backend="cpu", num_workers=num_workers, seed=0, output="numpy",
                           autoreset_mode="same_step", task_kwargs=TASK_KWARGS)  # fmt: skip
    try:
        env.reset(seed=0)
        actions = np.zeros((NUM_ENVS, 1), np.float32)
        env.step(actions)
        env.step(actions)
        later = np.arange(NUM_ENVS) > 0
        env.reset(options={"reset_mask": later})  # env 0 is two steps ahead: it ends alone
        info, done, obs = first_done_step(env, actions)
        np.testing.assert_array_equal(done, ~later)
        assert describe(info, done) == sync_layout
        assert not np.array_equal(info["final_obs"][0], obs[0])  # the pre-reset observation, not the new one
    finally:
        env.close()


def test_tensor_final_obs_stays_a_dense_batch(shared_env):
    env = shared_env(0, "same_step")
    env.reset(seed=0)
    actions = torch.zeros(NUM_ENVS, 1)
    env.step(actions)
    env.reset(options={"reset_mask": torch.arange(NUM_ENVS) > 0})  # env 0 ends a step before the others
    info, done, obs = first_done_step(env, actions)
    assert done.tolist() == [True] + [False] * (NUM_ENVS - 1)
    final = info["final_obs"]
    assert isinstance(final, torch.Tensor) and final.shape == (NUM_ENVS, 4) and final.dtype == torch.float32
    assert torch.equal(info["_final_obs"], done) and torch.equal(info["_final_info"], done)
    assert torch.equal(final[~done], obs[~done])  # envs that go on: their observation
    assert not torch.equal(final[done], obs[done])
