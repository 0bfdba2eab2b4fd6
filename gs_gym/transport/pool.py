"""Start worker processes, talk to them over pipes, notice at once when one dies, and shut them down in order."""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import gc
import multiprocessing as mp
import os
import signal
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from multiprocessing.connection import wait
from typing import Any

import cloudpickle
import torch

from gs_gym.errors import (
    BuildError,
    PoolClosedError,
    ProtocolError,
    RemoteTraceback,
    WorkerCrashedError,
    WorkerError,
    WorkerTimeoutError,
)
from gs_gym.transport.buffers import Handshake, OpenedShard
from gs_gym.transport.interface import Collected
from gs_gym.transport.launch import start_process
from gs_gym.transport.output import OutputPump
from gs_gym.transport.progress import BuildProgress, ProgressFactory
from gs_gym.transport.protocol import Command, Err, ErrorKind, Ok, Request, Status, send_message
from gs_gym.transport.spinning import spin_until_readable
from gs_gym.transport.worker import ServedShard, WorkerSpec, worker_main

_BUFFER_COMMANDS = (Command.STEP, Command.RESET)
"""Commands that write a shard's buffers: the buffers are released to the worker before them (sync events)."""


def _ignore_status(stage: str) -> None:
    """The status callback of a worker whose build nobody displays."""


@dataclasses.dataclass(frozen=True)
class WorkerLaunch:
    """One worker to start: a label for messages (its device), its environment and what it builds."""

    label: str
    environment: dict[str, str]
    shard_factory: Callable[[Callable[[str], None]], ServedShard]
    """Called in the worker as ``shard_factory(report)``; ``report(stage)`` shows a build stage in the parent."""
    spin_wait: float = 0.0
    """Seconds the worker polls for the next request before blocking (``gs_gym.transport.spinning``)."""


def describe_exit(exitcode: int | None) -> str:
    if exitcode is None:
        return "closed its pipe"
    if exitcode < 0:
        try:
            return f"was killed by signal {signal.Signals(-exitcode).name}"
        except ValueError:
            return f"was killed by signal {-exitcode}"
    return f"exited with code {exitcode}"


class _Worker:
    """One worker process, its pipes and what the parent knows of its state."""

    def __init__(self, index: int, launch: WorkerLaunch, ctx: Any, forward_output: bool) -> None:
        self.index = index
        self.label = launch.label
        self.conn, child_conn = ctx.Pipe()
        output_reader, output_writer = ctx.Pipe(duplex=False)
        spec = WorkerSpec(
            index,
            launch.environment,
            cloudpickle.dumps(launch.shard_factory),
            os.getpid(),
            launch.spin_wait,
            # the kernel's parent-death signal follows the *thread* that started the child: only ask for it when
            # that thread is the main thread, or workers started from a short-lived thread would die with it
            parent_death_signal=threading.current_thread() is threading.main_thread(),
        )
        self.process = start_process(
            ctx,
            target=worker_main,
            args=(child_conn, output_writer, spec),
            name=f"gs_gym-worker-{index}",
            environment=launch.environment,
        )
        child_conn.close()
        output_writer.close()
        self.output = OutputPump(output_reader, index, forward_output)
        self.on_status: Callable[[str], None] = _ignore_status
        """Called with each build stage the worker reports (``Status``)."""
        self.seq = 0
        self.last_command: Command | None = None
        self.alive = True
        """False once the worker is known dead, or unusable (a build error)."""
        self.built = False
        """Its handshake came: it serves requests (until then it could not read a CLOSE)."""
        self.hung = False
        """It let a timeout pass: close() terminates it without asking first."""

    def send(self, command: Command, args: tuple[Any, ...]) -> int:
        self.last_command = command
        self.seq += 1
        send_message(self.conn, Request(command, self.seq, args))
        return self.seq

    def crashed(self, during: str) -> WorkerCrashedError:
        self.alive = False
        self.process.join(1.0)
        exitcode = self.process.exitcode
        tail = "\n".join(self.output.tail())
        detail = f"\nlast output of the worker:\n{tail}" if tail else ""
        return WorkerCrashedError(
            f"worker process {self.process.pid} {describe_exit(exitcode)} during {during}{detail}",
            worker=self.index,
            device=self.label,
            exitcode=exitcode,
        )

    def stop(self, timeout: float) -> None:
        """Join the process for ``timeout`` s, then terminate and kill it if need be; release the pipes."""
        self.process.join(max(0.0, timeout))
        stop_processes([self.process])
        self.release()

    def release(self) -> None:
        """Forget the process (it is stopped) and close its pipes."""
        self.alive = False
        with contextlib.suppress(Exception):
            self.conn.close()
        self.output.close()


