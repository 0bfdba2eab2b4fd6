"""Who owns the tensors a step returns: with ``copy=True`` (the default) the caller, whatever the task does with the
tensors its hooks returned; with ``copy=False`` the env, which rewrites the same buffers every step.

In process with ``copy=True`` the env returns the shard's buffers as they are, and the shard points them at tensors
nothing writes again: the task's own where it declares ``fresh_outputs`` (every built-in task), clones otherwise.
``ReusingCartPole`` returns the same tensors every step, refilled in place, so a missing clone, or SAME_STEP final
observations that alias the tensor the reset's ``observe`` refills, shows here; ``steps_written_over`` shows a task
that reads again what it declared fresh, or an output the env keeps using (the task tests call it too).
"""

from __future__ import annotations

import pytest
import torch

from gs_gym import GenesisVectorEnv
from gs_gym.tasks.cartpole import CartPole
from tests.conftest import NUM_ENVS, TASK_KWARGS
from tests.equivalence.test_sharding_independence import rollout


def steps_written_over(env, actions: torch.Tensor, steps: int, *, write_over: bool) -> list[torch.Tensor]:
    """Copies of everything ``reset(seed=5)`` and ``steps`` steps with ``actions`` return (``final_obs`` included);
    with ``write_over`` the caller then overwrites each returned tensor in place (NaN, True), as an owner may."""

    def keep(*outputs: torch.Tensor) -> None:
        for output in outputs:
            trace.append(output.clone())
            if write_over:
                output.fill_(True if output.dtype == torch.bool else float("nan"))

    obs, _ = env.reset(seed=5)
    trace: list[torch.Tensor] = []
    keep(obs)
    for _ in range(steps):
        obs, rewards, terminated, truncated, info = env.step(actions)
        keep(obs, rewards, terminated, truncated, *([info["final_obs"]] if "final_obs" in info else []))
    return trace


def assert_outputs_belong_to_the_caller(env, actions: torch.Tensor, steps: int) -> None:
    """Overwriting what a step returned changes nothing the env returns later (``copy=True``)."""
    # a first rollout: after other use, a reset may leave Genesis's solver state different in the last bits (go2-walk:
    # 4e-9 in 3 of 45 observations from the second step on); rollouts after it repeat bit for bit
    steps_written_over(env, actions, steps, write_over=False)
    reference = steps_written_over(env, actions, steps, write_over=False)
    trace = steps_written_over(env, actions, steps, write_over=True)
    assert len(trace) == len(reference)
    for index, (got, want) in enumerate(zip(trace, reference, strict=True)):
        assert torch.equal(got, want), f"output {index} changed after the caller wrote into an earlier one"


def test_only_the_class_that_defines_a_hook_can_declare_its_outputs_fresh():
    assert CartPole.outputs_are_fresh()
    assert not ReusingCartPole.outputs_are_fresh()  # overrides the hooks without declaring: not inherited

    class Configured(CartPole):  # same hooks
        pass

    class Declared(ReusingCartPole):
        fresh_outputs = True

    class Withdrawn(CartPole):
        fresh_outputs = False

    assert Configured.outputs_are_fresh()
    assert Declared.outputs_are_fresh()
    assert not Withdrawn.outputs_are_fresh()


@pytest.mark.parametrize("num_workers", [0, 1, 2])
@pytest.mark.parametrize("mode", ["next_step", "same_step"])
def test_writing_into_returned_outputs_changes_no_later_step(shared_env, mode, num_workers):
    env = shared_env(num_workers, mode)
    pushes = torch.linspace(-1.0, 1.0, NUM_ENVS).unsqueeze(1)  # some poles fall, every episode is truncated at 8
    assert_outputs_belong_to_the_caller(env, pushes, steps=12)


class ReusingCartPole(CartPole):
    """Cart-pole whose observe, compute_rewards and compute_terminated write into tensors made once and return
    them every time (allowed: a hook's result need only be valid until the next step)."""

    def build(self) -> None:
        super().build()
        self._obs = torch.zeros(self.num_envs, 4, device=self.device)
        self._rewards = torch.zeros(self.num_envs, device=self.device)
        self._terminated = torch.zeros(self.num_envs, dtype=torch.bool, device=self.device)

    def observe(self) -> torch.Tensor:
        return self._obs.copy_(super().observe())

    def compute_rewards(self) -> torch.Tensor:
        return self._rewards.copy_(super().compute_rewards())

    def compute_terminated(self) -> torch.Tensor:
        return self._terminated.copy_(super().compute_terminated())


@pytest.mark.parametrize("num_workers", [0, 1, 2])
@pytest.mark.parametrize("mode", ["next_step", "same_step"])
def test_a_task_reusing_its_output_tensors_gives_the_same_rollout(shared_env, mode, num_workers):
    reference = rollout(shared_env(0, mode), seed=11)
    env = GenesisVectorEnv(NUM_ENVS, ReusingCartPole, backend="cpu", num_workers=num_workers, seed=0,
                           autoreset_mode=mode, task_kwargs=TASK_KWARGS)  # fmt: skip
    try:
        trace = rollout(env, seed=11)  # keeps every step's outputs: a later step must not change earlier ones
    finally:
        env.close()
    assert (len(reference["final_obs"]) > 0) == (mode == "same_step")
    for key, values in reference.items():
        assert len(trace[key]) == len(values)
        for got, want in zip(trace[key], values, strict=True):
            assert torch.equal(got, want), key


@pytest.mark.parametrize("num_workers", [0, 1, 2])
def test_copied_outputs_are_not_touched_by_later_steps(shared_env, num_workers):
    env = shared_env(num_workers)
    env.reset(seed=4)
    outputs = env.step(torch.full((NUM_ENVS, 1), 0.5))[:4]
    snapshot = [output.clone() for output in outputs]
    for _ in range(3):
        later = env.step(torch.full((NUM_ENVS, 1), -0.5))[:4]
    assert not torch.equal(later[0], snapshot[0])  # the state moved on
    for output, saved in zip(outputs, snapshot, strict=True):
        assert torch.equal(output, saved)


@pytest.mark.parametrize("num_workers", [0, 1, 2])
def test_uncopied_outputs_are_the_envs_own_buffers(num_workers):
    env = GenesisVectorEnv(
        NUM_ENVS, "cartpole", backend="cpu", num_workers=num_workers, seed=0, copy=False, task_kwargs=TASK_KWARGS
    )
    try:
        env.reset(seed=4)
        first = env.step(torch.full((NUM_ENVS, 1), 0.5))[:4]
        values = [output.clone() for output in first]
        second = env.step(torch.full((NUM_ENVS, 1), -0.5))[:4]
        assert all(a is b for a, b in zip(first, second, strict=True))  # rewritten in place
        assert not torch.equal(first[0], values[0])
    finally:
        env.close()
