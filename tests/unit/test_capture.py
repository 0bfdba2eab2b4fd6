"""``gs_gym.vector.capture`` without a GPU: the check that turns a replay reading stale tensors into an error, and which
tasks may be captured (``Task.outputs_are_capturable``). ``tests/gpu/test_cuda_graph_gpu.py`` captures for real."""

from __future__ import annotations

import re

import pytest
import torch

from gs_gym.errors import TaskOutputError
from gs_gym.tasks.cartpole import CartPole
from gs_gym.tasks.go2_walk import Go2Walk
from gs_gym.vector.capture import check_replay


def outputs(obs: list[list[float]], rewards: list[float], terminated: list[bool]):
    return torch.tensor(obs), torch.tensor(rewards), torch.tensor(terminated)


def test_a_replay_equal_to_the_hooks_passes_nan_included():
    nan = float("nan")
    check_replay("go2-walk", outputs([[1.0, nan]], [nan], [True]), outputs([[1.0, nan]], [nan], [True]))


@pytest.mark.parametrize(
    ("replayed", "name", "envs"),
    [
        (outputs([[1.0, 2.0], [3.0, 4.5]], [0.5, 0.5], [False, True]), "observations", 1),
        (outputs([[1.0, 2.0], [3.0, 4.0]], [0.25, float("nan")], [False, True]), "rewards", 2),
        (outputs([[1.0, 2.0], [3.0, 4.0]], [0.5, 0.5], [True, False]), "terminated", 2),
    ],
)
def test_a_replay_that_differs_from_the_hooks_is_named(replayed, name, envs):
    called = outputs([[1.0, 2.0], [3.0, 4.0]], [0.5, 0.5], [False, True])
    message = (
        f"task 'go2-walk': the {name} replayed from the CUDA graph differ from its hooks' in {envs} envs: its output "
        f"hooks read a tensor that was replaced instead of written in place, which Task.capturable rules out (write "
        f"state with copy_, out= or in-place operations)"
    )
    with pytest.raises(TaskOutputError, match=f"^{re.escape(message)}$"):
        check_replay("go2-walk", replayed, called)


def test_only_the_class_that_defines_the_output_hooks_can_declare_them_capturable():
    class Observing(Go2Walk):  # overrides a hook: the promise is not inherited
        def observe(self):
            return super().observe()

    class Redeclared(Observing):
        capturable = True

    class Truncating(Go2Walk):  # compute_truncated is captured too
        def compute_truncated(self):
            return None

    class Controlling(Go2Walk):  # other hooks do not matter: the first replays check what they leave
        def apply_actions(self, actions):
            super().apply_actions(actions)

    assert Go2Walk.outputs_are_capturable() and Redeclared.outputs_are_capturable()
    assert Controlling.outputs_are_capturable() and Controlling.outputs_are_fresh()
    assert not Observing.outputs_are_capturable() and not CartPole.outputs_are_capturable()
    assert not Truncating.outputs_are_capturable() and Truncating.outputs_are_fresh()
