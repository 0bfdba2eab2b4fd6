"""A fork server that has imported torch and Genesis once, for workers on the CPU backend.

Why: a spawned worker imports torch and Genesis before it can build anything: 7 s of an idle 2-core machine, 20-30 s
of a loaded one, paid again by every worker of every env. Workers forked from a process that already imported them
start without that import. Forking is only safe before CUDA or Genesis's runtime starts, so the server imports and
never initializes: each worker still runs ``gs.init`` itself. GPU workers keep spawn (see ``start_process``).

What a forked worker cannot get from its own start: modules read some environment variables when imported (PyOpenGL
reads ``PYOPENGL_PLATFORM``, pyglet ``PYGLET_HEADLESS``), and the server imported them with the environment it started
with. So the server is used only by starts whose environment equals the one it started with (``serves``), apart
from ``VOLATILE_VARIABLES``; any other start is spawned as before.

Lifetime: the server is a child of the process that first used it and stays for later envs. It exits when that
process has exited and every worker forked from it has too (each holds the server's "alive" pipe); workers watch the
env's process themselves (``gs_gym.transport.worker.die_with_parent``), since their parent is the server.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Mapping
from multiprocessing import forkserver

PRELOADED_MODULES = ["torch", "genesis", "cloudpickle", "gs_gym.transport.worker", "gs_gym.vector.shard"]
VOLATILE_VARIABLES = frozenset({"PYTEST_CURRENT_TEST"})
"""Variables that may differ between the server's start and a worker's: pytest rewrites this one before every test,
and no module reads it when imported."""


def _lasting(environment: Mapping[str, str]) -> dict[str, str]:
    return {key: value for key, value in environment.items() if key not in VOLATILE_VARIABLES}


class PreloadedForkServer:
    """What ``multiprocessing.popen_forkserver`` calls ``forkserver`` (``connect_to_new_process``, ``read_signed``),
    backed by a server of its own that preloads ``PRELOADED_MODULES``, started at its first use."""

    read_signed = staticmethod(forkserver.read_signed)

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._start_afresh()

    def _start_afresh(self) -> None:
        self._server = forkserver.ForkServer()
        self._server.set_forkserver_preload(PRELOADED_MODULES)
        self._environment: dict[str, str] | None = None
        self._owner = os.getpid()

    def serves(self, environment: Mapping[str, str]) -> bool:
        """Whether a worker to start with ``environment`` may fork from this server: always before it started (it
        will start with this environment), afterwards when the environment is the one it started with."""
        with self._lock:
            if self._owner != os.getpid():  # in an os.fork copy of the process that started the server
                self._start_afresh()
            if self._environment is None:
                self._environment = _lasting(environment)
                return True
            return self._environment == _lasting(environment)

    def connect_to_new_process(self, fds: list[int]) -> tuple[int, int]:
        return self._server.connect_to_new_process(fds)


SERVER = PreloadedForkServer()
