"""``output="shards"``: per-worker outputs, no gather, equal to the gathered reference slice by slice."""

from __future__ import annotations

import re
import time

import pytest
import torch

from gs_gym import GenesisVectorEnv
from tests.conftest import NUM_ENVS, TASK_KWARGS
from tests.equivalence.test_sharding_independence import rollout

SPLIT = [(0, 4), (4, 7)]  # how 7 envs split over two workers


@pytest.fixture(scope="module")
def sharded_env():
    env = GenesisVectorEnv(
        NUM_ENVS,
        "cartpole",
        backend="cpu",
        num_workers=2,
        seed=0,
        output="shards",
        autoreset_mode="same_step",
        task_kwargs=TASK_KWARGS,
    )
    yield env
    env.close()


class _Concatenated:
    """Presents a sharded env as a gathered one, so the shared rollout can compare it with the reference."""

    def __init__(self, env: GenesisVectorEnv) -> None:
        self.env = env

    def reset(self, **kwargs):
        obs, info = self.env.reset(**kwargs)
        return torch.cat(obs), info

    def step(self, actions):
        parts = tuple(actions[start:stop] for start, stop in SPLIT)
        obs, rewards, terminated, truncated, info = self.env.step(parts)
        for output in (obs, rewards, terminated, truncated):
            assert isinstance(output, tuple) and [len(part) for part in output] == [4, 3]
        gathered = {key: torch.cat(value) for key, value in info.items() if key in ("final_obs", "_final_obs")}
        return torch.cat(obs), torch.cat(rewards), torch.cat(terminated), torch.cat(truncated), gathered


def test_shards_equal_the_gathered_reference(shared_env, sharded_env):
    assert [(r.offset, r.stop) for r in sharded_env.env_ranges] == SPLIT
    reference = rollout(shared_env(0, "same_step"), seed=11)
    trace = rollout(_Concatenated(sharded_env), seed=11)
    assert len(trace["final_obs"]) == len(reference["final_obs"]) > 0
    for key, values in reference.items():
        assert len(trace[key]) == len(values)
        for got, want in zip(trace[key], values, strict=True):
            assert torch.equal(got, want), key


def test_one_batch_of_actions_is_split_like_a_tuple(sharded_env):
    actions = torch.linspace(-1, 1, NUM_ENVS).unsqueeze(1)
    sharded_env.reset(seed=3)
    from_batch = sharded_env.step(actions)[0]
    sharded_env.reset(seed=3)
    from_tuple = sharded_env.step((actions[:4], actions[4:]))[0]
    assert all(torch.equal(a, b) for a, b in zip(from_batch, from_tuple, strict=True))


def test_bad_sharded_actions_are_refused_and_leave_the_env_usable(sharded_env):
    sharded_env.reset(seed=0)
    bad = [
        ((torch.zeros(4, 1),), "actions: expected one tensor per worker (2) or one batch, got a tuple of 1"),
        ((torch.zeros(4, 1), torch.zeros(4, 1)), "actions[1]: expected shape (3, 1), got (4, 1)"),
        (
            (torch.zeros(4, 1), torch.full((3, 1), float("nan"))),
            "actions: expected finite values, got NaN or inf for env(s) [4, 5, 6] (the step ran with them as 0)",
        ),
    ]
    for actions, message in bad:
        with pytest.raises(ValueError, match=f"^{re.escape(message)}$"):
            sharded_env.step(actions)
    obs, *_ = sharded_env.step((torch.zeros(4, 1), torch.zeros(3, 1)))
    assert [tuple(part.shape) for part in obs] == [(4, 4), (3, 4)]


def test_without_copies_the_shards_are_the_workers_buffers():
    env = GenesisVectorEnv(
        4, "cartpole", backend="cpu", num_workers=1, seed=0, output="shards", copy=False, task_kwargs=TASK_KWARGS
    )
    try:
        (first,), _ = env.reset(seed=0)
        (obs,), *_ = env.step(torch.ones(4, 1))
        assert obs is first  # the worker's own (shared-memory) buffer, rewritten in place by each step
        assert obs.is_shared()
    finally:
        env.close()


@pytest.mark.parametrize("num_workers", [0, 2])
def test_worker_busy_seconds_account_for_the_steps(shared_env, num_workers):
    env = shared_env(num_workers)
    env.reset(seed=0)
    before = env.worker_busy_seconds
    start = time.perf_counter()
    for _ in range(20):
        env.step(torch.zeros(NUM_ENVS, 1))
    wall = time.perf_counter() - start
    spent = [after - earlier for after, earlier in zip(env.worker_busy_seconds, before, strict=True)]
    assert len(spent) == max(num_workers, 1)
    assert all(0.0 < seconds < wall for seconds in spent)
