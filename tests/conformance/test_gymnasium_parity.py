"""Where Gymnasium's vector envs accept something, so does ours: numpy integers, any non-negative seed, render
without a render mode, step_wait's timeout, actions that require grad (one in-process env, 4 cart-poles)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from gs_gym import GenesisVectorEnv


@pytest.fixture(scope="module")
def env():
    env = GenesisVectorEnv(np.int64(4), "cartpole", backend="cpu", num_workers=np.int64(0), seed=np.int64(3))
    yield env
    env.close()


def test_numpy_integers_are_ints(env):
    assert env.num_envs == 4 and type(env.num_envs) is int
    assert env.options.seed == 3 and type(env.options.seed) is int


def test_seeds_beyond_64_bits_are_folded_and_followed_by_np_random(env):
    obs, _ = env.reset(seed=2**70)
    assert env.np_random_seed == 2**70
    again, _ = env.reset(seed=2**70 + 2**64)  # per-env streams take seeds modulo 2**64
    assert torch.equal(obs, again)
    other, _ = env.reset(seed=5)
    assert env.np_random_seed == 5
    assert not torch.equal(obs, other)


def test_a_negative_seed_is_refused_and_the_env_stays_usable(env):
    env.reset(seed=0)
    with pytest.raises(ValueError, match=r"^seed: expected a non-negative int, got -1$"):
        env.reset(seed=-1)
    _, rewards, *_ = env.step(torch.zeros(4, 1))
    assert rewards.shape == (4,) and torch.isfinite(rewards).all()


def test_render_without_a_render_mode_gives_none(env):
    assert env.render_mode is None
    assert env.render() is None
    assert env.call("render") == (None,) * env.num_envs  # one per env, as SyncVectorEnv gives


def test_step_wait_takes_a_timeout_and_actions_leave_autograd(env):
    env.reset(seed=1)
    weight = torch.ones(4, 1, requires_grad=True)
    env.step_async(weight * 0.5)
    obs, rewards, *_ = env.step_wait(timeout=60.0)
    assert not obs.requires_grad and not rewards.requires_grad
    assert weight.grad is None and obs.grad_fn is None
