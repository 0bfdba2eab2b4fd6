"""Construction, first use, numpy output and close, on envs of their own (they end closed)."""

from __future__ import annotations

import re

import numpy as np
import pytest
from gymnasium.error import ClosedEnvironmentError

from gs_gym import CallOrderError, GenesisVectorEnv
from tests.processes import wait_until_reaped


@pytest.mark.parametrize("num_workers", [0, 1])
def test_lifecycle_with_numpy_output(num_workers):
    env = GenesisVectorEnv(3, "cartpole", backend="cpu", num_workers=num_workers, output="numpy", seed=0)
    try:
        with pytest.raises(CallOrderError, match=r"^step: call reset\(\) before step\(\)$"):
            env.step(np.zeros((3, 1), dtype=np.float32))
        obs, _ = env.reset(seed=0)
        assert isinstance(obs, np.ndarray) and obs.dtype == np.float32 and obs.shape == (3, 4)
        obs, rewards, terminated, truncated, _ = env.step(np.zeros((3, 1), dtype=np.float32))
        assert isinstance(rewards, np.ndarray) and rewards.dtype == np.float32
        assert terminated.dtype == np.bool_ and truncated.dtype == np.bool_
        pids = env.worker_pids
        assert len(pids) == num_workers
    finally:
        env.close()
    env.close()  # idempotent
    assert env.closed
    assert wait_until_reaped(pids) == []  # every worker ends and is reaped, none left a zombie
    calls = [
        ("reset", lambda: env.reset()),
        ("step", lambda: env.step(np.zeros((3, 1)))),
        ("call 'num_envs'", lambda: env.call("num_envs")),
        ("get_attr 'num_envs'", lambda: env.get_attr("num_envs")),
    ]
    for action, call in calls:
        with pytest.raises(ClosedEnvironmentError, match=f"^{re.escape(action)}: the env is closed$"):
            call()
