"""The worker process: pin the device, build the shard, export its buffers, then serve commands until told to stop.

This module must stay importable without touching CUDA: the device variables are applied by ``worker_main`` before
anything else runs in the child.
"""

from __future__ import annotations

import atexit
import contextlib
import ctypes
import dataclasses
import os
import pickle
import select
import signal
import sys
import threading
import time
from collections.abc import Callable
from multiprocessing.connection import Connection
from typing import Any, Protocol

from gs_gym.transport.output import redirect_output
from gs_gym.transport.progress import READY
from gs_gym.transport.protocol import Command, Err, ErrorKind, Ok, Request, Status, send_message
from gs_gym.transport.spinning import spin_until_readable

_PR_SET_PDEATHSIG = 1
_PARENT_POLL_SECONDS = 0.5


@dataclasses.dataclass(frozen=True)
class WorkerSpec:
    """How to start one worker: its index, environment variables and a cloudpickled shard factory."""

    index: int
    environment: dict[str, str]
    shard_factory: bytes
    """Cloudpickled; called in the worker as ``factory(report)``: ``report(stage: str)`` sends a ``Status``."""
    parent_pid: int
    spin_wait: float = 0.0
    """Seconds to poll the pipe for the next request before blocking on it (``spinning``)."""
    parent_death_signal: bool = True
    """Ask the kernel for SIGKILL when the thread that started this worker exits (Linux); only right when that
    thread is the parent's main thread. The watchdog thread runs either way."""


def die_with_parent(parent_pid: int, parent_death_signal: bool = True) -> None:
    """Exit when the env's process (``parent_pid``) dies.

    A spawned worker is that process's child: the kernel's parent-death signal (``PR_SET_PDEATHSIG``, Linux) ends it
    even mid-step. It fires when the parent *thread* exits, so it is asked for only when that is the main thread. A
    worker forked from the fork server (``gs_gym.transport.preload``) is the server's child, where the signal would
    follow the server, so it is not asked for. Either way a watchdog thread waits for the env's process to end: on a
    pidfd (Linux 5.3+), which wakes it at once; elsewhere it polls every ``_PARENT_POLL_SECONDS``. It also ends
    workers started from a thread other than the main thread, and workers stuck in a long step, where the pipe's
    EOF would go unnoticed.
    """
    direct_child = os.getppid() == parent_pid
    if direct_child and parent_death_signal and sys.platform.startswith("linux"):
        with contextlib.suppress(OSError, AttributeError):
            ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
    try:
        pidfd: int | None = os.pidfd_open(parent_pid)
    except ProcessLookupError:
        os._exit(1)  # already gone
    except (AttributeError, OSError):
        pidfd = None

    def parent_alive() -> bool:
        if direct_child:
            return os.getppid() == parent_pid
        try:
            os.kill(parent_pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            pass
        return True

    if not parent_alive():
        os._exit(1)

    def watch() -> None:
        if pidfd is not None:
            select.select([pidfd], [], [])  # readable once the process has exited
            os._exit(1)
        while True:
            time.sleep(_PARENT_POLL_SECONDS)
            if not parent_alive():
                os._exit(1)

    threading.Thread(target=watch, name="gs_gym-parent-watchdog", daemon=True).start()


class ServedShard(Protocol):
    """What a worker serves: one method per ``Command`` (``gs_gym.vector.shard.EnvShard`` in practice)."""

    task: Any
    """What ``call``, ``get_attr`` and ``set_attr`` act on."""

    def handshake(self) -> Any: ...
    def step(self, actions: Any = None) -> Any: ...
    def reset(self, seeds: Any, mask: Any) -> Any: ...
    def call(self, name: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any: ...
    def get_attr(self, name: str) -> Any: ...
    def set_attr(self, name: str, value: Any) -> None: ...
    def set_episode_steps(self, steps: Any) -> None: ...
    def render(self) -> Any: ...
    def check_step(self) -> Any: ...
    def close(self) -> None: ...


def command_handlers(shard: ServedShard) -> dict[Command, Callable[..., Any]]:
    """The method of ``shard`` that executes each command (CLOSE is the serving loop's own)."""
    return {
        Command.STEP: shard.step,
        Command.RESET: shard.reset,
        Command.CALL: shard.call,
        Command.GET_ATTR: shard.get_attr,
        Command.SET_ATTR: shard.set_attr,
        Command.SET_EPISODE_STEPS: shard.set_episode_steps,
        Command.RENDER: shard.render,
        Command.CHECK_STEP: shard.check_step,
    }


def serve(conn: Connection, shard: ServedShard, spin_wait: float = 0.0) -> None:
    """Answer requests until CLOSE or until the parent's end of the pipe closes."""
    handlers = command_handlers(shard)
    while True:
        spin_until_readable([conn], spin_wait)
        try:
            request: Request = conn.recv()
        except (EOFError, OSError):
            return
        if request.command == Command.CLOSE:
            shard.close()
            send_message(conn, Ok(request.seq))
            return
        start = time.perf_counter()
        reply: Ok | Err
        try:
            value = handlers[request.command](*request.args)
            reply = Ok(request.seq, value, time.perf_counter() - start)
        except Exception as error:  # reported to the parent, which raises WorkerError
            reply = Err.from_exception(request.seq, ErrorKind.EXCEPTION, error)
        try:
            send_message(conn, reply)  # pickles first: a value that cannot be pickled leaves nothing half-written
        except (pickle.PicklingError, TypeError, AttributeError) as error:
            send_message(conn, Err.from_exception(request.seq, ErrorKind.EXCEPTION, error))


def worker_main(conn: Connection, output: Connection | None, spec: WorkerSpec) -> None:
    """Entry point of a worker process (``spawn`` start method)."""
    os.environ.update(spec.environment)
    if output is not None:
        redirect_output(output)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C reaches the parent, which closes workers in order
    die_with_parent(spec.parent_pid, spec.parent_death_signal)
    try:
        import cloudpickle

        def report(stage: str) -> None:
            send_message(conn, Status(stage))

        shard = cloudpickle.loads(spec.shard_factory)(report)
        handshake = shard.handshake()
        report(READY)
    except BaseException as error:
        send_message(conn, Err.from_exception(0, ErrorKind.BUILD, error))
        conn.close()
        return
    conn.send(Ok(0, handshake))
    try:
        serve(conn, shard, spec.spin_wait)
    finally:
        conn.close()
    exit_now()


def exit_now() -> None:
    """End the worker once it has served its last command: the exit handlers run (Genesis's own, which writes the
    kernels it compiled to the cache, and multiprocessing's), the output is flushed, and the process ends without
    tearing the interpreter down. That teardown (torch's and Genesis's modules, garbage collection) took 2-4 s per
    worker on a loaded 2-core machine, all of it inside the parent's ``close()``; the operating system frees the
    same memory, files and devices at once."""
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    os._exit(0)
