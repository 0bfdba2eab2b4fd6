"""Actions into the shards' buffers, outputs out of them, as the env's ``output`` option asks.

``output="torch"`` gathers on ``main_device``: with one shard already there and ``copy=False`` the shard's own buffer
is returned (no kernel at all), and so it is in process with ``copy=True``, where the buffers hold tensors nothing
writes again (``EnvOptions.outputs_by_reference``); otherwise one copy per shard. ``"numpy"`` moves the gathered
batch to the host (shared-memory buffers of the CPU backend are viewed, not copied, when ``copy=False``).
``"shards"`` gathers nothing. Reading a CUDA worker's buffers needs no host wait: the pool has already queued this
process's stream behind the worker's writes (``gs_gym.transport.buffers``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import torch

from gs_gym.transport.buffers import OpenedShard, ShardBuffers
from gs_gym.vector.sharding import EnvRange
from gs_gym.vector.validation import as_action_tensor


class BatchIO:
    """Moves a batch of actions into the shards and their outputs back out, for one env's ``output`` and ``copy``."""

    def __init__(
        self,
        ranges: Sequence[EnvRange],
        obs_shape: tuple[int, ...],
        action_shape: tuple[int, ...],
        *,
        output: str,
        copy: bool,
        main_device: torch.device,
        by_reference: bool = False,
    ) -> None:
        """``by_reference``: the shards' buffers are copies already (``EnvOptions.outputs_by_reference``): returned as
        they are whatever ``copy`` asks."""
        self.ranges = list(ranges)
        self.num_envs = self.ranges[-1].stop
        self.action_shape = action_shape
        self.output = output
        self.copy = copy
        self._by_reference = by_reference
        self.main_device = main_device
        self._to_gpu = main_device.type == "cuda"
        """Copies into ``main_device`` may be asynchronous only there (a copy to the host must block)."""
        self._fresh_on_host = output == "numpy" and main_device.type != "cpu"
        """The numpy output of a device tensor is a copy already: ``copy=True`` needs no clone before it."""
        self._gathered = (
            None if output == "shards" else ShardBuffers.allocate(self.num_envs, obs_shape, action_shape, main_device)
        )

    def action_parts(self, actions: Any) -> list[torch.Tensor]:
        """Each shard's slice of ``actions``, their type, shape and dtype checked (nothing is written yet); with
        ``output="shards"`` also a tuple of one tensor per shard. Detached from autograd: the env's buffers never join
        a graph."""
        if (
            self.output == "shards"
            and isinstance(actions, (tuple, list))
            and all(isinstance(part, (torch.Tensor, np.ndarray)) for part in actions)
        ):
            if len(actions) != len(self.ranges):
                raise ValueError(
                    f"actions: expected one tensor per worker ({len(self.ranges)}) or one batch, "
                    f"got a {type(actions).__name__} of {len(actions)}"
                )
            return [
                as_action_tensor(part, (shard.count, *self.action_shape), name=f"actions[{i}]")
                for i, (shard, part) in enumerate(zip(self.ranges, actions, strict=True))
            ]
        batch = as_action_tensor(actions, (self.num_envs, *self.action_shape))
        if len(self.ranges) == 1:
            return [batch]  # the whole batch: no slice to make
        return [batch[shard.offset : shard.stop] for shard in self.ranges]

    @staticmethod
    def write_actions(shards: Sequence[OpenedShard], parts: Sequence[torch.Tensor]) -> None:
        for shard, part in zip(shards, parts, strict=True):
            buffer = shard.buffers.actions
            buffer.copy_(part, non_blocking=buffer.device.type == "cuda")  # a copy to the host must block

    def read(self, shards: Sequence[OpenedShard], name: str, copy: bool | None = None) -> Any:
        """The shards' buffer ``name`` as ``output`` asks (``copy``: override the env's ``copy`` option)."""
        parts = [getattr(shard.buffers, name) for shard in shards]
        fresh = self.copy if copy is None else copy
        clone = fresh and not self._by_reference  # by reference the buffers are copies already
        if self.output == "shards":
            return tuple(part.clone() for part in parts) if clone else tuple(parts)
        if len(parts) == 1 and parts[0].device == self.main_device:
            batch = parts[0].clone() if clone and not self._fresh_on_host else parts[0]
        elif fresh:
            batch = torch.cat([part.to(self.main_device, non_blocking=self._to_gpu) for part in parts])
        else:
            assert self._gathered is not None
            batch = getattr(self._gathered, name)
            for shard, part in zip(self.ranges, parts, strict=True):
                batch[shard.offset : shard.stop].copy_(part, non_blocking=self._to_gpu)
        return self._host_or_device(batch)

    def read_step(self, shards: Sequence[OpenedShard]) -> tuple[Any, Any, Any, Any]:
        """Observations, rewards, terminated and truncated as ``read`` gives each; one worker's four are copied by
        one clone of its ``step_outputs`` where ``read`` would clone each (a step's copies: one kernel, not four)."""
        buffers = shards[0].buffers
        one_clone = (
            len(shards) == 1
            and buffers.step_outputs.device == self.main_device
            and self.copy
            and not self._by_reference
            and self.output != "shards"
        )
        if not one_clone:
            read = self.read
            return (
                read(shards, "observations"),
                read(shards, "rewards"),
                read(shards, "terminated"),
                read(shards, "truncated"),
            )
        block = buffers.step_outputs.cpu() if self._fresh_on_host else buffers.step_outputs.clone()
        observations, rewards, terminated, truncated = (
            self._host_or_device(view) for view in buffers.step_output_views(block)
        )
        return observations, rewards, terminated, truncated

    def present(self, parts: list[torch.Tensor]) -> Any:
        """Per-shard tensors computed in this process (not the shards' buffers) as ``output`` asks."""
        if self.output == "shards":
            return tuple(parts)
        if len(parts) == 1:
            return self._host_or_device(parts[0].to(self.main_device))
        return self._host_or_device(torch.cat([part.to(self.main_device) for part in parts]))

    def same_step_info(self, shards: Sequence[OpenedShard], done: Any) -> dict[str, Any]:
        """SAME_STEP's ``info`` for a step where some env finished; ``done`` is the mask as ``present`` gave it.

        ``output="numpy"`` follows ``gymnasium.vector.SyncVectorEnv`` exactly: ``final_obs`` is an object array
        with the final observation of each finished env and None elsewhere, ``final_info`` an empty dict (tasks
        have no per-env info), and ``_final_obs``/``_final_info`` two separate bool masks. Tensor outputs keep a
        dense batch of every env's pre-reset observation (rows of envs that go on equal ``obs``): an object array
        cannot live on a GPU, and picking the finished rows would wait for the device to count them.
        """
        final = self.read(shards, "final_observations", copy=True)
        if self.output == "numpy":
            dense, final = final, np.full(self.num_envs, None, dtype=object)
            for index in np.flatnonzero(done):
                final[index] = dense[index]
            return {"final_obs": final, "_final_obs": done, "final_info": {}, "_final_info": done.copy()}
        return {"final_obs": final, "_final_obs": done, "final_info": {}, "_final_info": done}

    def _host_or_device(self, tensor: torch.Tensor) -> torch.Tensor | np.ndarray:
        return tensor.cpu().numpy() if self.output == "numpy" else tensor
