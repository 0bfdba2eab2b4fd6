"""EnvRandom's quadrants kernels give the same bits as its torch implementation, on Genesis's CPU backend.

Genesis can be initialized once per process, hence a module of its own. The first run of a fresh kernel cache
compiles the four kernels (a few seconds); later runs load them."""

import pytest
import torch

from gs_gym.tasks import random as env_random
from gs_gym.tasks.random import EnvRandom
from gs_gym.tasks.runtime import init_genesis

NUM_ENVS = 37


@pytest.fixture(scope="module", autouse=True)
def genesis_on_cpu():
    init_genesis("cpu")


def pair(base_seed: int) -> tuple[EnvRandom, EnvRandom]:
    """Two identically seeded shards: the first draws with the kernels, the second with torch."""
    fast, reference = EnvRandom(NUM_ENVS, 5, "cpu"), EnvRandom(NUM_ENVS, 5, "cpu")
    reference.use_kernel = False
    assert env_random._kernels_for(fast.device) is not None  # or both would be torch, and equal trivially
    for rng in (fast, reference):
        rng.seed_range(base_seed)
    return fast, reference


def assert_same_bits(a: torch.Tensor, b: torch.Tensor) -> None:
    assert a.shape == b.shape and a.dtype == b.dtype == torch.float32
    assert torch.equal(a.view(torch.int32), b.view(torch.int32))


def test_the_kernels_are_used_once_genesis_is_initialized():
    assert env_random._kernels_for(torch.device("cpu")) is not None


@pytest.mark.parametrize("shape", [(), (3,), (2, 5), (48,)])
def test_kernels_and_torch_give_the_same_bits(shape):
    fast, reference = pair(2**64 + 11)
    generator = torch.Generator().manual_seed(0)
    low = torch.randn(shape, generator=generator)
    high = low + torch.rand(shape, generator=generator) * 4
    draws = [
        ("uniform", ()),
        ("uniform", (-2.5, 0.1)),
        ("uniform", (low, high)),
        ("uniform", (low.flatten()[0], 3.0)),  # a broadcast tensor bound and a float one
        ("normal", ()),
        ("normal", (0.3,)),
        ("normal", (high,)),
    ]
    for _ in range(5):
        mask = torch.rand(NUM_ENVS, generator=generator) < 0.5
        for method, bounds in draws:
            got = getattr(fast, method)(mask, shape, *bounds)
            assert_same_bits(got, getattr(reference, method)(mask, shape, *bounds))
            assert torch.equal(fast._state, reference._state)  # counters advanced alike


def test_kernels_and_torch_agree_on_many_gaussians():
    fast, reference = pair(0)
    everyone = torch.ones(NUM_ENVS, dtype=torch.bool)
    assert_same_bits(fast.normal(everyone, (4000,)), reference.normal(everyone, (4000,)))


def test_the_kernels_keep_split_independence():
    whole, left = EnvRandom(6, 0, "cpu"), EnvRandom(4, 0, "cpu")
    right = EnvRandom(2, 4, "cpu")
    right.use_kernel = False  # one shard of each kind
    for rng in (whole, left, right):
        rng.seed_range(3)
    mask = torch.tensor([True, False, True, True, False, True])
    expected = whole.normal(mask, (3,))
    assert torch.equal(torch.cat([left.normal(mask[:4], (3,)), right.normal(mask[4:], (3,))]), expected)


def test_bounds_changed_in_place_and_reseeding_after_kernel_draws_are_seen():
    """The kernels keep bounds in arrays of their own, rewritten only when a bound changed: a tensor changed in place
    must be copied again, and seeding after a kernel draw must reach the counters the kernels use."""
    fast, reference = pair(9)
    everyone = torch.ones(NUM_ENVS, dtype=torch.bool)
    low, high = torch.zeros(3), torch.ones(3)
    for _ in range(2):
        assert_same_bits(fast.uniform(everyone, (3,), low, high), reference.uniform(everyone, (3,), low, high))
        low.add_(5.0)
        high.add_(7.0)  # the same tensor objects, new values
    for rng in (fast, reference):
        rng.seed_range(4)
        rng.seed([None, 12] + [None] * (NUM_ENVS - 2))
    assert_same_bits(fast.normal(everyone, (2,), 0.5), reference.normal(everyone, (2,), 0.5))
    assert torch.equal(fast._state, reference._state)
