"""A worker killed from outside (SIGKILL) is noticed at once through its process sentinel, or its pipe's hangup while
the parent spins, whatever the env was doing (the restart mode is tested in ``test_long_lived_env.py``)."""

from __future__ import annotations

import functools
import os
import signal

import pytest
import torch

from gs_gym import EnvFailedError, WorkerCrashedError
from tests.faults.conftest import make_env, worker_pids
from tests.processes import wait_until_gone

SLEEPS_IN_ITS_FIRST_STEP = functools.partial(
    make_env, 2, num_workers=1, task_kwargs={"fault": "sleep", "fault_step": 1, "sleep_seconds": 120.0}
)
"""A worker busy with its first step while the test kills it."""

RECIPES = {
    # step_timeout=30 (make_env's default here): were the sentinel not watched, these would end in
    # WorkerTimeoutError after 30 s instead of WorkerCrashedError at once. The step's worker sleeps in its first
    # step, so that the kill lands while it is busy with the step.
    "kill_step": SLEEPS_IN_ITS_FIRST_STEP,
    # the parent spins on the pipe (2 s at most): a pipe whose writer died ends the spin, read as a crash
    "kill_spinning_step": functools.partial(SLEEPS_IN_ITS_FIRST_STEP, spin_wait_us=2e6),
    "kill_reset": functools.partial(make_env, 2, "cartpole", num_workers=1),
    "kill_call": functools.partial(make_env, 2, "cartpole", num_workers=1),
}


def kill_worker(env, index: int) -> int:
    pid = worker_pids(env)[index]
    os.kill(pid, signal.SIGKILL)
    return pid


@pytest.mark.parametrize(
    ("command", "during"),
    [
        pytest.param("step", "step", marks=pytest.mark.prebuilt("kill_step")),
        pytest.param("spinning_step", "step", marks=pytest.mark.prebuilt("kill_spinning_step")),
        pytest.param("reset", "reset", marks=pytest.mark.prebuilt("kill_reset")),
        pytest.param("call", "call 'num_envs'", marks=pytest.mark.prebuilt("kill_call")),
    ],
)
def test_sigkill_is_reported_at_once(prebuilt, command, during):
    env = prebuilt(f"kill_{command}")
    env.reset(seed=0)
    with pytest.raises(WorkerCrashedError) as caught:
        if command.endswith("step"):
            env.step_async(torch.zeros(2, 1))
            pid = kill_worker(env, 0)  # the worker sleeps in this step: the parent learns of the kill at once
            env.step_wait()
        else:
            pid = kill_worker(env, 0)
            env.reset(seed=1) if command == "reset" else env.call("num_envs")
    assert str(caught.value).splitlines()[0] == (
        f"worker 0 (cpu): worker process {pid} was killed by signal SIGKILL during {during}"
    )
    assert (caught.value.worker, caught.value.exitcode) == (0, -9)
    with pytest.raises(EnvFailedError):
        env.step(torch.zeros(2, 1))
    env.close()
    assert wait_until_gone([pid], 5.0) == []
