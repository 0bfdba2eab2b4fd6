"""``close(timeout=...)`` is bounded whatever the task's cleanup does: a worker whose ``close`` would take ten
minutes is terminated after the grace and reaped; a bad timeout is refused and closes nothing."""

from __future__ import annotations

import psutil
import pytest

from tests.faults.conftest import make_env, worker_pids


def test_a_worker_stuck_in_its_cleanup_is_stopped_and_reaped(tmp_path):
    marker = tmp_path / "closed"
    fault = {"fault": "slow-close", "fault_env_offset": 1, "sleep_seconds": 600.0, "closed_marker": str(marker)}
    env = make_env(2, num_workers=2, task_kwargs=fault)
    env.reset(seed=0)
    pids = worker_pids(env)
    env.close(timeout=0.5)
    assert env.closed
    # had close waited for the cleanup, the marker would exist; the worker was stopped mid-sleep instead
    assert not marker.exists()
    assert not [pid for pid in pids if psutil.pid_exists(pid)]  # both reaped: no zombie, no orphan


def test_a_bad_close_timeout_is_refused_and_the_env_stays_open():
    env = make_env(2, "cartpole", num_workers=1)
    try:
        with pytest.raises(ValueError, match=r"^timeout: expected a positive, finite number of seconds, got -1$"):
            env.close(timeout=-1)
        assert not env.closed
        env.reset(seed=0)
        env.step_async(env.action_space.sample() * 0)
        with pytest.raises(ValueError, match=r"^timeout: expected a positive, finite number of seconds or None"):
            env.step_wait(timeout=float("nan"))
        _, rewards, *_ = env.step_wait()  # the step is still pending, and completes
        assert rewards.shape == (2,)
    finally:
        env.close()
