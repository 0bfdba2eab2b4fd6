"""A shard writes the kernels compiled so far to the kernel cache after each reset of every env and after its first
step, not only at exit (quadrants' own moment): other processes building the same scene meanwhile load them instead of
compiling them."""

import torch

import gs_gym.vector.shard as shard_module
from gs_gym import GenesisVectorEnv


def test_full_resets_and_the_first_step_write_the_compiled_kernels(monkeypatch):
    saves: list[int] = []
    monkeypatch.setattr(shard_module, "save_compiled_kernels", lambda: saves.append(len(saves)))
    env = GenesisVectorEnv(2, "cartpole", backend="cpu", num_workers=0, seed=0)
    try:
        env.reset(seed=0)
        assert saves == [0]
        env.step(torch.zeros(2, 1))
        assert saves == [0, 1]
        env.step(torch.zeros(2, 1))
        assert saves == [0, 1]
        env.reset(options={"reset_mask": torch.tensor([True, False])})
        assert saves == [0, 1]  # a partial reset writes nothing
        env.reset(seed=1)
        env.step(torch.zeros(2, 1))
        assert saves == [0, 1, 2]
    finally:
        env.close()


def test_a_cache_that_cannot_be_written_is_a_warning_not_an_error(monkeypatch, caplog):
    from quadrants.lang import impl

    from gs_gym.tasks.runtime import KERNEL_CACHE, save_compiled_kernels

    class FullDisk:
        def dump_cache_data_to_disk(self) -> None:
            raise RuntimeError("No space left on device")

    monkeypatch.setattr(impl, "get_runtime", lambda: type("Runtime", (), {"prog": FullDisk()})())
    with caplog.at_level("WARNING", logger="gs_gym"):
        save_compiled_kernels()
    assert [record.getMessage() for record in caplog.records] == [
        f"could not write compiled kernels to {KERNEL_CACHE}: No space left on device"
    ]
