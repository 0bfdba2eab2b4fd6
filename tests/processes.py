"""Waiting for processes to end, for tests that check what a failure or ``close`` leaves behind."""

from __future__ import annotations

import time
from collections.abc import Callable

import psutil


def gone(pid: int) -> bool:
    """True when ``pid`` no longer runs (reaped, or a zombie nobody has reaped yet)."""
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def reaped(pid: int) -> bool:
    """True when ``pid`` no longer exists, not even as a zombie."""
    return not psutil.pid_exists(pid)


def wait_until(ended: Callable[[int], bool], pids: list[int], timeout: float) -> list[int]:
    """Poll until ``ended(pid)`` holds for every pid or ``timeout`` passes; returns the pids for which it does not."""
    deadline = time.monotonic() + timeout
    while True:
        left = [pid for pid in pids if not ended(pid)]
        if not left or time.monotonic() > deadline:
            return left
        time.sleep(0.05)


def wait_until_gone(pids: list[int], timeout: float) -> list[int]:
    """Poll until every pid is gone (``gone``) or ``timeout`` passes; returns those still running."""
    return wait_until(gone, pids, timeout)


def wait_until_reaped(pids: list[int], timeout: float = 60.0) -> list[int]:
    """Poll until no pid exists any more, not even as a zombie, or ``timeout`` passes; returns those left.

    ``close`` returns within its limit whatever the workers do: a worker it had to kill may still be torn down by the
    kernel when it returns (seconds for a large process on a loaded machine), and is reaped by a background thread
    as soon as it exits. So a test asks whether the workers end, not whether they had already ended at ``close``'s
    return; ``timeout`` only keeps a worker that never ends from hanging the test."""
    return wait_until(reaped, pids, timeout)
