"""Export a worker's preallocated tensors once, and open them once in the parent.

CPU tensors move to shared memory and travel as file descriptors (torch's multiprocessing reductions). CUDA tensors
travel as CUDA IPC handles; the parent reopens each on *its* index of the worker's GPU, found by UUID, because a
tensor rebuilt from a child with a narrower ``CUDA_VISIBLE_DEVICES`` would otherwise keep the child's index
(pytorch issue 149196). Nothing here runs per step.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import torch
import torch.multiprocessing  # noqa: F401  (registers tensor reductions with multiprocessing's pickler)
from torch.multiprocessing.reductions import reduce_tensor

from gs_gym.transport.devices import index_for_uuid

_CUDA_STORAGE_DEVICE_ARG = 6  # position of ``storage_device`` in torch's rebuild_cuda_tensor arguments


@dataclasses.dataclass(frozen=True)
class ExportedTensor:
    """A tensor as it crosses the pipe: the tensor itself (CPU, shared memory) or CUDA IPC rebuild arguments."""

    cpu_tensor: torch.Tensor | None
    cuda_rebuild: tuple[Any, ...] | None
    gpu_uuid: str | None


def make_shareable(tensor: torch.Tensor) -> torch.Tensor:
    """Move a CPU tensor to shared memory in place (CUDA tensors are shareable as they are)."""
    if tensor.device.type == "cpu":
        tensor.share_memory_()
    return tensor


def export_tensor(tensor: torch.Tensor, gpu_uuid: str | None) -> ExportedTensor:
    """Describe ``tensor`` for the parent. The caller must keep ``tensor`` alive until the parent closes."""
    if tensor.device.type == "cpu":
        if not tensor.is_shared():
            raise ValueError("export_tensor: CPU tensors must be in shared memory (make_shareable) first")
        return ExportedTensor(tensor, None, None)
    rebuild, args = reduce_tensor(tensor)
    return ExportedTensor(None, (rebuild, args), gpu_uuid)


def import_tensor(exported: ExportedTensor) -> torch.Tensor:
    """Open an exported tensor in this process, on this process's index of the worker's GPU."""
    if exported.cpu_tensor is not None:
        return exported.cpu_tensor
    assert exported.cuda_rebuild is not None and exported.gpu_uuid is not None
    rebuild, args = exported.cuda_rebuild
    args = list(args)
    args[_CUDA_STORAGE_DEVICE_ARG] = index_for_uuid(exported.gpu_uuid)
    return rebuild(*args)
