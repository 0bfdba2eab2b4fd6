"""Data-parallel training over ranks (``torchrun``): one ``GenesisVectorEnv`` per rank.

* ``rank_info()`` reads torchrun's ``RANK``, ``LOCAL_RANK``, ``WORLD_SIZE`` and ``LOCAL_WORLD_SIZE`` (one process
  when they are absent);
* ``local_gpus()`` gives a rank its GPUs on its node: GPU ``LOCAL_RANK`` by default, or ``gpus_per_rank`` of them,
  stepped by the vector env's own workers;
* ``vector_env_kwargs()`` returns the ``GenesisVectorEnv`` arguments of a rank, seeded so that every env has a
  seed of its own across all ranks (rank ``r``'s env ``i`` gets ``seed + r * num_envs_per_rank + i``);
* ``all_reduce_episode_stats()``, ``all_reduce_moments()`` and ``all_reduce_sum()`` combine per-rank statistics
  (gloo or NCCL; without an initialized process group they return this process's own).

See ``docs/distributed.md`` and ``examples/ddp_ppo.py``.
"""

from __future__ import annotations

import dataclasses
import math
import os
from collections.abc import Mapping
from typing import Any

import torch
import torch.distributed as dist

from gs_gym.transport.devices import visible_gpu_count

__all__ = [
    "EpisodeStats",
    "RankInfo",
    "all_reduce_episode_stats",
    "all_reduce_moments",
    "all_reduce_sum",
    "default_dist_backend",
    "local_gpus",
    "rank_info",
    "vector_env_kwargs",
]


@dataclasses.dataclass(frozen=True)
class RankInfo:
    """Where this process stands among the ranks; the defaults describe a single process."""

    rank: int = 0
    local_rank: int = 0
    world_size: int = 1
    local_world_size: int = 1

    def __post_init__(self) -> None:
        for name, value in (
            ("RANK", self.rank),
            ("LOCAL_RANK", self.local_rank),
            ("WORLD_SIZE", self.world_size),
            ("LOCAL_WORLD_SIZE", self.local_world_size),
        ):
            if isinstance(value, bool) or not isinstance(value, int):
                raise TypeError(f"{name}: expected an int, got {value!r}")
        world, local_world = self.world_size, self.local_world_size
        if world < 1:
            raise ValueError(f"WORLD_SIZE: expected an int >= 1, got {world}")
        if not 0 <= self.rank < world:
            raise ValueError(f"RANK: expected an int in [0, {world}) (WORLD_SIZE={world}), got {self.rank}")
        if not 1 <= local_world <= world:
            raise ValueError(
                f"LOCAL_WORLD_SIZE: expected an int in [1, {world}] (WORLD_SIZE={world}), got {local_world}"
            )
        if not 0 <= self.local_rank < local_world:
            raise ValueError(
                f"LOCAL_RANK: expected an int in [0, {local_world}) (LOCAL_WORLD_SIZE={local_world}), "
                f"got {self.local_rank}"
            )

    @property
    def is_main(self) -> bool:
        """Rank 0: the one that logs and saves."""
        return self.rank == 0

    @property
    def is_distributed(self) -> bool:
        return self.world_size > 1


def _read_pair(environ: Mapping[str, str], index: str, size: str) -> tuple[int, int] | None:
    """``(environ[index], environ[size])`` as ints, None when both are absent; one without the other is an error."""
    present = [name for name in (index, size) if name in environ]
    if not present:
        return None
    if len(present) == 1:
        missing = size if present[0] == index else index
        raise ValueError(f"{present[0]} is set but {missing} is not; launch with torchrun or set both")
    values = []
    for name in (index, size):
        try:
            values.append(int(environ[name]))
        except ValueError:
            raise ValueError(f"{name}: expected an integer, got {environ[name]!r}") from None
    return values[0], values[1]


