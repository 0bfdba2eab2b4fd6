"""The CUDA IPC path on a real GPU (skipped without CUDA): run on the lent H200 with ``pytest tests/gpu``."""

from __future__ import annotations

import re
import subprocess
import sys
import textwrap

import numpy as np
import pytest
import torch

from gs_gym import GenesisVectorEnv
from gs_gym.transport.devices import cuda_uuid

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")

NUM_ENVS = 64
KWARGS = dict(task="cartpole", backend="gpu", seed=0, task_kwargs={"max_episode_steps": 50})


@pytest.fixture(scope="module")
def envs():
    built = {
        "in-process": GenesisVectorEnv(NUM_ENVS, num_workers=0, **KWARGS),
        "1 worker": GenesisVectorEnv(NUM_ENVS, num_workers=1, **KWARGS),
        "2 workers on GPU 0": GenesisVectorEnv(NUM_ENVS, num_workers=2, devices=[0], **KWARGS),
        "1 worker, host buffers": GenesisVectorEnv(NUM_ENVS, num_workers=1, host_buffers=True, **KWARGS),
    }
    yield built
    for env in built.values():
        env.close()


def rollout(env, steps=120):
    generator = torch.Generator(device="cuda").manual_seed(0)
    obs, _ = env.reset(seed=3)
    out = [obs]
    for _ in range(steps):
        actions = torch.rand(NUM_ENVS, 1, device="cuda", generator=generator) * 2 - 1
        obs, rewards, terminated, truncated, _ = env.step(actions)
        out += [obs, rewards, terminated.float(), truncated.float()]
    return torch.stack([t.reshape(NUM_ENVS, -1).sum(1) for t in out])


def test_workers_match_the_in_process_env(envs):
    reference = rollout(envs["in-process"])
    for name in ("1 worker", "2 workers on GPU 0", "1 worker, host buffers"):
        torch.testing.assert_close(rollout(envs[name]), reference, atol=1e-4, rtol=1e-4, msg=name)


def test_non_finite_cuda_actions_act_as_zero_then_raise(envs):
    """The check rides on the step's own wait: no host sync before the step, every split alike."""
    actions = torch.full((NUM_ENVS, 1), 0.5, device="cuda")
    bad, zeroed = actions.clone(), actions.clone()
    bad[[3, 40], 0] = float("nan")
    zeroed[[3, 40], 0] = 0.0
    message = "actions: expected finite values, got NaN or inf for env(s) [3, 40] (the step ran with them as 0)"
    for name, env in envs.items():
        env.reset(seed=5)
        env.step(zeroed)
        expected = env.step(actions)[0]
        env.reset(seed=5)
        with pytest.raises(ValueError, match=re.escape(message)):
            env.step(bad)
        torch.testing.assert_close(env.step(actions)[0], expected, atol=0, rtol=0, msg=name)


def test_outputs_live_on_the_main_gpu(envs):
    obs, _ = envs["1 worker"].reset(seed=0)
    assert obs.device == torch.device("cuda:0")
    rewards = envs["1 worker"].step(torch.zeros(NUM_ENVS, 1, device="cuda"))[1]
    assert rewards.device == torch.device("cuda:0")


def test_two_workers_share_gpu_0_with_distinct_shards(envs):
    env = envs["2 workers on GPU 0"]
    assert env.worker_devices == ["cuda:0", "cuda:0"]
    assert [(r.offset, r.count) for r in env.env_ranges] == [(0, 32), (32, 32)]
    pids = env.worker_pids
    assert len(set(pids)) == 2
    obs, _ = env.reset(seed=0)
    reference, _ = envs["in-process"].reset(seed=0)
    torch.testing.assert_close(obs, reference)  # each half comes from its own worker, in order
    assert not torch.equal(obs[:32], obs[32:])


