"""Spin on pipes before sleeping on them: a process that blocks for a millisecond is slow to wake up again.

A worker and the parent each sleep through the other's half of every step. On the H200 machine, waking up cost
about 0.7 ms per go2-walk step of 5.7 ms; polling the pipe instead keeps the process on its core, at the price of
that core while it waits (``bench/results/README.md``). So on GPUs, where the cores are otherwise idle, both sides
spin by default when the machine has two logical cores per process to spare; on the CPU backend the cores belong
to the simulation and nobody spins unless ``GenesisVectorEnv(spin_wait_us=...)`` asks.
"""

from __future__ import annotations

import os
import select
import time
from collections.abc import Sequence
from multiprocessing.connection import Connection

GPU_SPIN_WAIT_US = 20_000.0
"""The default spin on GPUs: longer than a step of the built-in tasks at 4096 envs (2-7 ms on the H200), so that
a rollout never sleeps, short enough that a process idle for longer (a learner's update) soon stops burning a core."""


def usable_cores() -> int:
    """Logical cores this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


def default_spin_wait_us(on_gpu: bool, num_workers: int, cores: int | None = None) -> float:
    """``spin_wait_us`` when the user gives none: ``GPU_SPIN_WAIT_US`` for workers stepping on GPUs when ``cores``
    (default: this process's) give two per process (the workers and this one), else 0."""
    if not on_gpu or num_workers == 0:
        return 0.0
    enough = (usable_cores() if cores is None else cores) >= 2 * (num_workers + 1)
    return GPU_SPIN_WAIT_US if enough else 0.0


def spin_until_readable(conns: Sequence[Connection], seconds: float) -> list[Connection]:
    """Poll ``conns`` for up to ``seconds``; return those that have data (or whose other end closed), in no
    particular order, or an empty list once the time is up (at once when 0).

    One ``select.poll`` object polls every pipe: ``Connection.poll(0)`` builds a selector per call and per pipe,
    about five times the cost (it is the fallback where ``select.poll`` is missing: Windows)."""
    if seconds <= 0.0 or not conns:
        return []
    deadline = time.perf_counter() + seconds
    if not hasattr(select, "poll"):
        while time.perf_counter() < deadline:
            if ready := [conn for conn in conns if conn.poll(0)]:
                return ready
        return []
    poller = select.poll()
    by_fd = {conn.fileno(): conn for conn in conns}
    for fd in by_fd:
        poller.register(fd, select.POLLIN)
    while time.perf_counter() < deadline:
        if events := poller.poll(0):
            return [by_fd[fd] for fd, _ in events]
    return []