def rank_info(environ: Mapping[str, str] | None = None) -> RankInfo:
    """This process's ``RankInfo`` from torchrun's variables (``os.environ`` unless ``environ`` is given).

    Without ``RANK``/``WORLD_SIZE`` this is the single process (rank 0 of 1); without ``LOCAL_RANK``/
    ``LOCAL_WORLD_SIZE`` all ranks are taken to be on this node (local rank = rank).
    """
    environ = os.environ if environ is None else environ
    rank, world = _read_pair(environ, "RANK", "WORLD_SIZE") or (0, 1)
    local_rank, local_world = _read_pair(environ, "LOCAL_RANK", "LOCAL_WORLD_SIZE") or (rank, world)
    return RankInfo(rank=rank, local_rank=local_rank, world_size=world, local_world_size=local_world)


def local_gpus(info: RankInfo, gpus_per_rank: int = 1, device_count: int | None = None) -> list[int]:
    """CUDA indices (as torchrun's processes see them: all of the node's GPUs) of this rank's GPUs.

    ``[local_rank * gpus_per_rank, ..., local_rank * gpus_per_rank + gpus_per_rank - 1]``; the node must have
    ``local_world_size * gpus_per_rank`` GPUs. ``device_count`` defaults to ``torch.cuda.device_count()``.
    """
    if isinstance(gpus_per_rank, bool) or not isinstance(gpus_per_rank, int) or gpus_per_rank < 1:
        raise ValueError(f"gpus_per_rank: expected a positive int, got {gpus_per_rank!r}")
    count = visible_gpu_count() if device_count is None else device_count
    needed = info.local_world_size * gpus_per_rank
    if needed > count:
        raise ValueError(
            f"gpus_per_rank={gpus_per_rank} with LOCAL_WORLD_SIZE={info.local_world_size} needs {needed} GPUs "
            f"on this node, torch sees {count}"
        )
    first = info.local_rank * gpus_per_rank
    return list(range(first, first + gpus_per_rank))


def default_dist_backend(device: str | torch.device | None = None) -> str:
    """The process-group backend for a rank whose tensors live on ``device``: ``"nccl"`` for a CUDA device,
    ``"gloo"`` for the CPU; without ``device``, ``"nccl"`` when CUDA is available, else ``"gloo"``."""
    if device is None:
        return "nccl" if torch.cuda.is_available() else "gloo"
    return "nccl" if torch.device(device).type == "cuda" else "gloo"


def vector_env_kwargs(
    info: RankInfo,
    num_envs_per_rank: int,
    seed: int,
    *,
    backend: str | None = None,
    gpus_per_rank: int = 1,
    device_count: int | None = None,
) -> dict[str, Any]:
    """``num_envs``, ``backend``, ``seed``, ``main_device`` (and ``devices`` on GPUs) of this rank's env.

    Use as ``GenesisVectorEnv(task=..., **kwargs)`` or ``gym.make_vec(ENV_ID, task=..., **kwargs)``. The seed is
    ``seed + rank * num_envs_per_rank``, so env ``i`` of rank ``r`` starts with ``seed + r * num_envs_per_rank + i``:
    the envs of all ranks together are seeded like one env of ``world_size * num_envs_per_rank`` envs. On GPUs the
    env gets ``local_gpus(info, gpus_per_rank)`` and gathers on the first of them; keep the env's default
    ``num_workers`` (one per GPU): ``num_workers=0`` would run Genesis on its default GPU, not on these.
    """
    if isinstance(num_envs_per_rank, bool) or not isinstance(num_envs_per_rank, int) or num_envs_per_rank < 1:
        raise ValueError(f"num_envs_per_rank: expected a positive int, got {num_envs_per_rank!r}")
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        raise ValueError(f"seed: expected a non-negative int (the ranks' env seeds derive from it), got {seed!r}")
    count = visible_gpu_count() if device_count is None else device_count
    backend = backend or ("gpu" if count else "cpu")
    if backend not in ("gpu", "cpu"):
        raise ValueError(f"backend: expected 'gpu' or 'cpu', got {backend!r}")
    kwargs: dict[str, Any] = {
        "num_envs": num_envs_per_rank,
        "backend": backend,
        "seed": seed + info.rank * num_envs_per_rank,
    }
    if backend == "cpu":
        if gpus_per_rank != 1:
            raise ValueError(f"gpus_per_rank: only meaningful with backend='gpu', got {gpus_per_rank!r}")
        kwargs["main_device"] = "cpu"
    else:
        gpus = local_gpus(info, gpus_per_rank, count)
        kwargs["devices"] = gpus
        kwargs["main_device"] = f"cuda:{gpus[0]}"
    return kwargs


