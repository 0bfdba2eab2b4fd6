"""One batched Genesis scene and the Gymnasium step semantics around it.

An ``EnvShard`` owns envs ``[env_offset, env_offset + num_envs)`` of the vector env. It runs inside a worker
process, or in the parent for the in-process reference, and behaves identically in both: actions are read from and
results written to its preallocated ``ShardBuffers``, and the autoreset mode is applied here, next to the
simulation, so that a step costs one round trip whatever the mode.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable
from typing import Any

import numpy as np
import torch
from gymnasium.vector import AutoresetMode

from gs_gym.errors import NonFiniteObservationError
from gs_gym.tasks.base import Task, TaskConfig
from gs_gym.tasks.random import EnvRandom
from gs_gym.tasks.runtime import KERNEL_CACHE, init_genesis
from gs_gym.transport.buffers import ExportedTensor, export_tensor, import_tensor, make_shareable

IMPORTING_GENESIS = "importing genesis"
"""Build stage: importing Genesis and ``gs.init`` (seconds)."""
BUILDING_SCENE = "building scene"
"""Build stage: the task builds its scene; a first build compiles Genesis kernels (minutes), later ones load them."""


def kernel_cache_notice() -> str:
    """One line for the user about the kernel cache (its location as ``gs-gym info`` reports it)."""
    return f"the first build of a scene compiles Genesis kernels (minutes); later builds load them from {KERNEL_CACHE}"


def _ignore_stage(stage: str) -> None:
    """The ``report`` of a shard whose build nobody displays."""


@dataclasses.dataclass(frozen=True)
class ShardSpec:
    """Everything a process needs to build one shard; cloudpickled to workers."""

    task_class: type[Task]
    config: TaskConfig
    num_envs: int
    env_offset: int
    backend: str
    autoreset_mode: AutoresetMode
    base_seed: int
    performance_mode: bool = False
    share_buffers: bool = False
    """Put CPU buffers in shared memory (worker processes); the in-process shard does not need it."""
    host_buffers: bool = False
    """Keep the buffers in host memory even when the simulation runs on a GPU (one copy each way per step)."""
    check_observations: bool = True
    """Raise ``NonFiniteObservationError`` when a step observes NaN or inf (one reduction per step)."""
    genesis_logging_level: str = "warning"
    """``gs.init(logging_level=...)``: what Genesis itself prints (in a worker: through the worker's output)."""


@dataclasses.dataclass
class ShardBuffers:
    """The tensors a shard reads actions from and writes results to, all on the shard's device."""

    actions: torch.Tensor
    observations: torch.Tensor
    rewards: torch.Tensor
    terminated: torch.Tensor
    truncated: torch.Tensor
    final_observations: torch.Tensor
    """Observations before autoreset (SAME_STEP): equal to ``observations`` except for envs that were reset."""

    @classmethod
    def allocate(cls, num_envs: int, obs_shape: tuple[int, ...], act_shape: tuple[int, ...], device: torch.device):
        def zeros(*shape: int, dtype: torch.dtype = torch.float32) -> torch.Tensor:
            return torch.zeros(shape, dtype=dtype, device=device)

        return cls(
            actions=zeros(num_envs, *act_shape),
            observations=zeros(num_envs, *obs_shape),
            rewards=zeros(num_envs),
            terminated=zeros(num_envs, dtype=torch.bool),
            truncated=zeros(num_envs, dtype=torch.bool),
            final_observations=zeros(num_envs, *obs_shape),
        )

    def tensors(self) -> dict[str, torch.Tensor]:
        return {field.name: getattr(self, field.name) for field in dataclasses.fields(self)}


@dataclasses.dataclass(frozen=True)
class ShardHandshake:
    """What a shard reports once built: its buffers, exported for another process, and where it runs."""

    buffers: dict[str, ExportedTensor]
    device: str
    gpu_uuid: str | None
    pid: int

    def open_buffers(self) -> ShardBuffers:
        return ShardBuffers(**{name: import_tensor(exported) for name, exported in self.buffers.items()})


class EnvShard:
    """A built task plus its buffers, episode counters and random streams."""

    def __init__(self, spec: ShardSpec, report: Callable[[str], None] | None = None) -> None:
        """Build the shard; ``report(stage)`` is told when it reaches ``IMPORTING_GENESIS`` and ``BUILDING_SCENE``."""
        report = report or _ignore_stage
        report(IMPORTING_GENESIS)
        init_genesis(spec.backend, performance_mode=spec.performance_mode, logging_level=spec.genesis_logging_level)
        import genesis as gs

        self.spec = spec
        self.device = torch.device(gs.device)
        report(BUILDING_SCENE)
        self.task = spec.task_class(spec.config, spec.num_envs, self.device)
        self.task.build()
        obs_space, act_space = spec.task_class.spaces(spec.config)
        buffer_device = torch.device("cpu") if spec.host_buffers else self.device
        self.buffers = ShardBuffers.allocate(spec.num_envs, obs_space.shape, act_space.shape, buffer_device)
        if spec.share_buffers:
            for tensor in self.buffers.tensors().values():
                make_shareable(tensor)
        self.random = EnvRandom(spec.num_envs, spec.env_offset, self.device)
        self.random.seed_range(spec.base_seed)
        self._episode_steps = torch.zeros(spec.num_envs, dtype=torch.int64, device=self.device)
        self._needs_reset = torch.zeros(spec.num_envs, dtype=torch.bool, device=self.device)
        self._all_ids = torch.arange(spec.num_envs, device=self.device)

    def handshake(self) -> ShardHandshake:
        gpu_uuid = None
        if self.device.type == "cuda":
            from gs_gym.transport.devices import cuda_uuid

            gpu_uuid = cuda_uuid(self.device.index or 0)
        exported = {name: export_tensor(t, gpu_uuid) for name, t in self.buffers.tensors().items()}
        return ShardHandshake(exported, str(self.device), gpu_uuid, os.getpid())

    # -- commands --------------------------------------------------------------------------------------------

    def reset(self, seeds: int | list[int | None] | None, mask: np.ndarray | None) -> None:
        """Reset the envs selected by ``mask`` (all when None) and write every env's observation.

        ``seeds``: an int re-seeds env ``g`` (global index) with ``seeds + g``; a list gives one seed (or None,
        keep the stream) per local env; None keeps every stream.
        """
        ids = self._all_ids if mask is None else torch.as_tensor(np.flatnonzero(mask), device=self.device)
        if isinstance(seeds, int):
            if mask is None:
                self.random.seed_range(seeds)
            else:
                self.random.seed(ids, [seeds + self.spec.env_offset + int(i) for i in ids.tolist()])
        elif seeds is not None:
            chosen = [(i, seeds[i]) for i in ids.tolist() if seeds[i] is not None]
            if chosen:
                self.random.seed(torch.tensor([i for i, _ in chosen], device=self.device), [s for _, s in chosen])
        self._reset_envs(ids)
        buffers = self.buffers
        buffers.observations.copy_(self.task.observe())
        buffers.rewards.zero_()
        buffers.terminated.zero_()
        buffers.truncated.zero_()
        self._synchronize()

    def step(self) -> None:
        """Apply ``buffers.actions``, advance one control step and write the results under the autoreset mode."""
        task, buffers, mode = self.task, self.buffers, self.spec.autoreset_mode
        task.apply_actions(buffers.actions.to(self.device))
        task.simulate()
        self._episode_steps += 1
        pending = self._needs_reset.clone() if mode == AutoresetMode.NEXT_STEP else None
        if pending is not None:
            self._reset_where(pending)
        observations = task.observe()
        if self.spec.check_observations and not bool(torch.isfinite(observations).all()):
            raise NonFiniteObservationError(self._non_finite_message(observations))
        rewards = task.compute_rewards()
        terminated = task.compute_terminated()
        truncated = task.compute_truncated() | (self._episode_steps >= task.config.max_episode_steps)
        if pending is not None:
            rewards = rewards.masked_fill(pending, 0.0)
            terminated = terminated & ~pending
            truncated = truncated & ~pending
            self._needs_reset = terminated | truncated
        elif mode == AutoresetMode.SAME_STEP:
            buffers.final_observations.copy_(observations)
            if self._reset_where(terminated | truncated):
                observations = task.observe()
        buffers.observations.copy_(observations)
        buffers.rewards.copy_(rewards)
        buffers.terminated.copy_(terminated)
        buffers.truncated.copy_(truncated)
        self._synchronize()

    def call(self, name: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        """Call the task's method ``name``, or return its attribute when it is not callable."""
        attribute = getattr(self.task, name)
        return attribute(*args, **kwargs) if callable(attribute) else attribute

    def get_attr(self, name: str) -> Any:
        return getattr(self.task, name)

    def set_attr(self, name: str, value: Any) -> None:
        if not hasattr(self.task, name):
            raise AttributeError(f"task {self.task.name!r} has no attribute {name!r} to set")
        setattr(self.task, name, value)

    def render(self) -> Any:
        return self.task.render()

    def close(self) -> None:
        self.task.close()

    # -- helpers ---------------------------------------------------------------------------------------------

    def _reset_where(self, mask: torch.Tensor) -> bool:
        ids = mask.nonzero().squeeze(1)
        if ids.numel() == 0:
            return False
        self._reset_envs(ids)
        return True

    def _reset_envs(self, ids: torch.Tensor) -> None:
        self.task.reset_envs(ids, self.random)
        self._episode_steps[ids] = 0
        self._needs_reset[ids] = False

    def _non_finite_message(self, observations: torch.Tensor) -> str:
        bad = (~torch.isfinite(observations)).reshape(observations.shape[0], -1).any(dim=1)
        local = bad.nonzero().flatten().tolist()
        shown = [self.spec.env_offset + i for i in local[:10]]
        more = f" and {len(local) - 10} more" if len(local) > 10 else ""
        return f"non-finite observations in envs {shown}{more} (global indices; local {local[:10]})"

    def _synchronize(self) -> None:
        """Results must be complete in memory before the parent is told they are ready."""
        if self.device.type == "cuda":
            torch.cuda.current_stream(self.device).synchronize()
