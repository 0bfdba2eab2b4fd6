"""Cart-pole's build on the CPU backend leaves nothing in the temporary directory: its URDF is written there for
Genesis to parse and removed before the build compiles, so a worker killed while compiling leaks no directory."""

from __future__ import annotations

import tempfile

import torch

from gs_gym import GenesisVectorEnv


def test_a_built_cartpole_leaves_no_urdf_directory(tmp_path, monkeypatch):
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    env = GenesisVectorEnv(2, "cartpole", backend="cpu", num_workers=0, seed=0, verbose=False)
    try:
        assert [p.name for p in tmp_path.iterdir() if p.name.startswith("gs_gym_cartpole_")] == []
        env.reset(seed=0)
        _, rewards, *_ = env.step(torch.zeros(2, 1))
        assert rewards.shape == (2,)
    finally:
        env.close()
