"""``cuda_graph=True`` on the CPU backend, where no graph exists: the shard runs the same code around the hooks, so
go2-walk's rollouts (in process and in a worker, under NEXT_STEP and SAME_STEP) are the default env's, bit for bit.
``tests/gpu/test_cuda_graph_gpu.py`` compares real graph replays the same way."""

from __future__ import annotations

import pytest
import torch

from gs_gym import GenesisVectorEnv

NUM_ENVS = 6
STEPS = 40


def go2_rollout(num_workers: int, mode: str, cuda_graph: bool, backend: str = "cpu") -> tuple[list[torch.Tensor], int]:
    """Everything 40 steps of large random actions return, final observations included, and how many episodes ended
    (robots fall, and the time limit is 25 steps)."""
    env = GenesisVectorEnv(NUM_ENVS, "go2-walk", backend=backend, num_workers=num_workers, seed=0, autoreset_mode=mode,
                           cuda_graph=cuda_graph, task_kwargs={"max_episode_steps": 25})  # fmt: skip
    try:
        generator = torch.Generator(device=env.main_device).manual_seed(1)
        obs, _ = env.reset(seed=3)
        trace, ends = [obs], 0
        for _ in range(STEPS):
            actions = torch.rand(NUM_ENVS, 12, generator=generator, device=env.main_device) * 8 - 4
            obs, rewards, terminated, truncated, info = env.step(actions)
            trace += [obs, rewards, terminated, truncated, *([info["final_obs"]] if "final_obs" in info else [])]
            ends += int((terminated | truncated).sum())
        return trace, ends
    finally:
        env.close()


@pytest.mark.parametrize("mode", ["next_step", "same_step"])
def test_the_option_changes_no_value_on_the_cpu(mode):
    reference, ends = go2_rollout(0, mode, cuda_graph=False)
    assert ends >= NUM_ENVS  # every env's episode ended at least once (the time limit), most by falling
    for num_workers in (0, 1):
        trace, _ = go2_rollout(num_workers, mode, cuda_graph=True)
        assert len(trace) == len(reference)
        for index, (got, want) in enumerate(zip(trace, reference, strict=True)):
            assert torch.equal(got, want), f"{num_workers} workers, output {index}"
