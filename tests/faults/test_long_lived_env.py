"""One two-worker env, built once, serves two tests in turn: rejected input leaves every worker untouched, and
(last, since it ends failed) ``on_worker_failure="restart"`` replaces a worker killed during a step. The restart
mode changes nothing until a worker dies."""

from __future__ import annotations

import functools
import os
import re
import signal

import numpy as np
import pytest
import torch

from gs_gym import EnvFailedError, GenesisVectorEnv, WorkerCrashedError
from tests.faults.conftest import make_env, worker_pids
from tests.processes import wait_until_gone

NUM_ENVS = 4  # worker 0: envs 0-1, worker 1: envs 2-3
SETTINGS = {"seed": 3, "autoreset_mode": "disabled"}
RESET_NOISE = 0.05  # cartpole's reset states lie in [-0.05, 0.05)
RECIPES = {
    "env": functools.partial(make_env, NUM_ENVS, "cartpole", num_workers=2, on_worker_failure="restart", **SETTINGS)
}


@pytest.mark.prebuilt("env")
def test_rejected_calls_change_nothing(prebuilt):
    env = prebuilt("env")
    # the twin: the same env in this process (the reference implementation, whose results match any split)
    twin = GenesisVectorEnv(NUM_ENVS, "cartpole", backend="cpu", num_workers=0, **SETTINGS)
    try:
        for e in (env, twin):
            e.reset(seed=11)
            e.step(torch.full((NUM_ENVS, 1), 0.3))
        bad_calls = [
            (torch.zeros(NUM_ENVS, 2), "actions: expected shape (4, 1), got (4, 2)"),
            ([[0.5]] * (NUM_ENVS - 1), "actions: expected shape (4, 1), got (3, 1)"),
            (torch.ones(NUM_ENVS, 1, dtype=torch.bool), "actions: expected a real-valued tensor, got dtype torch.bool"),
        ]
        for actions, message in bad_calls:
            with pytest.raises(ValueError, match=f"^{re.escape(message)}$"):
                env.step(actions)
            with pytest.raises(ValueError, match=f"^{re.escape(message)}$"):
                env.step_async(actions)  # refused before anything is sent: no step is left pending
        with pytest.raises(ValueError, match=r"^options\['reset_mask'\]: expected at least one True entry, got none$"):
            env.reset(options={"reset_mask": np.zeros(NUM_ENVS, dtype=bool)})
        with pytest.raises(ValueError, match=r"^seed: expected a non-negative int, got -1$"):
            env.reset(seed=-1)
        good = torch.tensor([[0.5], [-0.5], [1.0], [0.0]])
        got, want = env.step(good), twin.step(good)
        for a, b in zip(got[:4], want[:4], strict=True):
            assert torch.equal(a, b)
        assert got[4] == want[4] == {}
    finally:
        twin.close()


@pytest.mark.prebuilt("env")
def test_restart_replaces_a_worker_killed_during_a_step(prebuilt):
    env = prebuilt("env")
    first, _ = env.reset(seed=5)
    actions = torch.full((NUM_ENVS, 1), 0.1)
    env.step(actions)
    survivor, victim = worker_pids(env)
    os.kill(victim, signal.SIGKILL)
    warning = f"worker 1 (cpu): worker process {victim} was killed by signal SIGKILL during step; restarting it"
    with pytest.warns(RuntimeWarning, match=f"^{re.escape(warning)}$"):
        obs, rewards, terminated, truncated, info = env.step(actions)
    assert sorted(info) == ["_worker_restarted", "worker_restarted"]
    assert info["worker_restarted"].tolist() == info["_worker_restarted"].tolist() == [False, False, True, True]
    assert truncated.tolist() == [False, False, True, True]
    assert terminated.tolist() == [False] * NUM_ENVS
    assert rewards[2:].tolist() == [0.0, 0.0] and (rewards[:2] > 0.9).all()  # worker 0 stepped as usual
    assert obs[2:].abs().max() <= RESET_NOISE  # new episodes, re-seeded: not the states of the first reset
    assert not torch.equal(obs[2:], first[2:])
    new_pids = worker_pids(env)
    assert new_pids[0] == survivor and new_pids[1] != victim
    assert wait_until_gone([victim], 5.0) == []
    obs, rewards, terminated, truncated, info = env.step(actions)  # the env goes on, all four envs live
    assert info == {} and not (terminated | truncated).any() and (rewards > 0.9).all()
    # a crash outside step is not restarted: it raises, and the env is failed
    os.kill(new_pids[1], signal.SIGKILL)
    with pytest.raises(WorkerCrashedError) as caught:
        env.reset(seed=0)
    assert str(caught.value).splitlines()[0] == (
        f"worker 1 (cpu): worker process {new_pids[1]} was killed by signal SIGKILL during reset"
    )
    with pytest.raises(EnvFailedError):
        env.step(actions)
