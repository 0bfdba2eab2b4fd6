"""The data plane: a shard's preallocated buffers, exported once by the worker and opened once by the parent.

CPU tensors move to shared memory and travel as file descriptors (torch's multiprocessing reductions). CUDA tensors
travel as CUDA IPC handles; the parent reopens each on *its* index of the worker's GPU, found by UUID, because a
tensor rebuilt from a child with a narrower ``CUDA_VISIBLE_DEVICES`` would otherwise keep the child's index
(pytorch issue 149196). Per step only the events below and ``OpenedShard.step_flags`` run.

CUDA buffers come with two interprocess events, so that neither process waits on the host for the other's GPU work:
the parent records ``parent_done`` after writing the actions (and after its last read of the outputs) and before it
sends a command; the worker's stream waits on it before touching the buffers, and the worker records
``worker_done`` after its last write; the parent's stream waits on that before reading the outputs.
"""

from __future__ import annotations

import dataclasses
import math
import os
from typing import Any

import torch
import torch.multiprocessing  # registers tensor reductions with multiprocessing's pickler
from torch.multiprocessing.reductions import reduce_tensor

from gs_gym.transport.devices import cuda_uuid, index_for_uuid

_CUDA_STORAGE_DEVICE_ARG = 6  # position of ``storage_device`` in torch's rebuild_cuda_tensor arguments

ALL_FINITE, ANY_DONE = 0, 1
"""Positions in ``ShardBuffers.step_flags``."""


