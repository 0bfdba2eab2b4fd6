"""Many steps and partial resets leave host memory flat, in the parent and in the worker.

One worker, to keep the 10,500 round trips cheap on a small machine (each worker adds a process wake-up per step).
"""

from __future__ import annotations

import functools
import os

import numpy as np
import pytest
import torch

from tests.faults.conftest import make_env, worker_pids

NUM_ENVS = 4
RECIPES = {"env": functools.partial(make_env, NUM_ENVS, "cartpole", num_workers=1, autoreset_mode="disabled")}


GROWTH_LIMIT_MIB = 20.0
"""Allowed RSS growth per process over the measured run, after warm-up (allocator noise, lazily filled caches)."""


def rss_mib(pid: int) -> float:
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    raise AssertionError(f"no VmRSS for pid {pid}")


def run(env, steps: int, reset_every: int) -> None:
    actions = torch.zeros(NUM_ENVS, 1)
    masks = [np.array([True, False, True, False]), np.array([False, True, True, True])]
    for step in range(1, steps + 1):
        env.step(actions)
        if step % reset_every == 0:
            env.reset(options={"reset_mask": masks[(step // reset_every) % 2]})


@pytest.mark.prebuilt("env")
def test_host_memory_stays_flat_over_many_steps_and_partial_resets(prebuilt):
    env = prebuilt("env")
    pids = [os.getpid(), *worker_pids(env)]
    env.reset(seed=0)
    run(env, 500, 10)  # warm-up
    before = [rss_mib(pid) for pid in pids]
    run(env, 10_000, 10)  # 10,000 steps, 1,000 partial resets
    after = [rss_mib(pid) for pid in pids]
    names = ["parent", "worker"]
    growth = {name: round(b - a, 1) for name, a, b in zip(names, before, after, strict=True)}
    print(f"RSS growth (MiB) over 10,000 steps and 1,000 partial resets: {growth}")
    assert all(g < GROWTH_LIMIT_MIB for g in growth.values()), growth