def _closed_while_waiting(during: str) -> PoolClosedError:
    return PoolClosedError(f"{during}: the env was closed while waiting for the workers")


def stop_processes(processes: Sequence[Any], grace: float = 1.0) -> None:
    """SIGTERM every live process and wait up to ``grace`` s for all of them together, then SIGKILL those left and
    reap them (another ``grace`` at most): about ``2 * grace`` s whatever the processes do. A killed process that
    the kernel has not finished tearing down by then (a large one on a loaded machine) is reaped by a background
    thread as soon as it exits, so that none is left a zombie."""
    for signal_them in ("terminate", "kill"):
        live = [process for process in processes if process.is_alive()]
        if not live:
            return
        for process in live:
            with contextlib.suppress(Exception):
                getattr(process, signal_them)()
        end = time.monotonic() + grace
        for process in live:
            process.join(max(0.0, end - time.monotonic()))
    dying = [process for process in processes if process.is_alive()]
    if dying:
        threading.Thread(target=_reap, args=(dying,), name="gs_gym-reaper", daemon=True).start()


def _reap(processes: Sequence[Any]) -> None:
    """Join killed processes, however long the kernel takes to end them."""
    for process in processes:
        with contextlib.suppress(Exception):
            process.join()


class WorkerPool:
    """Worker processes, each serving one shard: a ``ShardPool`` (``gs_gym.transport.interface``).

    The workers' handshakes (``Handshake``) are opened once: ``shards`` holds each worker's buffers in this process.
    Before a command that writes the buffers (step, reset) the pool releases them to the worker, and after its reply
    takes them back, with the buffers' sync events (no host wait; see ``gs_gym.transport.buffers``).
    """

    can_restart = True

    def __init__(
        self,
        launches: Sequence[WorkerLaunch],
        *,
        build_timeout: float,
        forward_output: bool = True,
        start_method: str = "spawn",
        progress: ProgressFactory = BuildProgress,
        spin_wait: float = 0.0,
    ) -> None:
        self._ctx = mp.get_context(start_method)
        self._launches = list(launches)
        self._build_timeout = build_timeout
        self._forward_output = forward_output
        self._progress = progress
        """Opens the display of each build wait (the first build, each restart); silent by default."""
        self._spin_wait = spin_wait
        """Seconds to poll the pipes for replies before blocking on them (``gs_gym.transport.spinning``)."""
        self._workers: list[_Worker] = []
        self._closed = False
        self._talking = threading.Lock()
        """Held while a thread sends to or waits on the workers: close() from another thread must not interleave a
        CLOSE with a pending command's reply (it stops the workers instead; the waiting thread gets PoolClosedError)."""
        self.busy_seconds = [0.0] * len(self._launches)
        """Per worker: seconds spent executing commands since it started (the handshake's build excluded)."""
        self.handshakes: list[Handshake] = []
        self.shards: list[OpenedShard] = []
        try:
            self.handshakes = self._start_and_build(list(range(len(self._launches))), "build")
            self.shards = [handshake.open() for handshake in self.handshakes]
        except BaseException:
            self.close()
            raise
        self.devices = [handshake.device for handshake in self.handshakes]
        self.gpu_uuids = [handshake.gpu_uuid for handshake in self.handshakes]

    def __len__(self) -> int:
        return len(self._workers)

    @property
    def pids(self) -> list[int | None]:
        return [worker.process.pid for worker in self._workers]

    @property
    def local_shard(self) -> None:
        return None  # every shard lives in a worker process

    def send(
        self, command: Command, args_by_shard: Mapping[int, tuple[Any, ...]], *, tolerate_crashes: bool = False
    ) -> dict[int, WorkerCrashedError]:
        """Send ``command`` to each worker in ``args_by_shard`` with its own arguments; see ``ShardPool.send``."""
        with self._talking:
            return self._send(command, args_by_shard, tolerate_crashes)

    def _send(
        self, command: Command, args_by_shard: Mapping[int, tuple[Any, ...]], tolerate_crashes: bool
    ) -> dict[int, WorkerCrashedError]:
        if self._closed:
            raise PoolClosedError(f"{command.name.lower()}: the worker pool is closed")
        crashed: dict[int, WorkerCrashedError] = {}
        for index, args in args_by_shard.items():
            worker = self._workers[index]
            if command in _BUFFER_COMMANDS:
                self.shards[index].release()
            try:
                worker.send(command, args)
            except (EOFError, OSError) as error:  # BrokenPipeError, ConnectionResetError, a closed handle
                crash = worker.crashed(command.name.lower())
                if not tolerate_crashes:
                    raise crash from error
                crashed[index] = crash
        return crashed

    def collect(
        self,
        shards: Sequence[int],
        timeout: float | None,
        during: str,
        *,
        tolerate_crashes: bool = False,
        skip: Sequence[int] = (),
    ) -> Collected:
        """Wait for the replies of ``shards`` (in that order); see ``ShardPool.collect``."""
        with self._talking:
            try:
                return self._collect(shards, timeout, during, tolerate_crashes, skip)
            except (OSError, ValueError) as error:  # a pipe that close() in another thread shut under this wait
                if self._closed:
                    raise _closed_while_waiting(during) from error
                raise

    def _collect(
        self, shards: Sequence[int], timeout: float | None, during: str, tolerate_crashes: bool, skip: Sequence[int]
    ) -> Collected:
        crashed: dict[int, WorkerCrashedError | None] | None = None
        if tolerate_crashes:
            crashed = dict.fromkeys(skip)
        values = self._collect_replies(shards, timeout, during, expected_seq=None, crashed=crashed)
        for index in shards:
            if self._workers[index].last_command in _BUFFER_COMMANDS and index not in (crashed or {}):
                self.shards[index].acquire()
        found = {index: error for index, error in (crashed or {}).items() if error is not None}
        return Collected(values, found)

    def restart(self, shard: int) -> None:
        """Replace worker ``shard`` (dead, or killed here) by a new process from the same launch and open its
        buffers. Raises like the first build (``BuildError``, ``WorkerCrashedError``, ``WorkerTimeoutError``)."""
        if self._closed:
            raise PoolClosedError("restart: the worker pool is closed")
        old = self._workers[shard]
        old.stop(0.0)
        self.busy_seconds[shard] = 0.0
        (handshake,) = self._start_and_build([shard], "restart")
        self.handshakes[shard] = handshake
        self.shards[shard] = handshake.open()
        self.devices[shard] = handshake.device
        self.gpu_uuids[shard] = handshake.gpu_uuid

    def _start_and_build(self, indices: list[int], during: str) -> list[Any]:
        """Start workers ``indices`` from their launches and wait for their handshakes (``build_timeout``, the
        first failure raises), showing the stages they report on a display opened for the wait."""
        with self._progress([f"worker {i} ({self._launches[i].label})" for i in indices]) as display:
            for row, index in enumerate(indices):
                worker = _Worker(index, self._launches[index], self._ctx, self._forward_output)
                worker.on_status = functools.partial(display.update, row)
                if index < len(self._workers):
                    self._workers[index] = worker
                else:
                    self._workers.append(worker)
            return self._collect_replies(
                indices, self._build_timeout, during, expected_seq=0, fail_fast=True, display=display
            )

    def _collect_replies(
        self,
        indices: Sequence[int],
        timeout: float | None,
        during: str,
        expected_seq: int | None,
        *,
        fail_fast: bool = False,
        crashed: dict[int, WorkerCrashedError | None] | None = None,
        display: BuildProgress | None = None,
    ) -> list[Any]:
        """Replies of ``indices``; a crash raises at once unless ``crashed`` is given, where it is recorded (workers
        already in it are not waited for and get the value None). ``display`` (a build's) is ticked each time the
        wait wakes, which is at least every ``display.tick_every`` seconds."""
        deadline = None if timeout is None else time.monotonic() + timeout
        skipped = set() if crashed is None else set(crashed)
        pending = {index: self._workers[index] for index in indices if index not in skipped}
        values: dict[int, Any] = dict.fromkeys(skipped)
        errors: dict[int, WorkerError] = {}
        tick_every = None if display is None else display.tick_every
        while pending:
            remaining = None if deadline is None else max(0.0, deadline - time.monotonic())
            waitables: dict[Any, _Worker] = {}
            for worker in pending.values():
                waitables[worker.conn] = worker
                waitables[worker.process.sentinel] = worker
            ready: list[Any] = []
            if self._spin_wait and (remaining is None or remaining > self._spin_wait):
                ready = spin_until_readable([worker.conn for worker in pending.values()], self._spin_wait)
            wake = remaining
            if tick_every is not None and (remaining is None or remaining > tick_every):
                wake = tick_every  # wakes before the deadline to tick the display
            if not ready:  # a pipe found readable by the spin needs no second look
                ready = wait(list(waitables), wake)
            if display is not None:
                display.tick()
            if not ready and wake == remaining:  # timed out (not merely woken to tick)
                for worker in pending.values():
                    worker.hung = True
                worker = next(iter(pending.values()))
                raise WorkerTimeoutError(
                    f"no answer to {during} within {timeout:g} s", worker=worker.index, device=worker.label
                )
            readable = {id(waitables[r]) for r in ready if r is waitables[r].conn}
            for worker in {id(waitables[r]): waitables[r] for r in ready}.values():
                if worker.index not in pending:
                    continue
                reply = None
                # a readable pipe needs no second poll; a dead worker's last reply may still sit in its pipe
                if id(worker) in readable or worker.conn.poll():
                    try:
                        reply = worker.conn.recv()
                    except (EOFError, OSError):
                        reply = None
                if reply is None:
                    if self._closed:  # close() from another thread stopped the workers while this one waited
                        raise _closed_while_waiting(during)
                    crash = worker.crashed(during)
                    if crashed is None:
                        raise crash
                    crashed[worker.index] = crash
                    values[worker.index] = None
                    del pending[worker.index]
                    continue
                if isinstance(reply, Status):  # a build stage before the handshake: the worker is still pending
                    worker.on_status(reply.stage)
                    continue
                del pending[worker.index]
                worker.built = True
                seq = worker.seq if expected_seq is None else expected_seq
                if reply.seq != seq:
                    raise ProtocolError(f"worker {worker.index}: reply {reply.seq} does not answer request {seq}")
                if isinstance(reply, Ok):
                    values[worker.index] = reply.value
                    self.busy_seconds[worker.index] += reply.seconds
                else:
                    errors[worker.index] = self._error_from(worker, reply, during)
                    if fail_fast:
                        raise errors[worker.index]
        if errors:
            raise errors[min(errors)]
        return [values[index] for index in indices]

    def _drop_buffers(self) -> None:
        """Let go of the workers' buffers before they exit: a worker that exits while this process still holds one
        of its CUDA tensors warns "Producer process has been terminated before all shared CUDA tensors released"."""
        on_cuda = any(shard.events is not None for shard in self.shards)
        if on_cuda:
            with contextlib.suppress(Exception):
                torch.cuda.synchronize()  # the parent's queued reads and writes of the buffers finish first
        self.shards = []
        self.handshakes = []
        gc.collect()

    @staticmethod
    def _error_from(worker: _Worker, reply: Err, during: str) -> WorkerError:
        error_class = BuildError if reply.kind == ErrorKind.BUILD else WorkerError
        error = error_class(
            f"{reply.message} (during {during})", worker=worker.index, device=worker.label, remote_type=reply.error_type
        )
        error.__cause__ = RemoteTraceback(reply.traceback)
        if reply.kind == ErrorKind.BUILD:
            worker.alive = False
        return error

    def close(self, timeout: float = 5.0) -> None:
        """Ask live workers to close and give them ``timeout`` s in all, then terminate and kill whatever is left
        (about 2 s more at most). Never raises.

        A worker still building or known to hang is not asked: it could not read the request before the timeout,
        so it is terminated at once. A worker busy with a command reads the request once it is done.
        """
        if self._closed:
            return
        deadline = time.monotonic() + timeout
        # another thread waiting on the workers keeps the lock: then nobody is asked, everybody is stopped
        talking = self._talking.acquire(timeout=timeout)
        try:
            self._closed = True
            polite = []
            if talking:
                self._drop_buffers()
                for worker in self._workers:
                    if worker.alive and worker.built and not worker.hung and worker.process.is_alive():
                        with contextlib.suppress(Exception):
                            worker.send(Command.CLOSE, ())
                            polite.append(worker)
            for worker in polite:
                worker.process.join(max(0.0, deadline - time.monotonic()))
            stop_processes([worker.process for worker in self._workers])
            for worker in self._workers:
                worker.release()
        finally:
            if talking:
                self._talking.release()
