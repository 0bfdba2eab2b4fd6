"""How ``num_envs`` are split over workers: contiguous ranges, as even as possible."""

from __future__ import annotations

import dataclasses


@dataclasses.dataclass(frozen=True)
class EnvRange:
    """Envs ``[offset, offset + count)`` of the vector env."""

    offset: int
    count: int

    @property
    def stop(self) -> int:
        return self.offset + self.count


def split_envs(num_envs: int, num_shards: int) -> list[EnvRange]:
    """Split ``num_envs`` into ``num_shards`` contiguous ranges; the first ``num_envs % num_shards`` get one more."""
    if num_shards < 1:
        raise ValueError(f"num_shards: expected at least 1, got {num_shards}")
    if num_envs < num_shards:
        raise ValueError(f"num_envs: expected at least one env per worker ({num_shards} workers), got {num_envs}")
    base, extra = divmod(num_envs, num_shards)
    ranges, offset = [], 0
    for shard in range(num_shards):
        count = base + (1 if shard < extra else 0)
        ranges.append(EnvRange(offset, count))
        offset += count
    return ranges