def test_sharded_outputs_are_the_workers_cuda_buffers(envs):
    env = GenesisVectorEnv(NUM_ENVS, num_workers=2, devices=[0], output="shards", copy=False, **KWARGS)
    try:
        shards, _ = env.reset(seed=0)
        reference, _ = envs["in-process"].reset(seed=0)
        assert [part.device for part in shards] == [torch.device("cuda:0")] * 2
        torch.testing.assert_close(torch.cat(shards), reference)
        actions = torch.rand(NUM_ENVS, 1, device="cuda") * 2 - 1
        obs, rewards, *_ = env.step((actions[:32], actions[32:]))
        want = envs["in-process"].step(actions)
        torch.testing.assert_close(torch.cat(obs), want[0])
        torch.testing.assert_close(torch.cat(rewards), want[1])
        later, *_ = env.step((actions[:32], actions[32:]))
        # no gather, no copy: the workers' own buffers, rewritten in place by the next step
        assert [part.data_ptr() for part in later] == [part.data_ptr() for part in obs]
        torch.testing.assert_close(torch.cat(later), envs["in-process"].step(actions)[0])
    finally:
        env.close()


def test_copied_outputs_are_not_touched_by_later_steps(envs):
    """``copy=True`` (the default): in process the task's own tensors are cloned once; numpy outputs are the copy to
    the host, with no clone on the device before it."""

    def push(env, value):
        if env.output == "numpy":
            return env.step(np.full((NUM_ENVS, 1), value, dtype=np.float32))[:4]
        return env.step(torch.full((NUM_ENVS, 1), value, device="cuda"))[:4]

    def values(outputs):
        return [np.array(output.tolist()) for output in outputs]  # host copies, of numpy arrays and tensors alike

    as_numpy = GenesisVectorEnv(NUM_ENVS, num_workers=0, output="numpy", **KWARGS)
    try:
        for name, env in {**envs, "in-process, numpy": as_numpy}.items():
            env.reset(seed=4)
            outputs = push(env, 0.5)
            saved = values(outputs)
            for _ in range(3):
                later = push(env, -0.5)
            assert not np.array_equal(values(later)[0], saved[0]), name  # the state moved on
            for got, want in zip(values(outputs), saved, strict=True):
                assert np.array_equal(got, want), name
    finally:
        as_numpy.close()


def test_step_async_lets_the_caller_work_while_the_worker_steps(envs):
    env = envs["1 worker"]
    env.reset(seed=0)
    actions = torch.zeros(NUM_ENVS, 1, device="cuda")
    env.step_async(actions)
    side = torch.ones(1024, 1024, device="cuda") @ torch.ones(1024, 1024, device="cuda")  # the caller's own work
    obs, *_ = env.step_wait()
    assert side[0, 0].item() == 1024.0 and obs.shape == (NUM_ENVS, 4)


def test_buffers_are_mapped_by_uuid(envs):
    env = envs["1 worker"]
    assert env.worker_gpu_uuids == [cuda_uuid(0)]
    obs, _ = env.reset(seed=0)
    assert obs.device == torch.device("cuda:0")


def test_gpu_memory_is_flat_over_10000_steps(envs):
    env = envs["1 worker"]
    env.reset(seed=0)
    actions = torch.zeros(NUM_ENVS, 1, device="cuda")
    for _ in range(500):
        env.step(actions)
    torch.cuda.synchronize()
    free_before, allocated_before = torch.cuda.mem_get_info()[0], torch.cuda.memory_allocated()
    for _ in range(10_000):
        env.step(actions)
    torch.cuda.synchronize()
    free_after, allocated_after = torch.cuda.mem_get_info()[0], torch.cuda.memory_allocated()
    assert allocated_after == allocated_before
    assert abs(free_before - free_after) < 8 * 2**20  # device-wide, the worker's memory included


def test_close_is_clean():
    script = textwrap.dedent(
        """
        import torch
        from gs_gym import GenesisVectorEnv
        if __name__ == "__main__":
            env = GenesisVectorEnv(16, "cartpole", backend="gpu", num_workers=1, seed=0)
            env.reset(seed=0)
            for _ in range(10):
                obs, *_ = env.step(torch.zeros(16, 1, device="cuda"))
            env.close()
            print("closed", obs.shape[0])
        """
    )
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.strip().splitlines()[-1] == "closed 16"
    assert "Producer process has been terminated" not in result.stderr
