"""GPU identity across processes whose ``CUDA_VISIBLE_DEVICES`` differ: physical GPUs are named by UUID."""

from __future__ import annotations

import torch

from gs_gym.errors import DeviceNotVisibleError


def cuda_uuid(index: int = 0) -> str:
    """The UUID of the CUDA device that this process sees as ``cuda:index``."""
    return str(torch.cuda.get_device_properties(index).uuid)


def index_for_uuid(uuid: str) -> int:
    """This process's index of the GPU with ``uuid``; raises if this process cannot see it."""
    for index in range(torch.cuda.device_count()):
        if cuda_uuid(index) == uuid:
            return index
    raise DeviceNotVisibleError(f"GPU {uuid} of a worker is not visible to this process (CUDA_VISIBLE_DEVICES?)")


def visible_gpu_count() -> int:
    """CUDA devices this process can use (0 when torch has no CUDA)."""
    return torch.cuda.device_count() if torch.cuda.is_available() else 0
