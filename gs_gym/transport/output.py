"""Forward a worker's stdout/stderr, line by line, to the parent's ``logging``, keeping the last lines for crash
reports.

Worker ``i``'s lines are INFO records of the logger ``gs_gym.worker.<i>``, with the attribute ``worker`` (``i``).
To keep them visible when the application configured no logging, this module (on import) gives the logger
``gs_gym.worker`` the level INFO unless it already has a level, and a fallback handler that prints a record to the
current ``sys.stderr`` as ``[gs_gym worker <i>] <line>`` only when no other handler would see it (logging's own
last resort shows WARNING and above only, and these lines are ordinary output). Once the application configures a
handler (``logging.basicConfig()``, a handler on ``gs_gym``, ...), the lines go there instead, formatted its way.
Silence them with ``logging.getLogger("gs_gym.worker").setLevel(logging.WARNING)``.
"""

from __future__ import annotations

import collections
import logging
import os
import sys
import threading
from multiprocessing.connection import Connection

_TAIL_LINES = 20
WORKER_LOGGER = "gs_gym.worker"
"""Parent of the loggers ``gs_gym.worker.<index>`` that carry the workers' output."""


class FallbackHandler(logging.Handler):
    """Prints ``[gs_gym worker <i>] <message>`` to the current ``sys.stderr``, unless another handler on the
    record's way up (respecting ``propagate``) will handle it."""

    def emit(self, record: logging.LogRecord) -> None:
        if self._others_configured(record.name) or sys.stderr is None:
            return
        try:
            sys.stderr.write(f"[gs_gym worker {getattr(record, 'worker', '?')}] {record.getMessage()}\n")
            sys.stderr.flush()
        except Exception:
            self.handleError(record)

    def _others_configured(self, name: str) -> bool:
        # the registry is read directly: logging.getLogger would take logging's module lock while this handler's
        # lock is held, the opposite order of logging.config (a possible deadlock)
        logger = logging.Logger.manager.loggerDict.get(name)
        if not isinstance(logger, logging.Logger):
            logger = logging.root
        while logger is not None:
            if any(handler is not self for handler in logger.handlers):
                return True
            if not logger.propagate:
                return False
            logger = logger.parent
        return False


def _install_fallback() -> None:
    logger = logging.getLogger(WORKER_LOGGER)
    if logger.level == logging.NOTSET:
        logger.setLevel(logging.INFO)
    if not any(isinstance(handler, FallbackHandler) for handler in logger.handlers):
        logger.addHandler(FallbackHandler())


_install_fallback()


class OutputPump:
    """Reads one worker's output pipe on a daemon thread until the worker closes it; logs each line when
    ``forward``."""

    def __init__(self, reader: Connection, worker: int, forward: bool) -> None:
        self._fd = reader.fileno()
        self._reader = reader
        self._logger = logging.getLogger(f"{WORKER_LOGGER}.{worker}")
        self._extra = {"worker": worker}
        self._forward = forward
        self._tail: collections.deque[str] = collections.deque(maxlen=_TAIL_LINES)
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._run, name=f"gs_gym-output-{worker}", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        pending = b""
        while True:
            try:
                chunk = os.read(self._fd, 65536)
            except OSError:
                chunk = b""
            if not chunk:
                break
            *lines, pending = (pending + chunk).split(b"\n")
            self._emit(lines)
        if pending:
            self._emit([pending])

    def _emit(self, lines: list[bytes]) -> None:
        text = [line.decode("utf-8", "replace").rstrip("\r") for line in lines]
        with self._lock:
            self._tail.extend(text)
        if self._forward:
            for line in text:
                self._logger.info(line, extra=self._extra)

    def tail(self, wait: float = 1.0) -> list[str]:
        """The last lines the worker wrote (waits briefly for a dead worker's pipe to drain)."""
        self._thread.join(wait)
        with self._lock:
            return list(self._tail)

    def close(self) -> None:
        self._thread.join(0.5)
        if not self._thread.is_alive():
            self._reader.close()


def redirect_output(writer: Connection) -> None:
    """In the worker: send fds 1 and 2 (Python's and C libraries' output alike) into the pump's pipe."""
    sys.stdout.flush()
    sys.stderr.flush()
    os.dup2(writer.fileno(), 1)
    os.dup2(writer.fileno(), 2)
    writer.close()
