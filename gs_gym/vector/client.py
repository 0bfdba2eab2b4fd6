"""Commands to the shards on behalf of ``GenesisVectorEnv``, with the env's lifecycle kept right when they fail.

A failure that may leave the shards out of step with each other puts the env in FAILED for good: a worker crash or
timeout, an error raised by a step or reset, an interrupt (Ctrl-C) between two workers' requests or while replies
are on their way (the next command would misread them). An error raised by ``call``, ``get_attr`` or ``set_attr``
only propagates: the shards are still in step.
"""

from __future__ import annotations

import contextlib
import warnings
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from gs_gym.errors import GsGymError, WorkerCrashedError, WorkerTimeoutError
from gs_gym.transport.buffers import OpenedShard
from gs_gym.transport.interface import Collected, ShardPool
from gs_gym.transport.protocol import Command
from gs_gym.vector.lifecycle import WORKER_FAILED, Lifecycle, State


class ShardClient:
    """The env's side of a ``ShardPool``: typed commands in, replies or named errors out."""

    def __init__(self, pool: ShardPool, life: Lifecycle, *, step_timeout: float | None, base_seed: int) -> None:
        self._pool: ShardPool | None = pool
        self._life = life
        self._step_timeout = step_timeout
        self._base_seed = base_seed
        self._restarts = 0
        self.all = list(range(len(pool)))
        """Every shard index."""

    @property
    def pool(self) -> ShardPool:
        """The pool; on a closed env, the ``ClosedEnvironmentError`` that says so."""
        if self._pool is None:
            self._life.require(State.READY, action="use")
        assert self._pool is not None
        return self._pool

    @property
    def open_pool(self) -> ShardPool | None:
        """The pool, or None once closed."""
        return self._pool

    @property
    def shards(self) -> list[OpenedShard]:
        return self.pool.shards

    def indices(self, workers: Sequence[int] | None) -> list[int]:
        """``workers`` checked against the shards (all when None)."""
        if workers is None:
            return self.all
        if not isinstance(workers, (Sequence, np.ndarray)) or isinstance(workers, str):
            raise TypeError(f"workers: expected a sequence of worker indices or None, got {type(workers).__name__}")
        indices = list(workers)
        if not indices or any(i not in self.all for i in indices) or len(set(indices)) != len(indices):
            raise ValueError(f"workers: expected distinct indices in [0, {len(self.all)}), got {indices}")
        return indices

    def send(
        self, command: Command, requests: Mapping[int, tuple[Any, ...]], *, tolerate_crashes: bool = False
    ) -> Mapping[int, WorkerCrashedError]:
        try:
            return self.pool.send(command, requests, tolerate_crashes=tolerate_crashes)
        except GsGymError:
            self._life.fail(WORKER_FAILED)
            raise
        except BaseException:
            self._life.fail(f"interrupted while sending {command.name.lower()} to the workers")
            raise

    def collect(
        self,
        shards: Sequence[int],
        during: str,
        *,
        timeout: float | None = None,
        fails_env: bool = True,
        tolerate_crashes: bool = False,
        skip: Sequence[int] = (),
    ) -> Collected:
        """Wait for ``shards``' replies (``timeout`` default: the env's ``step_timeout``, where None waits for ever).
        ``fails_env``: whether an exception raised by the command itself leaves the env FAILED (crashes and timeouts
        always do)."""
        wait = self._step_timeout if timeout is None else timeout
        try:
            return self.pool.collect(shards, wait, during, tolerate_crashes=tolerate_crashes, skip=skip)
        except (WorkerCrashedError, WorkerTimeoutError):
            self._life.fail(WORKER_FAILED)
            raise
        except GsGymError:
            if fails_env:
                self._life.fail(WORKER_FAILED)
            raise
        except BaseException:
            self._life.fail(f"interrupted while waiting for the workers ({during})")
            raise

    def run(self, command: Command, requests: Mapping[int, tuple[Any, ...]], during: str) -> list[Any]:
        """Send ``command`` and wait for its replies (not while a step is pending)."""
        self._life.require(State.NEEDS_RESET, State.READY, action=during)
        self.send(command, requests)
        return self.collect(list(requests), during, fails_env=command == Command.RESET).values

    def check_step(self, shards: Sequence[int]) -> list[int]:
        """Ask ``shards`` what made their last step's ``ALL_FINITE`` flag False: the global indices of envs whose
        actions held NaN or inf; a non-finite observation or reward raises (as a step error: the env fails)."""
        self.send(Command.CHECK_STEP, dict.fromkeys(shards, ()))
        return [env for envs in self.collect(shards, "step").values for env in envs]

    def restart(self, crashed: Mapping[int, WorkerCrashedError]) -> list[int]:
        """Replace each crashed shard, reset its envs with a fresh seed and mark them truncated; the indices."""
        pool = self.pool
        for index in sorted(crashed):
            warnings.warn(f"{str(crashed[index]).splitlines()[0]}; restarting it", RuntimeWarning, stacklevel=4)
            self._restarts += 1
            seed = np.random.SeedSequence([self._base_seed, index, self._restarts]).generate_state(1, np.uint64)[0]
            try:
                pool.restart(index)
                self.send(Command.RESET, {index: (int(seed >> np.uint64(2)), None)})
                self.collect([index], "reset after restart")
            except BaseException:
                self._life.fail(WORKER_FAILED)
                raise
            buffers = pool.shards[index].buffers
            buffers.truncated.fill_(True)  # the reset wrote the observations and zeroed rewards and terminated
            buffers.final_observations.copy_(buffers.observations)
        return sorted(crashed)

    def close(self, timeout: float = 5.0) -> None:
        """Stop the shards (ask, wait ``timeout`` s, terminate, kill). Idempotent; never raises."""
        pool, self._pool = self._pool, None
        if pool is not None:
            with contextlib.suppress(Exception):  # close must not raise; the pool already escalated to kill
                pool.close(timeout)
