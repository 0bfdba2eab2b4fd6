"""Arguments are checked before any worker starts or any scene is built."""

import multiprocessing
import re
import threading

import pytest
import torch

from gs_gym import GenesisVectorEnv
from gs_gym.tasks import available_tasks
from gs_gym.tasks.cartpole import CartPole


@pytest.mark.parametrize(
    ("kwargs", "error", "message"),
    [
        ({"num_envs": 0}, ValueError, "num_envs: expected a positive int, got 0"),
        ({"num_envs": 4, "backend": "tpu"}, ValueError, "backend: expected one of ['gpu', 'cpu'], got 'tpu'"),
        (
            {"num_envs": 4, "backend": "cpu", "output": "jax"},
            ValueError,
            "output: expected one of ['torch', 'numpy', 'shards'], got 'jax'",
        ),
        (
            {"num_envs": 4, "task": "pong"},
            ValueError,
            f"task: unknown task 'pong'; expected one of {available_tasks()}",
        ),
        (
            {"num_envs": 4, "backend": "cpu", "spin_wait_us": -1},
            ValueError,
            "spin_wait_us: expected a number of microseconds >= 0 or None (the default), got -1",
        ),
        (
            {"num_envs": 4, "backend": "cpu", "spin_wait_us": "fast"},
            ValueError,
            "spin_wait_us: expected a number of microseconds >= 0 or None (the default), got 'fast'",
        ),
        (
            {"num_envs": 4, "backend": "cpu", "task_kwargs": {"pole_lenght": 2.0}},
            ValueError,
            "task_kwargs: unknown option(s) ['pole_lenght'] for task 'cartpole'; expected some of "
            f"{sorted(f for f in CartPole.config_class.__dataclass_fields__)}",
        ),
        (
            {"num_envs": 4, "backend": "cpu", "num_workers": -1},
            ValueError,
            "num_workers: expected an int >= 0 (0 runs in-process), got -1",
        ),
        (
            {"num_envs": 2, "backend": "cpu", "num_workers": 3},
            ValueError,
            "num_envs: expected at least one env per worker (3 workers), got 2",
        ),
        (
            {"num_envs": 4, "backend": "cpu", "cuda_graph": True},
            ValueError,
            "cuda_graph: task 'cartpole' does not declare its output hooks capturable (Task.capturable; go2-walk "
            "and franka-reach do), got cuda_graph=True",
        ),
        (
            {"num_envs": 4, "backend": "cpu", "task": "go2-walk", "cuda_graph": 1},
            TypeError,
            "cuda_graph: expected True, False or None (on for tasks declaring Task.capturable on the GPU backend), "
            "got 1",
        ),
        (
            {"num_envs": 4, "backend": "cpu", "devices": [0]},
            ValueError,
            "devices: only meaningful with backend='gpu', got devices=[0]",
        ),
        (
            {"num_envs": 4, "backend": "cpu", "render_mode": "human"},
            ValueError,
            "render_mode: task 'cartpole' supports ['rgb_array'], got 'human'",
        ),
        (
            {"num_envs": 4, "backend": "cpu", "autoreset_mode": "sometimes"},
            ValueError,
            "autoreset_mode: expected one of ['NextStep', 'SameStep', 'Disabled'], got 'sometimes'",
        ),
        (
            {"num_envs": 4, "backend": "cpu", "verbose": "yes"},
            TypeError,
            "verbose: expected True, False or None (when stderr is a terminal), got 'yes'",
        ),
        (
            {"num_envs": 4, "backend": "cpu", "step_timeout": -1},
            ValueError,
            "step_timeout: expected a positive, finite number of seconds or None (wait forever), got -1",
        ),
        (
            {"num_envs": 4, "backend": "cpu", "step_timeout": float("nan")},
            ValueError,
            "step_timeout: expected a positive, finite number of seconds or None (wait forever), got nan",
        ),
        (
            {"num_envs": 4, "backend": "cpu", "step_timeout": 1e9},
            ValueError,
            "step_timeout: expected at most 1000000 seconds or None (wait forever), got 1000000000.0",
        ),
        (
            {"num_envs": 4, "backend": "cpu", "build_timeout": 3e6},
            ValueError,
            "build_timeout: expected at most 1000000 seconds, got 3000000.0",
        ),
        (
            {"num_envs": 4, "backend": "cpu", "build_timeout": "60"},
            ValueError,
            "build_timeout: expected a positive, finite number of seconds, got '60'",
        ),
        (
            {"num_envs": 4, "backend": "cpu", "task_kwargs": {"max_episode_steps": 0}},
            ValueError,
            "max_episode_steps: expected an int >= 1, got 0",
        ),
        ({"num_envs": 4, "backend": "cpu", "seed": -1}, ValueError, "seed: expected an int >= 0, got -1"),
        ({"num_envs": 4, "backend": "cpu", "copy": "yes"}, TypeError, "copy: expected True or False, got 'yes'"),
        (
            {"num_envs": 4, "backend": "cpu", "final_obs": False},
            ValueError,
            "final_obs: False is meaningful only with autoreset_mode='same_step' (the other modes report no final "
            "observations), got autoreset_mode='next_step'",
        ),
        (
            {"num_envs": 4, "backend": "cpu", "autoreset_mode": "same_step", "final_obs": 0},
            TypeError,
            "final_obs: expected True or False, got 0",
        ),
        (
            {"num_envs": 4, "backend": "cpu", "genesis_logging_level": "loud"},
            ValueError,
            (
                "genesis_logging_level: expected one of ['debug', 'info', 'warning', 'error', 'critical'], a logging "
                "level number or None, got 'loud'"
            ),
        ),
    ],
)
def test_bad_arguments_are_named(kwargs, error, message):
    workers_before = set(multiprocessing.active_children())
    with pytest.raises(error, match=f"^{re.escape(message)}$"):
        GenesisVectorEnv(**kwargs)
    assert set(multiprocessing.active_children()) == workers_before  # refused before any worker started


def test_cartpole_is_registered():
    assert "cartpole" in available_tasks()


@pytest.mark.skipif(torch.cuda.is_available(), reason="needs a machine where torch sees no CUDA device")
def test_a_cuda_main_device_without_cuda_is_refused_up_front():
    message = "main_device: 'cuda' is not a visible CUDA device (torch sees 0)"
    with pytest.raises(ValueError, match=f"^{re.escape(message)}$"):
        GenesisVectorEnv(4, backend="cpu", main_device="cuda")


def test_an_unpicklable_task_is_named_with_its_attribute():
    class LockedCartPole(CartPole):  # defined in a function: cloudpickle sends it by value, attributes included
        guard = threading.Lock()

    workers_before = set(multiprocessing.active_children())
    message = (
        "task 'LockedCartPole' cannot be sent to a worker process: attribute LockedCartPole.guard (lock) cannot be "
        "pickled"
    )
    with pytest.raises(TypeError, match=f"^{re.escape(message)} "):
        GenesisVectorEnv(4, LockedCartPole, backend="cpu", num_workers=1)
    assert set(multiprocessing.active_children()) == workers_before
