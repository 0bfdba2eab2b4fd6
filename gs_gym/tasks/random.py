"""Per-env random numbers that do not depend on how envs are split over workers.

Every env owns a 32-bit key (derived from its seed) and a counter of draws. A draw for a set of envs hashes
(key, counter, element index) with a stateless integer mixer, so env ``i`` sees the same numbers whether it lives
in-process, on worker 0 of 1 or on worker 1 of 2, and whatever other envs are reset beside it. The arithmetic stays
below 2**63 so that it is exact in int64 on every torch device.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch

_MASK32 = 0xFFFFFFFF
_MIX_MUL_1 = 0x7FEB352D
_MIX_MUL_2 = 0x846CA68B
_GOLDEN = 0x9E3779B9


def _mul_mod32(x: torch.Tensor, c: int) -> torch.Tensor:
    """(x * c) mod 2**32 for 32-bit ``x`` and constant ``c`` without int64 overflow."""
    lo = x & 0xFFFF
    hi = x >> 16
    return (lo * c + (((hi * (c & 0xFFFF)) & 0xFFFF) << 16)) & _MASK32


def mix32(x: torch.Tensor) -> torch.Tensor:
    """A bijective 32-bit integer hash (the 'lowbias32' mixer) on int64 tensors holding 32-bit values."""
    x = x & _MASK32
    x = x ^ (x >> 16)
    x = _mul_mod32(x, _MIX_MUL_1)
    x = x ^ (x >> 15)
    x = _mul_mod32(x, _MIX_MUL_2)
    return x ^ (x >> 16)


def seed_to_key(seeds: torch.Tensor) -> torch.Tensor:
    """Fold arbitrary non-negative int64 seeds into 32-bit keys."""
    return mix32(mix32(seeds & _MASK32) ^ ((seeds >> 32) & _MASK32) ^ _GOLDEN)


class EnvRandom:
    """Counter-based random streams, one per env of a shard.

    ``global_offset`` is the global index of the shard's first env; it only matters for :meth:`seed_range`,
    which gives env ``g`` (global index) the seed ``base_seed + g``.
    """

    def __init__(self, num_envs: int, global_offset: int, device: torch.device | str) -> None:
        self.num_envs = num_envs
        self.global_offset = global_offset
        self.device = torch.device(device)
        self._keys = torch.zeros(num_envs, dtype=torch.int64, device=self.device)
        self._counters = torch.zeros(num_envs, dtype=torch.int64, device=self.device)

    def seed_range(self, base_seed: int) -> None:
        """Seed every env with ``base_seed + global index``."""
        first = self.global_offset
        seeds = torch.arange(first, first + self.num_envs, dtype=torch.int64, device=self.device) + base_seed
        self._keys = seed_to_key(seeds)
        self._counters.zero_()

    def seed(self, env_ids: torch.Tensor, seeds: Sequence[int]) -> None:
        """Re-seed the given local envs with explicit seeds and restart their streams."""
        values = torch.as_tensor(list(seeds), dtype=torch.int64, device=self.device)
        self._keys[env_ids] = seed_to_key(values)
        self._counters[env_ids] = 0

    def _bits(self, env_ids: torch.Tensor, count: int) -> torch.Tensor:
        keys = self._keys[env_ids].unsqueeze(1)
        counters = self._counters[env_ids].unsqueeze(1)
        self._counters[env_ids] += 1
        element = torch.arange(count, dtype=torch.int64, device=self.device).unsqueeze(0)
        h = mix32(keys ^ mix32(counters & _MASK32) ^ mix32((counters >> 32) + _GOLDEN))
        return mix32(h ^ mix32(element * _GOLDEN))

    def uniform(
        self, env_ids: torch.Tensor, shape: Sequence[int], low: float | torch.Tensor = 0.0, high: float | torch.Tensor = 1.0
    ) -> torch.Tensor:
        """Uniform float32 samples of shape ``(len(env_ids), *shape)`` in ``[low, high)``; one draw per env."""
        bits = self._bits(env_ids, math.prod(shape))
        unit = (bits >> 8).to(torch.float32) * (1.0 / (1 << 24))
        unit = unit.reshape(len(env_ids), *shape)
        return low + (high - low) * unit

    def normal(self, env_ids: torch.Tensor, shape: Sequence[int], std: float = 1.0) -> torch.Tensor:
        """Gaussian float32 samples (Box-Muller) of shape ``(len(env_ids), *shape)``; one draw per env."""
        count = math.prod(shape)
        pairs = self.uniform(env_ids, (2, count))
        u1 = pairs[:, 0].clamp_min(1e-7)
        radius = torch.sqrt(-2.0 * torch.log(u1))
        values = radius * torch.cos(2.0 * torch.pi * pairs[:, 1])
        return std * values.reshape(len(env_ids), *shape)
