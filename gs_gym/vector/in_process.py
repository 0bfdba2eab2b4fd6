"""The in-process reference: one ``EnvShard`` in this process behind the same ``ShardPool`` seam as the workers."""

from __future__ import annotations

import functools
import time
from collections.abc import Mapping, Sequence
from typing import Any

from gs_gym.errors import BuildError, WorkerCrashedError, WorkerError
from gs_gym.transport.buffers import OpenedShard
from gs_gym.transport.interface import Collected
from gs_gym.transport.progress import READY, BuildProgress, ProgressFactory, ticking
from gs_gym.transport.protocol import Command
from gs_gym.transport.worker import command_handlers
from gs_gym.vector.shard import EnvShard, ShardSpec


class InProcessPool:
    """Runs one ``EnvShard`` in this process; a command executes on ``send`` and ``collect`` returns its result (or
    raises its exception as a ``WorkerError``, as a worker's would be)."""

    can_restart = False

    def __init__(self, spec: ShardSpec, progress: ProgressFactory = BuildProgress) -> None:
        """Build the shard, showing its stages on a display from ``progress`` (one row, as a worker's, with the same
        heartbeats while Genesis compiles)."""
        with progress([f"in-process ({spec.backend})"]) as display, ticking(display):
            try:
                self.shard = EnvShard(spec, functools.partial(display.update, 0))
            except Exception as error:
                message = f"{type(error).__name__}: {error} (during build)"
                raise BuildError(message, worker=0, device="in-process") from error
            display.update(0, READY)
        self.shards = [OpenedShard(self.shard.buffers, None, self.shard.flags_landed)]
        self.devices = [str(self.shard.device)]
        self.gpu_uuids: list[str | None] = [None]
        self.busy_seconds = [0.0]
        """Seconds spent executing commands, as ``WorkerPool.busy_seconds`` reports them."""
        self._handlers = command_handlers(self.shard)
        self._result: tuple[bool, Any] = (True, None)

    def __len__(self) -> int:
        return 1

    @property
    def local_shard(self) -> EnvShard:
        return self.shard

    @property
    def pids(self) -> list[int | None]:
        return []  # no worker process

    def send(
        self, command: Command, args_by_shard: Mapping[int, tuple[Any, ...]], *, tolerate_crashes: bool = False
    ) -> Mapping[int, WorkerCrashedError]:
        handler = self._handlers[command]
        for args in args_by_shard.values():
            start = time.perf_counter()
            try:
                self._result = (True, handler(*args))
            except Exception as error:
                self._result = (False, error)
            self.busy_seconds[0] += time.perf_counter() - start
        return {}

    def collect(
        self,
        shards: Sequence[int],
        timeout: float | None,
        during: str,
        *,
        tolerate_crashes: bool = False,
        skip: Sequence[int] = (),
    ) -> Collected:
        (ok, value), self._result = self._result, (True, None)
        if not ok:
            message = f"{type(value).__name__}: {value} (during {during})"
            device = str(self.shard.device)
            raise WorkerError(message, worker=0, device=device, remote_type=type(value).__name__) from value
        return Collected([value for _ in shards])

    def restart(self, shard: int) -> None:
        raise NotImplementedError("the in-process shard cannot be restarted (can_restart is False)")

    def close(self, timeout: float = 5.0) -> None:
        self.shard.close()
