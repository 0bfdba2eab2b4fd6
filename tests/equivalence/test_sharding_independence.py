"""Same seed and actions give identical results in-process, on one worker and on two (uneven 4 + 3 split)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from tests.conftest import NUM_ENVS

STEPS = 30


def rollout(env, seed, steps: int = STEPS) -> dict[str, list[torch.Tensor]]:
    """Everything a random-action rollout returns: obs, rewards, terminated, truncated and final observations."""
    generator = torch.Generator().manual_seed(seed)
    obs, _ = env.reset(seed=seed)
    trace: dict[str, list[torch.Tensor]] = {
        "obs": [obs],
        "rewards": [],
        "terminated": [],
        "truncated": [],
        "final_obs": [],
        "final_mask": [],
    }
    for _ in range(steps):
        actions = torch.rand(NUM_ENVS, 1, generator=generator) * 2 - 1
        obs, rewards, terminated, truncated, info = env.step(actions)
        for key, value in zip(
            ("obs", "rewards", "terminated", "truncated"), (obs, rewards, terminated, truncated), strict=True
        ):
            trace[key].append(value)
        if "final_obs" in info:
            trace["final_obs"].append(info["final_obs"])
            trace["final_mask"].append(info["_final_obs"])
    return trace


@pytest.mark.parametrize("mode", ["next_step", "same_step", "disabled"])
def test_rollouts_match_across_worker_counts(shared_env, mode):
    reference = rollout(shared_env(0, mode), seed=11)
    ends = sum(int((te | tr).sum()) for te, tr in zip(reference["terminated"], reference["truncated"], strict=True))
    assert ends > NUM_ENVS  # the rollout crosses several episode ends
    assert (len(reference["final_obs"]) > 0) == (mode == "same_step")
    for num_workers in (1, 2):
        trace = rollout(shared_env(num_workers, mode), seed=11)
        for key, values in reference.items():
            assert len(trace[key]) == len(values)
            for got, want in zip(trace[key], values, strict=True):
                assert torch.equal(got, want), f"{key}: {num_workers} worker(s) diverge from in-process ({mode})"


def test_terminations_happen_and_match(shared_env):
    """Full pushes topple some poles before the time limit, so terminations (not only truncations) agree."""

    def pushes(env):
        env.reset(seed=1)  # under this seed one pole (env 5) falls at step 7, before the time limit of 8
        terminated_any = torch.zeros(NUM_ENVS, dtype=torch.bool)
        rewards = []
        for _ in range(7):
            _, reward, terminated, _, _ = env.step(torch.ones(NUM_ENVS, 1))
            terminated_any |= terminated
            rewards.append(reward)
        return terminated_any, torch.stack(rewards)

    reference = pushes(shared_env(0))
    assert reference[0].any() and not reference[0].all()
    for num_workers in (1, 2):
        got = pushes(shared_env(num_workers))
        assert torch.equal(got[0], reference[0]) and torch.equal(got[1], reference[1])


def test_partial_resets_with_explicit_seeds_match(shared_env):
    mask = np.array([True, False, False, True, True, False, True])
    seeds = [100, None, None, 103, None, None, 106]

    def run(env):
        env.reset(seed=1)
        env.step(torch.full((NUM_ENVS, 1), 0.3))
        obs, _ = env.reset(seed=seeds, options={"reset_mask": mask})
        return obs

    reference = run(shared_env(0, "disabled"))
    for num_workers in (1, 2):
        assert torch.equal(run(shared_env(num_workers, "disabled")), reference)
