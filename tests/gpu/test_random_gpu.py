"""EnvRandom's quadrants kernels on Genesis's CUDA backend give the same bits as its torch implementation (skipped
without CUDA; ``tests/unit/test_random_kernel.py`` checks the CPU backend): the kernels compile for the GPU with fast
math, which the draws are written to be immune to (``gs_gym.tasks.random``)."""

from __future__ import annotations

import pytest
import torch

from gs_gym.tasks.random import EnvRandom
from gs_gym.tasks.runtime import init_genesis

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")

NUM_ENVS = 4099  # more envs than one block of threads, and not a multiple of one


def test_kernel_draws_on_the_gpu_give_the_torch_bits():
    init_genesis("gpu")
    import genesis as gs

    device = torch.device(gs.device)
    fast, reference = EnvRandom(NUM_ENVS, 7, device), EnvRandom(NUM_ENVS, 7, device)
    reference.use_kernel = False
    for rng in (fast, reference):
        rng.seed_range(2**64 + 3)
    generator = torch.Generator(device=device).manual_seed(0)
    low = torch.randn(12, generator=generator, device=device)
    high = low + torch.rand(12, generator=generator, device=device) * 3
    for _ in range(3):
        mask = torch.rand(NUM_ENVS, generator=generator, device=device) < 0.5
        for method, shape, bounds in (
            ("uniform", (12,), (low, high)),
            ("uniform", (3,), (-1.0, 2.0)),
            ("normal", (48,), (0.05,)),
            ("normal", (12,), (high,)),
        ):
            got = getattr(fast, method)(mask, shape, *bounds)
            expected = getattr(reference, method)(mask, shape, *bounds)
            assert got.dtype == expected.dtype == torch.float32 and got.shape == expected.shape
            assert torch.equal(got.view(torch.int32), expected.view(torch.int32)), (method, shape)
            assert torch.equal(fast._state, reference._state)
        low.mul_(1.5)  # changed in place: the kernels' copy of the bounds must follow
    assert fast._draws is not None  # the kernels did draw
