"""The seam between the Gymnasium layer and whatever runs the shards: ``ShardPool``.

Two implementations: ``gs_gym.transport.pool.WorkerPool`` (one process per shard) and
``gs_gym.vector.in_process.InProcessPool`` (the reference: one shard in this process). The Gymnasium layer talks to
this protocol only. A command goes out with ``send`` and its replies come back with ``collect``; failures are raised
as ``WorkerError`` subclasses, or, where the caller tolerates crashes (to restart those workers), reported in the
``Collected`` result.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any, Protocol

from gs_gym.errors import WorkerCrashedError
from gs_gym.transport.buffers import OpenedShard
from gs_gym.transport.protocol import Command
from gs_gym.transport.worker import ServedShard


@dataclasses.dataclass(frozen=True)
class Collected:
    """The replies of one ``collect``, in the order asked; a crashed shard's value is None and its error is in
    ``crashed`` (only when the caller tolerated crashes)."""

    values: list[Any]
    crashed: Mapping[int, WorkerCrashedError] = dataclasses.field(default_factory=dict)


class ShardPool(Protocol):
    """Shards that execute commands on request; each exposes its buffers (and their device) in this process."""

    shards: list[OpenedShard]
    """Per shard: its buffers as this process reads and writes them (replaced when a shard restarts)."""
    devices: list[str]
    """Per shard: the device its simulation runs on, as the shard reports it (``"cuda:0"`` in a worker's view)."""
    gpu_uuids: list[str | None]
    busy_seconds: list[float]
    """Per shard: seconds spent executing commands since it (re)started."""
    can_restart: bool
    """Whether ``restart`` can replace a crashed shard (worker processes can; the in-process shard cannot)."""

    @property
    def local_shard(self) -> ServedShard | None:
        """The shard object itself when it runs in this process (for inspection); None for worker processes."""
        ...

    @property
    def pids(self) -> list[int | None]:
        """Per worker process: its process id (None before it starts); empty when shards run in this process."""
        ...

    def __len__(self) -> int: ...

    def send(
        self, command: Command, args_by_shard: Mapping[int, tuple[Any, ...]], *, tolerate_crashes: bool = False
    ) -> Mapping[int, WorkerCrashedError]:
        """Send ``command`` to each shard in ``args_by_shard``, with its own arguments. Returns the shards found dead
        (only when ``tolerate_crashes``; otherwise their ``WorkerCrashedError`` is raised)."""
        ...

    def collect(
        self,
        shards: Sequence[int],
        timeout: float | None,
        during: str,
        *,
        tolerate_crashes: bool = False,
        skip: Sequence[int] = (),
    ) -> Collected:
        """Wait for the replies of ``shards`` (``skip``: known dead, not waited for). Raises the failure of the
        lowest shard index once all replies are in; crashes and timeouts raise at once, unless
        ``tolerate_crashes`` (crashes are then reported in the result)."""
        ...

    def restart(self, shard: int) -> None:
        """Replace a crashed shard by a new one built from the same spec (``can_restart`` pools only)."""
        ...

    def close(self, timeout: float = 5.0) -> None:
        """Stop every shard and release what the pool holds. Idempotent; never raises."""
        ...
