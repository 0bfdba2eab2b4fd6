"""The Gymnasium 1.x vector contract, for the in-process env and for 1 and 2 worker processes."""

from __future__ import annotations

import dataclasses
import re

import gymnasium as gym
import numpy as np
import pytest
import torch
from gymnasium.vector import AutoresetMode

from gs_gym.errors import CallOrderError, WorkerError
from tests.conftest import MAX_EPISODE_STEPS, NUM_ENVS

WORKERS = [0, 1, 2]
RESET_NOISE = 0.05  # cartpole's default: every reset state component lies in [-0.05, 0.05)


def zero_actions() -> torch.Tensor:
    return torch.zeros(NUM_ENVS, 1)


@pytest.mark.parametrize("num_workers", WORKERS)
def test_spaces_and_metadata(shared_env, num_workers):
    env = shared_env(num_workers)
    assert env.single_observation_space == gym.spaces.Box(-np.inf, np.inf, (4,), np.float32)
    assert env.single_action_space == gym.spaces.Box(-1.0, 1.0, (1,), np.float32)
    assert env.observation_space.shape == (NUM_ENVS, 4)
    assert env.action_space.shape == (NUM_ENVS, 1)
    assert env.metadata["autoreset_mode"] is AutoresetMode.NEXT_STEP
    assert env.num_envs == NUM_ENVS
    assert [(r.offset, r.count) for r in env.env_ranges] == {0: [(0, 7)], 1: [(0, 7)], 2: [(0, 4), (4, 3)]}[num_workers]


@pytest.mark.parametrize("num_workers", WORKERS)
def test_reset_and_step_types(shared_env, num_workers):
    env = shared_env(num_workers)
    obs, info = env.reset(seed=1)
    assert info == {}
    assert obs.dtype == torch.float32 and obs.shape == (NUM_ENVS, 4) and obs.device == torch.device("cpu")
    assert obs.abs().max() <= RESET_NOISE
    obs, rewards, terminated, truncated, info = env.step(zero_actions())
    assert obs.dtype == torch.float32 and obs.shape == (NUM_ENVS, 4)
    assert rewards.dtype == torch.float32 and rewards.shape == (NUM_ENVS,)
    assert terminated.dtype == torch.bool and truncated.dtype == torch.bool and terminated.shape == (NUM_ENVS,)
    assert info == {}
    assert not terminated.any() and not truncated.any()
    assert (rewards > 0.95).all() and (rewards <= 1.0).all()  # nearly upright, near the centre


@pytest.mark.parametrize("num_workers", WORKERS)
def test_seeding_is_deterministic(shared_env, num_workers):
    env = shared_env(num_workers)
    first, _ = env.reset(seed=5)
    again, _ = env.reset(seed=5)
    other, _ = env.reset(seed=6)
    listed, _ = env.reset(seed=[5 + i for i in range(NUM_ENVS)])
    assert torch.equal(first, again) and torch.equal(first, listed)
    assert not torch.equal(first, other)
    # seed=6 gives env i the seed 6 + i = 5 + (i + 1): the streams shift by one env
    assert torch.equal(other[:-1], first[1:])


@pytest.mark.parametrize("num_workers", WORKERS)
def test_next_step_autoreset(shared_env, num_workers):
    env = shared_env(num_workers)
    env.reset(seed=2)
    for _ in range(MAX_EPISODE_STEPS - 1):
        _, _, terminated, truncated, _ = env.step(zero_actions())
        assert not (terminated | truncated).any()
    last_obs, rewards, terminated, truncated, _ = env.step(zero_actions())
    assert truncated.all() and not terminated.any() and (rewards > 0).all()
    obs, rewards, terminated, truncated, info = env.step(torch.ones(NUM_ENVS, 1))  # the action is ignored
    assert torch.equal(rewards, torch.zeros(NUM_ENVS))
    assert not terminated.any() and not truncated.any() and info == {}
    assert obs.abs().max() <= RESET_NOISE and not torch.equal(obs, last_obs)
    _, _, _, truncated, _ = env.step(zero_actions())
    assert not truncated.any()  # a new episode has begun