# -- collectives -------------------------------------------------------------------------------------------------------


def all_reduce_sum(tensor: torch.Tensor) -> torch.Tensor:
    """Sum of ``tensor`` over ranks (itself when no process group is initialized), on ``tensor``'s device.

    The tensor travels to the device the backend reduces on: the current CUDA device for NCCL, the CPU for gloo.
    """
    if not (dist.is_available() and dist.is_initialized()):
        return tensor
    backend = dist.get_backend()
    if backend == "nccl":
        device = tensor.device if tensor.is_cuda else torch.device("cuda", torch.cuda.current_device())
    elif backend == "gloo":
        device = torch.device("cpu")
    else:  # a per-device mapping such as "cpu:gloo,cuda:nccl" takes tensors where they are
        device = tensor.device
    work = tensor.to(device, copy=True)
    dist.all_reduce(work, op=dist.ReduceOp.SUM)
    return work.to(tensor.device)


@dataclasses.dataclass(frozen=True)
class EpisodeStats:
    """Episodes finished over all ranks: their count, return sum and mean return (nan when there are none)."""

    episodes: int
    return_sum: float
    mean_return: float


def all_reduce_episode_stats(return_sum: float | torch.Tensor, episodes: int | torch.Tensor) -> EpisodeStats:
    """Combine each rank's (sum of episode returns, number of episodes) into the global mean return.

    Every rank must call it (it is a collective); a rank with no finished episode passes ``(0.0, 0)``.
    """
    local = torch.stack(
        [
            torch.as_tensor(return_sum, dtype=torch.float64).reshape(()).cpu(),
            torch.as_tensor(episodes, dtype=torch.float64).reshape(()).cpu(),
        ]
    )
    if not bool(torch.isfinite(local).all()) or float(local[1]) < 0 or float(local[1]) != int(local[1]):
        raise ValueError(
            f"expected a finite return sum and a non-negative int episode count, got "
            f"({float(local[0])}, {float(local[1])})"
        )
    total_return, total_episodes = all_reduce_sum(local).tolist()
    count = int(total_episodes)
    return EpisodeStats(count, total_return, total_return / count if count else math.nan)


def all_reduce_moments(
    batch: torch.Tensor, shift: torch.Tensor | None = None
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """``(count, mean, var)`` over dim 0 of every rank's ``batch`` together: float64 tensors on ``batch``'s device
    (``count`` 0-d, ``var`` biased; nan when no rank has a row). No host sync, so it can run every env step.

    One all-reduce of ``[n, sum(x - shift), sum((x - shift)^2)]``; pass a ``shift`` that is the same on all ranks
    and near the data (e.g. the running mean being updated) to keep the one-pass variance accurate. Every rank must
    call it with the same trailing shape.
    """
    data = batch.to(torch.float64)
    if shift is not None:
        data = data - shift.to(data.device, torch.float64)
    n = torch.full((1,), float(data.shape[0]), dtype=torch.float64, device=data.device)
    packed = all_reduce_sum(torch.cat([n, data.sum(dim=0).reshape(-1), data.square().sum(dim=0).reshape(-1)]))
    count = packed[0]
    size = (packed.numel() - 1) // 2
    mean = packed[1 : 1 + size].reshape(batch.shape[1:]) / count
    var = (packed[1 + size :].reshape(batch.shape[1:]) / count - mean.square()).clamp_min(0.0)
    if shift is not None:
        mean = mean + shift.to(mean.device, torch.float64)
    return count, mean, var
