"""SAME_STEP autoreset is a step and then ``reset(options={"reset_mask": done})``, whatever the shard skips.

The shard resets by the ``done`` mask without looking after a step in which some env finished, so many steps reset
with a mask that selects no env; that must change nothing (no random draw, no state). The reference here is the
DISABLED env, reset by its user through the ``reset`` command.
"""

from __future__ import annotations

import itertools

import pytest
import torch

from tests.conftest import NUM_ENVS

STEPS = 40


def rollout(env, seed: int, reset_by_hand: bool) -> list[tuple[torch.Tensor | None, ...]]:
    """Per step: observations, rewards, terminated, truncated, and the final observations (or None): from SAME_STEP's
    ``info``, or (``reset_by_hand``) the step's observations, replaced by ``reset``'s for the envs that finished."""
    generator = torch.Generator().manual_seed(seed)
    env.reset(seed=seed)
    trace = []
    for _ in range(STEPS):
        obs, rewards, terminated, truncated, info = env.step(torch.rand(NUM_ENVS, 1, generator=generator) * 2 - 1)
        done = terminated | truncated
        final = info.get("final_obs")
        if reset_by_hand and done.any():
            final = obs
            obs, _ = env.reset(options={"reset_mask": done.numpy()})
        trace.append((obs, rewards, terminated, truncated, final))
    return trace


@pytest.mark.parametrize("num_workers", [0, 1, 2])
def test_same_step_equals_disabled_with_resets_by_hand(shared_env, num_workers):
    reference = rollout(shared_env(0, "disabled"), seed=5, reset_by_hand=True)
    dones = [bool((step[2] | step[3]).any()) for step in reference]
    # the case that matters: a step with no env done right after one with some (reset by a mask of no env)
    assert any(before and not now for before, now in itertools.pairwise(dones))
    trace = rollout(shared_env(num_workers, "same_step"), seed=5, reset_by_hand=False)
    for index, (got, want) in enumerate(zip(trace, reference, strict=True)):
        for name, a, b in zip(("obs", "rewards", "terminated", "truncated"), got, want, strict=False):
            assert torch.equal(a, b), f"step {index}: {name} differs from the reset by hand"
        assert (got[4] is None) == (want[4] is None), f"step {index}: final_obs present={got[4] is not None}"
        if want[4] is not None:
            assert torch.equal(got[4], want[4]), f"step {index}: final_obs differs"


@pytest.mark.parametrize("num_workers", [0, 1])
def test_same_step_without_final_obs_returns_the_same_steps(shared_env, num_workers):
    """``final_obs=False`` skips the observation before the resets (``observe`` runs once, after them): every output
    is what the default returns, and ``info`` carries no final observations."""
    reference = rollout(shared_env(0, "same_step"), seed=7, reset_by_hand=False)
    assert any(step[4] is not None for step in reference)  # some step reset an env
    trace = rollout(shared_env(num_workers, "same_step", final_obs=False), seed=7, reset_by_hand=False)
    for index, (got, want) in enumerate(zip(trace, reference, strict=True)):
        for name, a, b in zip(("obs", "rewards", "terminated", "truncated"), got, want, strict=False):
            assert torch.equal(a, b), f"step {index}: {name} differs from final_obs=True"
        assert got[4] is None, f"step {index}: info has final_obs"
