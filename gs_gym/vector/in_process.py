"""The in-process reference: the same shard and command interface as ``WorkerPool``, with no subprocess."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

from gs_gym.errors import BuildError, WorkerError
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

    def __init__(self, spec: ShardSpec) -> None:
        try:
            self.shard = EnvShard(spec)
        except Exception as error:
            raise BuildError(f"{type(error).__name__}: {error} (during build)", worker=0, device="in-process") from error
        self.handshakes = [LocalHandshake(self.shard.buffers, str(self.shard.device))]
        self._results: list[tuple[bool, Any]] = []

    def __len__(self) -> int:
        return 1

    def request(self, command: Command, args_by_worker: dict[int, tuple[Any, ...]]) -> None:
        handler = command_handlers(self.shard)[command]
        self._results = []
        for args in args_by_worker.values():
            try:
                self._results.append((True, handler(*args)))
            except Exception as error:
                self._results.append((False, error))

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
