"""Forward a worker's stdout/stderr to the parent's stderr with a prefix, keeping the last lines for crash reports."""

from __future__ import annotations

import collections
import os
import sys
import threading
from multiprocessing.connection import Connection

_TAIL_LINES = 20


class OutputPump:
    """Reads one worker's output pipe on a daemon thread until the worker closes it."""

    def __init__(self, reader: Connection, prefix: str, forward: bool) -> None:
        self._fd = reader.fileno()
        self._reader = reader
        self._prefix = prefix
        self._forward = forward
        self._tail: collections.deque[str] = collections.deque(maxlen=_TAIL_LINES)
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._run, name=f"gs_gym-output-{prefix}", daemon=True)
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
                sys.stderr.write(f"{self._prefix}{line}\n")

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
