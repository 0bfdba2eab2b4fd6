"""Spinning on the pipes (``spin_wait_us``) changes when processes wake up, never what they compute."""

from __future__ import annotations

import torch

from gs_gym import GenesisVectorEnv
from tests.conftest import NUM_ENVS, TASK_KWARGS
from tests.equivalence.test_sharding_independence import rollout


def test_spinning_workers_match_the_in_process_env(shared_env):
    reference = rollout(shared_env(0, "same_step"), seed=5)
    env = GenesisVectorEnv(
        NUM_ENVS,
        "cartpole",
        backend="cpu",
        num_workers=2,
        seed=0,
        autoreset_mode="same_step",
        task_kwargs=TASK_KWARGS,
        spin_wait_us=500.0,
    )
    try:
        trace = rollout(env, seed=5)
    finally:
        env.close()
    for key, values in reference.items():
        assert len(trace[key]) == len(values)
        assert all(torch.equal(got, want) for got, want in zip(trace[key], values, strict=True)), key
