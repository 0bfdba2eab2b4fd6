"""``gs_gym.tasks.state_views`` on Genesis's CUDA backend (skipped without CUDA; ``tests/tasks/test_state_views.py``
checks the CPU backend): the live views of go2-walk's robot hold the getters' values after physics steps and a masked
reset, on the GPU, where Genesis launches its kernels through quadrants and the views are read by torch's."""

from __future__ import annotations

import pytest
import torch

from gs_gym import GenesisVectorEnv
from tests.tasks.test_state_views import readers_and_getters

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")

NUM_ENVS = 64


def test_views_hold_the_getters_values_on_the_gpu():
    env = GenesisVectorEnv(NUM_ENVS, "go2-walk", backend="gpu", num_workers=0, seed=0)
    try:
        env.reset(seed=0)
        task = env.local_task
        pairs = readers_and_getters(task.robot)
        views = {name: reader() for name, (reader, _) in pairs.items()}
        assert all(view.is_cuda for view in views.values())
        generator = torch.Generator(device=env.main_device).manual_seed(0)
        for step in range(20):
            env.step(torch.rand(NUM_ENVS, 12, generator=generator, device=env.main_device) * 2 - 1)
            if step == 10:
                task.reset_envs(torch.arange(NUM_ENVS, device=env.main_device) % 3 == 0)
            for name, (reader, getter) in pairs.items():
                assert reader() is views[name], name
                assert torch.equal(views[name], getter()), f"{name} at step {step}"
    finally:
        env.close()
