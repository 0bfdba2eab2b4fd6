"""A worker that raises, exits, segfaults, hangs or diverges (NaN) is reported in the parent, naming the worker, and
the env then refuses everything but ``close()``, which does not raise and leaves no process behind."""

from __future__ import annotations

import functools
import re

import pytest
import torch

from gs_gym import EnvFailedError, WorkerCrashedError, WorkerError, WorkerTimeoutError
from gs_gym.errors import RemoteTraceback
from tests.faults.conftest import make_env, worker_pids
from tests.processes import wait_until_gone

RECIPES = {
    # two workers, envs 0-1 and 2-3; the fault hits the second (env_offset 2)
    "raise": functools.partial(
        make_env, 4, num_workers=2, task_kwargs={"fault": "raise", "fault_step": 3, "fault_env_offset": 2}
    ),
    # two workers, envs 0-2 and 3-5; NaN in local envs 0 and 2 of the second
    "nan": functools.partial(
        make_env,
        6,
        num_workers=2,
        task_kwargs={"fault": "nan", "fault_step": 2, "fault_env_offset": 3, "nan_envs": (0, 2)},
    ),
    "exit": functools.partial(make_env, 2, num_workers=1, task_kwargs={"fault": "exit", "fault_step": 2}),
    "segfault": functools.partial(make_env, 2, num_workers=1, task_kwargs={"fault": "segfault", "fault_step": 2}),
    "hang": functools.partial(make_env, 2, num_workers=1, task_kwargs={"fault": "sleep", "fault_step": 2}),
}


@pytest.mark.parametrize(
    ("fault", "expected"),
    [
        ("obs-shape", "observe: expected a float32 tensor of shape (3, 4) on cpu, got float32 of shape (3, 3) on cpu"),
        (
            "reward-dtype",
            "compute_rewards: expected a float32 tensor of shape (3,) on cpu, got float64 of shape (3,) on cpu",
        ),
    ],
)
def test_task_outputs_of_the_wrong_shape_or_dtype_are_named(fault, expected):
    """Checked every step against the spaces (tensor metadata only); a wrong shape was broadcast before."""
    env = make_env(3, num_workers=0, task_kwargs={"fault": fault, "fault_step": 2})
    try:
        env.reset(seed=0)
        steps(env, 1)
        with pytest.raises(WorkerError) as caught:
            steps(env, 1)
        assert str(caught.value) == f"worker 0 (cpu): TaskOutputError: task 'faulty-cartpole' {expected} (during step)"
        assert caught.value.remote_type == "TaskOutputError"
    finally:
        env.close()


def test_frames_of_the_wrong_shape_are_named_and_the_env_goes_on():
    env = make_env(2, num_workers=1, render_mode="rgb_array", task_kwargs={"fault": "frames-shape"})
    try:
        env.reset(seed=0)
        with pytest.raises(WorkerError) as caught:
            env.render()
        assert str(caught.value) == (
            "worker 0 (cpu): TaskOutputError: task 'faulty-cartpole' render: expected a uint8 array of shape "
            "(2, H, W, 3), got uint8 array of shape (2, 240, 320) (during render)"
        )
        assert caught.value.remote_type == "TaskOutputError"
        steps(env, 2)  # a render changes no env: the env is still usable
    finally:
        env.close()


def steps(env, count: int) -> None:
    for _ in range(count):
        env.step(torch.zeros(env.num_envs, 1))


def assert_failed_then_closes(env) -> None:
    """Every call but close() is refused; close() does not raise; no worker process is left."""
    message = "a worker failed earlier (see the first error); close() the env"
    for action, call in [
        ("step", lambda: env.step(torch.zeros(env.num_envs, 1))),
        ("reset", lambda: env.reset(seed=0)),
        ("call 'num_envs'", lambda: env.call("num_envs")),
    ]:
        with pytest.raises(EnvFailedError, match=f"^{re.escape(f'{action}: {message}')}$"):
            call()
    pids = worker_pids(env)
    env.close()
    env.close()
    assert wait_until_gone(pids, 5.0) == []


