"""``cuda_graph=True`` on Genesis's CUDA backend (skipped without CUDA): the output hooks of go2-walk and franka-reach
and the step's bookkeeping after them, replayed from a CUDA graph, give the default step's values bit for bit, in
process and in a worker, under NEXT_STEP and SAME_STEP, with a masked reset; non-finite actions are found as without
the graph; a tensor set through ``set_attr`` is read; and a task that replaces a tensor its hooks read (breaking
``Task.capturable``'s promise) is stopped by the first replays' check."""

from __future__ import annotations

import pytest
import torch

from gs_gym import GenesisVectorEnv, WorkerError
from gs_gym.tasks.go2_walk import Go2Walk
from tests.equivalence.test_cuda_graph_option import (
    CAPTURABLE_TASKS,
    NUM_ENVS,
    check_non_finite_actions,
    rollout,
    targets_rollout,
)

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")


@pytest.mark.parametrize("task", CAPTURABLE_TASKS)
@pytest.mark.parametrize("mode", ["next_step", "same_step"])
def test_replays_give_the_hooks_values(task, mode):
    reference, ends = rollout(task, 0, mode, cuda_graph=False, backend="gpu")
    assert ends >= NUM_ENVS
    for num_workers in (0, 1):
        trace, _ = rollout(task, num_workers, mode, cuda_graph=True, backend="gpu")
        for index, (got, want) in enumerate(zip(trace, reference, strict=True)):
            assert torch.equal(got, want), f"{num_workers} workers, output {index}"


@pytest.mark.parametrize(("task", "on"), [("go2-walk", True), ("franka-reach", True), ("cartpole", False)])
def test_the_graph_is_on_by_default_for_capturable_tasks(task, on):
    env = GenesisVectorEnv(NUM_ENVS, task, backend="gpu", num_workers=0)
    try:
        assert env.options.cuda_graph is on
    finally:
        env.close()


@pytest.mark.parametrize("num_workers", [0, 1])
def test_a_tensor_set_through_set_attr_is_read(num_workers):
    """Without the graph captured again after ``set_attr``, the replays would go on reading the replaced targets."""
    reference = targets_rollout(0, cuda_graph=False, backend="gpu")
    for index, (got, want) in enumerate(zip(targets_rollout(num_workers, True, "gpu"), reference, strict=True)):
        assert torch.equal(got, want), index


@pytest.mark.parametrize("num_workers", [0, 1])
def test_non_finite_actions_act_as_zero_then_raise(num_workers):
    check_non_finite_actions(num_workers, "gpu")


class ReplacingGo2(Go2Walk):
    """Declares capturable output hooks but replaces ``last_actions``, which ``compute_rewards`` reads, by a new tensor
    each step. It keeps the tensors it replaced, so that the one the graph reads holds the first step's values (freed,
    its memory would hold whatever the allocator put there next)."""

    name = "replacing-go2"

    def apply_actions(self, actions: torch.Tensor) -> None:
        self.replaced = [*getattr(self, "replaced", []), self.last_actions]
        self.last_actions = torch.empty_like(self.last_actions)  # which super().apply_actions fills
        super().apply_actions(actions)


def test_a_replaced_tensor_is_caught_by_the_first_replays():
    env = GenesisVectorEnv(NUM_ENVS, ReplacingGo2, backend="gpu", num_workers=0, seed=0, cuda_graph=True)
    try:
        env.reset(seed=0)
        generator = torch.Generator(device=env.main_device).manual_seed(0)
        with pytest.raises(WorkerError) as caught:  # the in-process shard's errors come as a worker's would
            for _ in range(3):
                env.step(torch.rand(NUM_ENVS, 12, generator=generator, device=env.main_device) * 2 - 1)
        message = "task 'replacing-go2': the rewards replayed from the CUDA graph differ from its hooks' in "
        assert str(caught.value).startswith(f"worker 0 ({env.main_device}): TaskOutputError: {message}")
        assert caught.value.remote_type == "TaskOutputError"
    finally:
        env.close()
