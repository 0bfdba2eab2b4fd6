"""franka-reach on the CPU backend: one in-process env (default config, randomization off) for the module."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import torch

from gs_gym import GenesisVectorEnv

NUM_ENVS = 3


@pytest.fixture(scope="module")
def env():
    env = GenesisVectorEnv(NUM_ENVS, "franka-reach", backend="cpu", num_workers=0, seed=0)
    yield env
    env.close()


@pytest.fixture
def task(env):
    env.reset(seed=0)
    return env._pool.shard.task


def test_spaces_and_observation_layout(env, task):
    assert env.single_observation_space.shape == (20,)
    assert env.single_action_space.shape == (7,)
    assert np.all(env.single_action_space.low == -1.0) and np.all(env.single_action_space.high == 1.0)
    obs, _ = env.reset(seed=3)
    assert obs.shape == (NUM_ENVS, 20) and obs.dtype == torch.float32
    config = task.config
    home = torch.tensor(config.home_qpos)
    assert torch.all((obs[:, :7] - home).abs() <= config.reset_joint_noise + 1e-5)
    assert torch.all(obs[:, 7:14] == 0.0)
    torch.testing.assert_close(obs[:, 14:17], task.ee_pos())
    assert torch.equal(obs[:, 17:20], task.targets)
    assert torch.all(task.targets >= torch.tensor(config.target_low))
    assert torch.all(task.targets <= torch.tensor(config.target_high))
    assert len(set(map(tuple, task.targets.tolist()))) == NUM_ENVS  # one target per env


def test_reset_is_deterministic_per_seed(env, task):
    first, _ = env.reset(seed=11)
    second, _ = env.reset(seed=11)
    other, _ = env.reset(seed=12)
    assert torch.equal(first, second)
    assert not torch.equal(first[:, 17:], other[:, 17:])


def test_actions_move_the_joint_targets_and_the_arm_follows(env, task):
    task.targets[:, 2] += 10.0  # out of reach: no success (hence no autoreset) during the test
    start = task.joint_targets.clone()
    action = torch.zeros(NUM_ENVS, 7)
    action[:, 0] = 1.0
    action[1, 0] = 5.0  # clipped to 1
    for _ in range(5):
        obs, rewards, terminated, truncated, _ = env.step(action)
        assert obs.shape == (NUM_ENVS, 20) and rewards.shape == (NUM_ENVS,)
        assert rewards.dtype == torch.float32 and terminated.dtype == torch.bool
    expected = start.clone()
    expected[:, 0] += 5 * task.config.action_scale
    torch.testing.assert_close(task.joint_targets, expected)
    for _ in range(20):
        obs, *_ = env.step(torch.zeros(NUM_ENVS, 7))
    torch.testing.assert_close(obs[:, :7], expected, atol=0.02, rtol=0)


def test_hand_at_the_target_earns_the_bonus_and_terminates(task):
    config = task.config
    ee = task.ee_pos()
    task.targets[:] = ee
    task.targets[1, 0] += 0.1  # 10 cm away: dense reward only
    task.targets[2, 2] += 0.03  # inside the success radius
    rewards = task.compute_rewards()
    torch.testing.assert_close(
        rewards, torch.tensor([config.success_bonus, -0.1, config.success_bonus - 0.03]), atol=1e-5, rtol=0
    )
    assert rewards[0] == config.success_bonus  # exactly at the target
    assert task.compute_terminated().tolist() == [True, False, True]
    assert task.compute_truncated().tolist() == [False, False, False]
    task.config = dataclasses.replace(config, terminate_on_success=False)
    try:
        assert task.compute_terminated().tolist() == [False, False, False]
    finally:
        task.config = config


def test_success_ends_the_episode_through_the_env(env, task):
    task.targets[:] = task.ee_pos()
    task.targets[1:, 0] += 0.5
    _, rewards, terminated, truncated, _ = env.step(torch.zeros(NUM_ENVS, 7))
    assert terminated.tolist() == [True, False, False]
    assert rewards[0] > task.config.success_bonus - task.config.success_threshold
    obs, rewards, terminated, _, _ = env.step(torch.zeros(NUM_ENVS, 7))  # autoreset (next-step mode)
    assert rewards[0] == 0.0 and not terminated[0]
    assert torch.linalg.vector_norm(obs[0, 17:20] - obs[0, 14:17]) > 0.0


def test_metrics_average_distance_and_success(task):
    task.targets[:] = task.ee_pos()
    task.targets[1, 0] += 0.1  # 10 cm away
    task.targets[2, 2] += 0.03  # inside the success radius
    metrics = task.metrics()
    assert list(metrics) == ["distance", "success_rate"]
    assert metrics["distance"] == pytest.approx((0.0 + 0.1 + 0.03) / 3, abs=1e-6)
    assert metrics["success_rate"] == pytest.approx(2 / 3)