@pytest.mark.prebuilt("raise")
def test_exception_in_step_names_the_worker_and_fails_the_env(prebuilt):
    env = prebuilt("raise")
    env.reset(seed=0)
    steps(env, 2)
    with pytest.raises(WorkerError) as caught:
        steps(env, 1)
    error = caught.value
    assert str(error) == (
        "worker 1 (cpu): RuntimeError: faulty-cartpole: injected raise fault at step 3 (env_offset 2) (during step)"
    )
    assert (error.worker, error.device, error.remote_type) == (1, "cpu", "RuntimeError")
    assert type(error) is WorkerError
    assert isinstance(error.__cause__, RemoteTraceback)
    assert "raise RuntimeError(self._fail(where))" in error.__cause__.formatted
    assert "RuntimeError: faulty-cartpole: injected raise fault at step 3" in error.__cause__.formatted
    assert_failed_then_closes(env)


@pytest.mark.prebuilt("nan")
def test_nan_state_names_the_envs_by_global_index(prebuilt):
    env = prebuilt("nan")
    # first, a reply that cannot be pickled: a clean WorkerError, and the env stays usable
    message = "worker 0 (cpu): TypeError: cannot pickle '_thread.lock' object (during get_attr 'unpicklable')"
    with pytest.raises(WorkerError, match=f"^{re.escape(message)}$"):
        env.get_attr("unpicklable")
    env.reset(seed=0)
    steps(env, 1)
    with pytest.raises(WorkerError) as caught:
        steps(env, 1)
    assert str(caught.value) == (
        "worker 1 (cpu): NonFiniteObservationError: non-finite observations from task 'faulty-cartpole' (observe) "
        "in envs [3, 5] (global indices; local [0, 2]) (during step)"
    )
    assert caught.value.remote_type == "NonFiniteObservationError"
    assert_failed_then_closes(env)


@pytest.mark.prebuilt("exit")
def test_exit_code_and_last_output_are_reported(prebuilt):
    env = prebuilt("exit")
    env.reset(seed=0)
    steps(env, 1)
    pid = worker_pids(env)[0]
    with pytest.raises(WorkerCrashedError) as caught:
        steps(env, 1)
    lines = str(caught.value).splitlines()
    assert lines[0] == f"worker 0 (cpu): worker process {pid} exited with code 3 during step"
    assert lines[1] == "last output of the worker:"
    assert lines[-1] == "faulty-cartpole: injected exit fault at step 2 (env_offset 0)"
    assert caught.value.exitcode == 3
    assert_failed_then_closes(env)


@pytest.mark.prebuilt("segfault")
def test_segfault_is_reported_as_sigsegv(prebuilt):
    env = prebuilt("segfault")
    env.reset(seed=0)
    steps(env, 1)
    pid = worker_pids(env)[0]
    with pytest.raises(WorkerCrashedError) as caught:
        steps(env, 1)
    assert str(caught.value).splitlines()[0] == (
        f"worker 0 (cpu): worker process {pid} was killed by signal SIGSEGV during step"
    )
    assert caught.value.exitcode == -11
    assert_failed_then_closes(env)


@pytest.mark.prebuilt("hang")
def test_hang_times_out_and_close_terminates_the_worker(prebuilt):
    env = prebuilt("hang")  # step_timeout 30 s: the reset and the first step are never short of time, even under load
    env.reset(seed=0)
    steps(env, 1)
    env.step_async(torch.zeros(env.num_envs, 1))
    with pytest.raises(WorkerTimeoutError) as caught:
        env.step_wait(timeout=2.0)  # the worker sleeps for an hour in this step
    assert str(caught.value) == "worker 0 (cpu): no answer to step within 2 s"
    assert_failed_then_closes(env)  # the sleeping worker is terminated, not waited for