@pytest.mark.parametrize("num_workers", WORKERS)
def test_same_step_autoreset_reports_the_true_final_observation(shared_env, num_workers):
    same, nxt = shared_env(num_workers, "same_step"), shared_env(num_workers, "next_step")
    assert same.metadata["autoreset_mode"] is AutoresetMode.SAME_STEP
    same.reset(seed=3)
    nxt.reset(seed=3)
    for _ in range(MAX_EPISODE_STEPS - 1):
        _, _, _, _, info = same.step(zero_actions())
        nxt.step(zero_actions())
        assert info == {}
    obs, rewards, terminated, truncated, info = same.step(zero_actions())
    final_in_next_step_mode, next_rewards, _, _, _ = nxt.step(zero_actions())
    assert truncated.all() and not terminated.any()
    assert sorted(info) == ["_final_info", "_final_obs", "final_info", "final_obs"]
    assert info["_final_obs"].tolist() == [True] * NUM_ENVS
    assert torch.equal(info["final_obs"], final_in_next_step_mode)
    assert torch.equal(rewards, next_rewards)
    assert obs.abs().max() <= RESET_NOISE  # already reset


@pytest.mark.parametrize("num_workers", WORKERS)
@pytest.mark.parametrize("as_torch", [False, True])
def test_disabled_autoreset_and_partial_reset(shared_env, num_workers, as_torch):
    env = shared_env(num_workers, "disabled")
    assert env.metadata["autoreset_mode"] is AutoresetMode.DISABLED
    env.reset(seed=4)
    for _ in range(MAX_EPISODE_STEPS):
        before, _, _, truncated, _ = env.step(zero_actions())
    assert truncated.all()
    _, rewards, _, truncated, _ = env.step(zero_actions())
    assert truncated.all() and (rewards > 0).all()  # no autoreset: the episodes just go on
    mask = np.zeros(NUM_ENVS, dtype=bool)
    mask[[0, 5]] = True
    after, stepped_obs = env.reset(options={"reset_mask": torch.from_numpy(mask) if as_torch else mask})[0], before
    _, _, _, truncated, _ = env.step(zero_actions())
    assert truncated.tolist() == [not m for m in mask]
    assert after[mask].abs().max() <= RESET_NOISE
    assert stepped_obs.shape == after.shape


@pytest.mark.parametrize("num_workers", WORKERS)
def test_partial_reset_changes_only_masked_envs(shared_env, num_workers):
    env = shared_env(num_workers, "disabled")
    env.reset(seed=8)
    for _ in range(3):
        current, _, _, _, _ = env.step(zero_actions())
    mask = np.array([False, True, False, False, True, True, False])
    after, info = env.reset(options={"reset_mask": mask})
    assert info == {}
    assert torch.equal(after[~mask], current[~mask])
    assert not torch.equal(after[mask], current[mask])
    assert after[mask].abs().max() <= RESET_NOISE


@pytest.mark.parametrize("num_workers", WORKERS)
def test_rejected_actions_change_nothing(shared_env, num_workers):
    env = shared_env(num_workers)
    env.reset(seed=9)
    expected = env.step(torch.full((NUM_ENVS, 1), 0.5))
    env.reset(seed=9)
    bad_calls = [
        (torch.zeros(NUM_ENVS, 2), f"actions: expected shape ({NUM_ENVS}, 1), got ({NUM_ENVS}, 2)"),
        (torch.zeros(NUM_ENVS - 1, 1), f"actions: expected shape ({NUM_ENVS}, 1), got ({NUM_ENVS - 1}, 1)"),
    ]
    for actions, message in bad_calls:
        with pytest.raises(ValueError, match=f"^{re.escape(message)}$"):
            env.step(actions)
    got = env.step(np.full((NUM_ENVS, 1), 0.5))  # numpy in, torch out
    for a, b in zip(got[:4], expected[:4], strict=True):
        assert torch.equal(a, b)


@pytest.mark.parametrize("num_workers", WORKERS)
def test_non_finite_actions_act_as_zero_then_raise(shared_env, num_workers):
    """Found with the step's own wait (no sync before it): the step runs with NaN/inf as 0, then raises."""
    assert_non_finite_actions_act_as_zero_then_raise(shared_env(num_workers), envs=[1, 5])


