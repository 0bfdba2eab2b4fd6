"""``cuda_graph=True`` on the CPU backend, where no graph exists: the shard runs the same code around the hooks, so
the rollouts of the capturable tasks (go2-walk, franka-reach; in process and in a worker, under NEXT_STEP and
SAME_STEP) are the default env's, bit for bit.
``tests/gpu/test_cuda_graph_gpu.py`` compares real graph replays the same way."""

from __future__ import annotations

import pytest
import torch

from gs_gym import GenesisVectorEnv
from tests.conformance.test_vector_contract import assert_non_finite_actions_act_as_zero_then_raise

NUM_ENVS = 6
STEPS = 40


CAPTURABLE_TASKS = ["go2-walk", "franka-reach"]


def rollout(
    task: str, num_workers: int, mode: str, cuda_graph: bool, backend: str = "cpu"
) -> tuple[list[torch.Tensor], int]:
    """Everything 40 steps of large random actions return, final observations included, with a masked ``reset``
    at step 30, and how many episodes ended (the time limit is 25 steps; go2's robots fall before)."""
    env = GenesisVectorEnv(NUM_ENVS, task, backend=backend, num_workers=num_workers, seed=0, autoreset_mode=mode,
                           cuda_graph=cuda_graph, task_kwargs={"max_episode_steps": 25})  # fmt: skip
    try:
        generator = torch.Generator(device=env.main_device).manual_seed(1)
        obs, _ = env.reset(seed=3)
        trace, ends = [obs], 0
        shape = (NUM_ENVS, *env.single_action_space.shape)
        for step in range(STEPS):
            if step == 30:  # after every env reached the time limit once
                obs, _ = env.reset(options={"reset_mask": torch.arange(NUM_ENVS) % 3 == 0})
                trace.append(obs)
            actions = torch.rand(shape, generator=generator, device=env.main_device) * 8 - 4
            obs, rewards, terminated, truncated, info = env.step(actions)
            trace += [obs, rewards, terminated, truncated, *([info["final_obs"]] if "final_obs" in info else [])]
            ends += int((terminated | truncated).sum())
        return trace, ends
    finally:
        env.close()


@pytest.mark.parametrize("task", CAPTURABLE_TASKS)
@pytest.mark.parametrize("mode", ["next_step", "same_step"])
def test_the_option_changes_no_value_on_the_cpu(task, mode):
    reference, ends = rollout(task, 0, mode, cuda_graph=False)
    assert ends >= NUM_ENVS  # every env's episode ended at least once (the time limit)
    for num_workers in (0, 1):
        trace, _ = rollout(task, num_workers, mode, cuda_graph=True)
        assert len(trace) == len(reference)
        for index, (got, want) in enumerate(zip(trace, reference, strict=True)):
            assert torch.equal(got, want), f"{num_workers} workers, output {index}"


def test_the_option_is_off_by_default_on_the_cpu():
    """``cuda_graph=None`` (the default) turns the graph on for capturable tasks on the GPU backend only
    (``tests/gpu/test_cuda_graph_gpu.py``)."""
    env = GenesisVectorEnv(NUM_ENVS, "go2-walk", backend="cpu", num_workers=0)
    try:
        assert env.options.cuda_graph is False
    finally:
        env.close()


def targets_rollout(num_workers: int, cuda_graph: bool, backend: str = "cpu") -> list[torch.Tensor]:
    """franka-reach's rewards and observations over 6 steps, with every env's target replaced through ``set_attr``
    after the third (a new tensor, which the graph would not read unless captured again)."""
    env = GenesisVectorEnv(NUM_ENVS, "franka-reach", backend=backend, num_workers=num_workers, seed=0,
                           cuda_graph=cuda_graph)  # fmt: skip
    try:
        env.reset(seed=2)
        actions = torch.full((NUM_ENVS, 7), 0.25, device=env.main_device)
        trace = []
        for step in range(6):
            if step == 3:
                targets = torch.tensor([[0.5, 0.1 * i - 0.2, 0.4] for i in range(NUM_ENVS)], device=env.main_device)
                env.set_attr("targets", targets)
            obs, rewards, *_ = env.step(actions)
            trace += [obs, rewards]
        return trace
    finally:
        env.close()


@pytest.mark.parametrize("num_workers", [0, 1])
def test_a_tensor_set_through_set_attr_is_read_with_the_option(num_workers):
    """``set_attr`` makes the next step capture the graph again (on the CPU: the same values as without it)."""
    reference = targets_rollout(0, cuda_graph=False)
    assert not torch.equal(reference[4][:, -3:], reference[6][:, -3:])  # the observed target changed at step 3
    for index, (got, want) in enumerate(zip(targets_rollout(num_workers, cuda_graph=True), reference, strict=True)):
        assert torch.equal(got, want), index


@pytest.mark.parametrize("num_workers", [0, 1])
def test_non_finite_actions_act_as_zero_then_raise_with_the_option(num_workers):
    """The graph checks the step's actions from a buffer of its own: NaN and inf are found as without it."""
    check_non_finite_actions(num_workers, "cpu")


def check_non_finite_actions(num_workers: int, backend: str) -> None:
    env = GenesisVectorEnv(NUM_ENVS, "go2-walk", backend=backend, num_workers=num_workers, seed=0, cuda_graph=True)
    try:
        assert_non_finite_actions_act_as_zero_then_raise(env, envs=[1, 4])
    finally:
        env.close()
