"""Who owns the tensors a step returns: with ``copy=True`` (the default) the caller, whatever the task does with the
tensors its hooks returned; with ``copy=False`` the env, which rewrites the same buffers every step.

In process with ``copy=True`` the shard makes the task's own output tensors its buffers (no copy into them) and the
env clones what it hands out; ``ReusingCartPole`` returns the same tensors every step, refilled in place, so a
missing clone, or SAME_STEP final observations that alias the tensor the reset's ``observe`` refills, shows here.
"""

from __future__ import annotations

import pytest
import torch

from gs_gym import GenesisVectorEnv
from gs_gym.tasks.cartpole import CartPole
from tests.conftest import NUM_ENVS, TASK_KWARGS
from tests.equivalence.test_sharding_independence import rollout


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