def assert_non_finite_actions_act_as_zero_then_raise(env, envs: list[int]) -> None:
    """A step whose actions hold NaN in the first of ``envs`` and -inf in the second raises ``ValueError`` naming
    them, and leaves ``env`` usable, having stepped with them as 0 (so that a step after it equals one after zeros)."""
    actions = torch.full((env.num_envs, *env.single_action_space.shape), 0.5, device=env.main_device)
    bad, zeroed = actions.clone(), actions.clone()
    bad[envs, 0] = torch.tensor([float("nan"), -float("inf")], device=env.main_device)
    zeroed[envs, 0] = 0.0
    env.reset(seed=4)
    env.step(zeroed)
    expected = env.step(actions)
    env.reset(seed=4)
    message = f"actions: expected finite values, got NaN or inf for env(s) {envs} (the step ran with them as 0)"
    with pytest.raises(ValueError, match=f"^{re.escape(message)}$"):
        env.step(bad)
    got = env.step(actions)  # usable, and the rejected step happened with zeros
    for a, b in zip(got[:4], expected[:4], strict=True):
        assert torch.equal(a, b)


@pytest.mark.parametrize("num_workers", WORKERS)
def test_finite_actions_whose_sum_overflows_are_not_refused(shared_env, num_workers):
    """The step's finite flag sums every checked value, so 3e38 in every env overflows it to inf; the env then asks
    the shards, which find every value finite: the step returns as usual (cart-pole clamps actions to [-1, 1])."""
    env = shared_env(num_workers)
    env.reset(seed=6)
    expected = env.step(torch.ones(NUM_ENVS, 1))
    env.reset(seed=6)
    got = env.step(torch.full((NUM_ENVS, 1), 3e38))
    for a, b in zip(got[:4], expected[:4], strict=True):
        assert torch.equal(a, b)


@pytest.mark.parametrize("num_workers", WORKERS)
def test_call_order_errors(shared_env, num_workers):
    env = shared_env(num_workers)
    env.reset(seed=0)
    with pytest.raises(CallOrderError, match=r"^step_wait: step_wait\(\) called without a pending step_async\(\)$"):
        env.step_wait()
    env.step_async(zero_actions())
    with pytest.raises(CallOrderError, match=r"^step_async: a step is already pending; call step_wait\(\) first$"):
        env.step_async(zero_actions())
    with pytest.raises(CallOrderError, match=r"^reset: a step is pending; call step_wait\(\) first$"):
        env.reset()
    obs, *_ = env.step_wait()
    assert obs.shape == (NUM_ENVS, 4)


@pytest.mark.parametrize("num_workers", WORKERS)
def test_call_get_attr_set_attr_answer_per_worker(shared_env, num_workers):
    env = shared_env(num_workers)
    counts = tuple(r.count for r in env.env_ranges)
    assert env.get_attr("num_envs") == counts
    assert env.call("num_envs") == counts
    assert env.call("compute_rewards")[0].shape == (counts[0],)
    config = env.get_attr("config")[0]
    assert config.max_episode_steps == MAX_EPISODE_STEPS
    env.set_attr("config", dataclasses.replace(config, force_scale=5.0))
    assert [c.force_scale for c in env.get_attr("config")] == [5.0] * len(counts)
    env.set_attr("config", [dataclasses.replace(config, force_scale=float(i)) for i in range(len(counts))])
    assert [c.force_scale for c in env.get_attr("config")] == [float(i) for i in range(len(counts))]
    env.set_attr("config", config)
    with pytest.raises(WorkerError, match=r"^worker 0 \(cpu\): AttributeError: .*'nope'"):
        env.get_attr("nope")
    message = (
        "worker 0 (cpu): AttributeError: task 'cartpole' has no attribute 'probe' to set (during set_attr 'probe')"
    )
    with pytest.raises(WorkerError, match=f"^{re.escape(message)}$"):
        env.set_attr("probe", 1)
    env.reset(seed=0)  # a failed get_attr leaves the env usable
    assert env.step(zero_actions())[0].shape == (NUM_ENVS, 4)
