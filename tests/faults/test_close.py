"""``close(timeout=...)`` is bounded whatever the task's cleanup does: a worker whose ``close`` would take ten
minutes is terminated after the grace and reaped (by a background thread if the kernel is still tearing it down when
``close`` returns); a bad timeout is refused and closes nothing."""

from __future__ import annotations

import threading
import time

import pytest
import torch
from gymnasium.error import ClosedEnvironmentError

from gs_gym.errors import PoolClosedError
from tests.faults.conftest import make_env, worker_pids
from tests.processes import wait_until_reaped


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
    assert wait_until_reaped(pids) == []  # both reaped: no zombie, no orphan


def test_a_worker_runs_its_exit_handlers_when_it_closes(tmp_path):
    # a worker ends without tearing its interpreter down, but after the exit handlers: Genesis writes the kernels it
    # compiled to the cache in one of them
    marker = tmp_path / "exit-handler"
    env = make_env(2, num_workers=1, task_kwargs={"exit_marker": str(marker)})
    env.reset(seed=0)
    pids = worker_pids(env)
    env.close()
    assert wait_until_reaped(pids) == []
    assert marker.read_text() == str(pids[0])


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


def test_close_from_another_thread_gives_the_waiting_thread_a_clear_error():
    env = make_env(2, num_workers=1, task_kwargs={"fault": "sleep", "fault_step": 1, "sleep_seconds": 600.0})
    env.reset(seed=0)
    pids = worker_pids(env)
    outcome: list[BaseException | None] = []

    def step() -> None:
        try:
            env.step(torch.zeros(2, 1))
            outcome.append(None)
        except BaseException as error:  # recorded for the assertion below
            outcome.append(error)

    stepping = threading.Thread(target=step)
    stepping.start()
    time.sleep(2.0)  # lets the step reach its wait (either order must end in a clear error; this one is the aim)
    env.close(timeout=0.5)
    stepping.join(60.0)
    assert not stepping.is_alive()
    (error,) = outcome
    # before the step was sent: the env was already closed; while it waited: the pool says it was closed
    assert isinstance(error, (ClosedEnvironmentError, PoolClosedError)), repr(error)
    if isinstance(error, PoolClosedError):
        assert str(error) == "step: the env was closed while waiting for the workers"
    assert env.closed
    assert wait_until_reaped(pids) == []
