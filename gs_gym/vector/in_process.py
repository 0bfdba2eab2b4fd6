"""The in-process reference: the same shard and command interface as ``WorkerPool``, with no subprocess."""

from __future__ import annotations

import dataclasses
import functools
import time
from collections.abc import Sequence
from typing import Any

from gs_gym.errors import BuildError, WorkerError
from gs_gym.transport.progress import READY, BuildProgress, ProgressFactory
from gs_gym.transport.protocol import Command
from gs_gym.transport.worker import command_handlers
from gs_gym.vector.shard import EnvShard, ShardBuffers, ShardSpec


@dataclasses.dataclass(frozen=True)
class LocalHandshake:
    buffers: ShardBuffers
    device: str
    gpu_uuid: str | None = None

    def open_buffers(self) -> ShardBuffers:
        return self.buffers


class InProcessPool:
    """Runs one ``EnvShard`` in this process; commands execute on ``request`` and ``collect`` returns the result."""

    def __init__(self, spec: ShardSpec, progress: ProgressFactory = BuildProgress) -> None:
        """Build the shard, showing its stages on a display from ``progress`` (one row, as a worker's)."""
        with progress([f"in-process ({spec.backend})"]) as display:
            try:
                self.shard = EnvShard(spec, functools.partial(display.update, 0))
            except Exception as error:
                message = f"{type(error).__name__}: {error} (during build)"
                raise BuildError(message, worker=0, device="in-process") from error
            display.update(0, READY)
        self.handshakes = [LocalHandshake(self.shard.buffers, str(self.shard.device))]
        self._results: list[tuple[bool, Any]] = []
        self.busy_seconds = [0.0]
        """Seconds spent executing commands, as ``WorkerPool.busy_seconds`` reports them."""

    def __len__(self) -> int:
        return 1

    def request(self, command: Command, args_by_worker: dict[int, tuple[Any, ...]]) -> None:
        handler = command_handlers(self.shard)[command]
        self._results = []
        for args in args_by_worker.values():
            start = time.perf_counter()
            try:
                self._results.append((True, handler(*args)))
            except Exception as error:
                self._results.append((False, error))
            self.busy_seconds[0] += time.perf_counter() - start

    def collect(self, indices: Sequence[int], timeout: float | None, during: str) -> list[Any]:
        results, self._results = self._results, []
        values = []
        for ok, value in results:
            if not ok:
                message = f"{type(value).__name__}: {value} (during {during})"
                device = str(self.shard.device)
                raise WorkerError(message, worker=0, device=device, remote_type=type(value).__name__) from value
            values.append(value)
        return values

    def close(self, timeout: float = 5.0) -> None:
        self.shard.close()