@dataclasses.dataclass
class ShardBuffers:
    """The tensors a shard reads actions from and writes results to, all on one device.

    ``observations``, ``rewards``, ``terminated`` and ``truncated`` are views of one byte block, ``step_outputs``, in
    that order (``step_output_views``), so that one kernel writes the four (``publish_step_outputs``) and one clone
    copies them: a step over CUDA IPC then costs two launches for its outputs instead of eight."""

    actions: torch.Tensor
    observations: torch.Tensor
    rewards: torch.Tensor
    terminated: torch.Tensor
    truncated: torch.Tensor
    step_outputs: torch.Tensor
    """uint8, the bytes of the four step outputs above (views of it until an in-process shard points them elsewhere:
    ``ShardSpec.outputs_by_reference``)."""
    final_observations: torch.Tensor
    """Observations before autoreset (SAME_STEP): equal to ``observations`` except for envs that were reset."""
    step_flags: torch.Tensor
    """float32 ``(2,)`` in host memory: what the last step found, at ``ALL_FINITE`` the sum of the values the checks
    cover (finite when they all were) and at ``ANY_DONE`` the number of envs that finished (``gs_gym.vector.flags``).
    The shard computes them on its device and copies them here once per step; with CUDA buffers this memory is
    page-locked (``lock_step_flags``), so that the copy does not wait either. The parent reads them after the step's
    reply (``OpenedShard.step_flags``): the step's one host wait happens there, and waits on the worker's own event,
    with no work of the parent's on the GPU."""

    @classmethod
    def allocate(
        cls, num_envs: int, obs_shape: tuple[int, ...], act_shape: tuple[int, ...], device: torch.device
    ) -> ShardBuffers:
        def zeros(*shape: int, dtype: torch.dtype = torch.float32) -> torch.Tensor:
            return torch.zeros(shape, dtype=dtype, device=device)

        # float32 observations and rewards, then two bools per env: every part starts 4-byte aligned
        block = zeros((math.prod(obs_shape) + 1) * 4 * num_envs + 2 * num_envs, dtype=torch.uint8)
        observations, rewards, terminated, truncated = step_output_views(block, num_envs, obs_shape)
        return cls(
            actions=zeros(num_envs, *act_shape),
            observations=observations,
            rewards=rewards,
            terminated=terminated,
            truncated=truncated,
            step_outputs=block,
            final_observations=zeros(num_envs, *obs_shape),
            step_flags=torch.tensor([0.0, 1.0]),  # before any step: finite, and "some env may be done"
        )

    def publish_step_outputs(
        self, observations: torch.Tensor, rewards: torch.Tensor, terminated: torch.Tensor, truncated: torch.Tensor
    ) -> None:
        """Write the four step outputs (float32, float32, bool, bool, of this shard's shapes, on this device) into
        ``step_outputs``: one concatenation of their bytes, one kernel."""
        write_step_outputs(self.step_outputs, observations, rewards, terminated, truncated)

    def copy_step_outputs(
        self, observations: torch.Tensor, rewards: torch.Tensor, terminated: torch.Tensor, truncated: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
        """The four step outputs copied, by one kernel, into a new block laid out as ``step_outputs``: its views."""
        block = torch.empty_like(self.step_outputs)
        write_step_outputs(block, observations, rewards, terminated, truncated)
        return self.step_output_views(block)

    def step_output_views(self, block: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
        """``block`` (``step_outputs`` or a copy of it) as observations, rewards, terminated and truncated."""
        return step_output_views(block, self.observations.shape[0], tuple(self.observations.shape[1:]))

    def tensors(self) -> dict[str, torch.Tensor]:
        return {field.name: getattr(self, field.name) for field in dataclasses.fields(self)}

    def share(self) -> None:
        """Move CPU buffers to shared memory in place (CUDA buffers are shareable as they are)."""
        for tensor in self.tensors().values():
            if tensor.device.type == "cpu":
                tensor.share_memory_()

    def lock_step_flags(self) -> None:
        """Page-lock ``step_flags`` in place (after ``share``: the shared pages themselves), so that a copy from the
        GPU into it is asynchronous. Only for CUDA buffers, whose events tell when the copy has landed; with host
        buffers the flags' copy must land before the worker replies, as the other outputs' do."""
        flags = self.step_flags
        if not flags.is_shared():
            self.step_flags = flags.pin_memory()
            return
        error = int(torch.cuda.cudart().cudaHostRegister(flags.data_ptr(), flags.untyped_storage().nbytes(), 0))
        if error:
            raise RuntimeError(f"cudaHostRegister of the shared step flags failed with cudaError {error}")


def write_step_outputs(
    block: torch.Tensor,
    observations: torch.Tensor,
    rewards: torch.Tensor,
    terminated: torch.Tensor,
    truncated: torch.Tensor,
) -> None:
    """Write the four step outputs into ``block`` (laid out as ``ShardBuffers.step_outputs``): one concatenation of
    their bytes, one kernel."""
    as_bytes = (
        observations.reshape(-1).view(torch.uint8),  # reshape: contiguous, or a copy
        rewards.contiguous().view(torch.uint8),
        terminated.view(torch.uint8),  # bool to uint8: the same size, any strides
        truncated.view(torch.uint8),
    )
    torch.cat(as_bytes, out=block)


def step_output_views(
    block: torch.Tensor, num_envs: int, obs_shape: tuple[int, ...]
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """The uint8 ``block`` of ``ShardBuffers.step_outputs`` as its four views: observations (float32, ``(num_envs,
    *obs_shape)``), rewards (float32), terminated and truncated (bool, ``(num_envs,)`` each)."""
    # one split, not four slices: the parent makes these views of a new block at every step
    observations, rewards, terminated, truncated = block.split_with_sizes(
        (4 * num_envs * math.prod(obs_shape), 4 * num_envs, num_envs, num_envs)
    )
    return (
        observations.view(torch.float32).view(num_envs, *obs_shape),
        rewards.view(torch.float32),
        terminated.view(torch.bool),
        truncated.view(torch.bool),
    )


@dataclasses.dataclass(frozen=True)
class StepFlags:
    """``ShardBuffers.step_flags`` as Python bools (``OpenedShard.step_flags``)."""

    all_finite: bool
    any_done: bool


@dataclasses.dataclass(frozen=True)
class SyncEvents:
    """The two interprocess events of a worker's CUDA buffers (see the module docstring)."""

    parent_done: torch.cuda.Event
    worker_done: torch.cuda.Event

    @classmethod
    def create(cls) -> SyncEvents:
        return cls(torch.cuda.Event(interprocess=True), torch.cuda.Event(interprocess=True))


@dataclasses.dataclass(frozen=True)
class ExportedTensor:
    """A tensor as it crosses the pipe: the tensor itself (CPU, shared memory) or CUDA IPC rebuild arguments."""

    cpu_tensor: torch.Tensor | None
    cuda_rebuild: tuple[Any, ...] | None


@dataclasses.dataclass(frozen=True)
class Handshake:
    """What a worker reports once its shard is built: its buffers and events, exported, and where it runs."""

    buffers: dict[str, ExportedTensor]
    events: tuple[bytes, bytes] | None
    """IPC handles of ``SyncEvents`` (parent_done, worker_done); None for host buffers."""
    device: str
    gpu_uuid: str | None
    pid: int

    @classmethod
    def export(cls, buffers: ShardBuffers, events: SyncEvents | None, device: torch.device) -> Handshake:
        """Describe ``buffers`` and ``events`` for the parent. The caller keeps them alive until the parent closes."""
        gpu_uuid = cuda_uuid(device.index or 0) if device.type == "cuda" else None
        exported = {name: _export_tensor(tensor) for name, tensor in buffers.tensors().items()}
        handles = None if events is None else (events.parent_done.ipc_handle(), events.worker_done.ipc_handle())
        return cls(exported, handles, str(device), gpu_uuid, os.getpid())

    def open(self) -> OpenedShard:
        """Open the buffers and events in this process, on this process's index of the worker's GPU."""
        index = None if self.gpu_uuid is None else index_for_uuid(self.gpu_uuid)
        buffers = ShardBuffers(**{name: _import_tensor(e, index) for name, e in self.buffers.items()})
        events = None
        if self.events is not None and index is not None:
            device = torch.device("cuda", index)
            parent_done, worker_done = (torch.cuda.Event.from_ipc_handle(device, handle) for handle in self.events)
            events = SyncEvents(parent_done, worker_done)
        return OpenedShard(buffers, events)


@dataclasses.dataclass(frozen=True)
class OpenedShard:
    """A worker's buffers (and events) as the parent uses them."""

    buffers: ShardBuffers
    events: SyncEvents | None
    flags_landed: torch.cuda.Event | None = None
    """In process on a GPU, the shard's event recorded after each copy of its step flags (``StepFlagValues``)."""

    def release(self) -> None:
        """Before a command that writes the buffers: the worker's stream may go on once this process's queued work
        on them (action copies, output reads) is done. No host wait."""
        if self.events is not None:
            device = self.buffers.actions.device
            self.events.parent_done.record(torch.cuda.current_stream(device))

    def step_flags(self) -> StepFlags:
        """The last step's flags, once they have landed: this process's host waits for the worker's ``worker_done``
        event (CUDA IPC; nothing of this process's on the GPU comes first), or in process for the copy of the flags
        (``flags_landed``); host buffers are written before the reply."""
        if self.events is not None:
            self.events.worker_done.synchronize()
        elif self.flags_landed is not None:
            self.flags_landed.synchronize()
        checked_sum, done_count = self.buffers.step_flags.tolist()
        return StepFlags(all_finite=math.isfinite(checked_sum), any_done=done_count > 0)

    def acquire(self) -> None:
        """After such a command's reply: this process's stream reads the outputs only once the worker's writes are
        done. No host wait."""
        if self.events is not None:
            device = self.buffers.actions.device
            torch.cuda.current_stream(device).wait_event(self.events.worker_done)


def _export_tensor(tensor: torch.Tensor) -> ExportedTensor:
    if tensor.device.type == "cpu":
        if not tensor.is_shared():
            raise ValueError("ShardBuffers.share() must run before a CPU buffer is exported")
        return ExportedTensor(tensor, None)
    return ExportedTensor(None, reduce_tensor(tensor))


def _import_tensor(exported: ExportedTensor, index: int | None) -> torch.Tensor:
    if exported.cpu_tensor is not None:
        return exported.cpu_tensor
    assert exported.cuda_rebuild is not None and index is not None
    rebuild, args = exported.cuda_rebuild
    args = list(args)
    args[_CUDA_STORAGE_DEVICE_ARG] = index
    return rebuild(*args)
