"""SAME_STEP on a real GPU (skipped without CUDA): whether the shard resets by mask without looking or waits for
"any env done" depends on how far the GPU has got (``gs_gym.vector.shard``), and the parent learns "any env done"
from step flags copied into page-locked host memory, waiting on the worker's event; the results must not differ."""

from __future__ import annotations

import itertools

import pytest
import torch

from gs_gym import GenesisVectorEnv

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")

NUM_ENVS = 64
STEPS = 120
KWARGS = dict(task="cartpole", backend="gpu", seed=0, task_kwargs={"max_episode_steps": 20})


def rollout(env, reset_by_hand: bool):
    """Per-env sums of every output, and per step whether ``final_obs`` came (SAME_STEP) or was made by hand."""
    generator = torch.Generator(device="cuda").manual_seed(0)
    obs, _ = env.reset(seed=3)
    sums, finals = [obs], []
    for _ in range(STEPS):
        actions = torch.rand(NUM_ENVS, 1, device="cuda", generator=generator) * 2 - 1
        obs, rewards, terminated, truncated, info = env.step(actions)
        final = info.get("final_obs")
        if reset_by_hand and bool((terminated | truncated).any()):
            final = obs
            obs, _ = env.reset(options={"reset_mask": (terminated | truncated).cpu().numpy()})
        finals.append(final is not None)
        sums += [obs, rewards, terminated.float(), truncated.float(), obs if final is None else final]
    return torch.stack([t.reshape(NUM_ENVS, -1).sum(1) for t in sums]), finals


def test_same_step_equals_disabled_with_resets_by_hand():
    reference_env = GenesisVectorEnv(NUM_ENVS, num_workers=0, autoreset_mode="disabled", **KWARGS)
    try:
        reference, reference_finals = rollout(reference_env, reset_by_hand=True)
    finally:
        reference_env.close()
    assert any(before and not now for before, now in itertools.pairwise(reference_finals))
    for name, workers in (("in-process", {"num_workers": 0}), ("1 worker", {"num_workers": 1}),
                          ("2 workers on GPU 0", {"num_workers": 2, "devices": [0]}),
                          ("1 worker, host buffers", {"num_workers": 1, "host_buffers": True})):  # fmt: skip
        env = GenesisVectorEnv(NUM_ENVS, autoreset_mode="same_step", **workers, **KWARGS)
        try:
            got, finals = rollout(env, reset_by_hand=False)
        finally:
            env.close()
        assert finals == reference_finals, name
        torch.testing.assert_close(got, reference, atol=1e-4, rtol=1e-4, msg=name)
