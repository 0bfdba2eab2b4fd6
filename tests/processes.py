"""Waiting for processes to end, for tests that check what ``close`` leaves behind."""

from __future__ import annotations

import time

import psutil


def wait_until_reaped(pids: list[int], timeout: float = 60.0) -> list[int]:
    """Poll until no pid exists any more, not even as a zombie, or ``timeout`` passes; returns those left.

    ``close`` returns within its limit whatever the workers do: a worker it had to kill may still be torn down by the
    kernel when it returns (seconds for a large process on a loaded machine), and is reaped by a background thread
    as soon as it exits. So a test asks whether the workers end, not whether they had already ended at ``close``'s
    return; ``timeout`` only keeps a worker that never ends from hanging the test."""
    deadline = time.monotonic() + timeout
    while True:
        left = [pid for pid in pids if psutil.pid_exists(pid)]
        if not left or time.monotonic() > deadline:
            return left
        time.sleep(0.05)
