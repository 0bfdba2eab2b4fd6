"""Spin on pipes before sleeping on them: a process that blocks for a millisecond is slow to wake up again.

A worker and the parent each sleep through the other's half of every step; waking up costs ~0.1-0.2 ms a step
(``bench/results/README.md``). Polling for a short while first keeps the process on its core, at the price of that
core. Off unless ``GenesisVectorEnv(spin_wait_us=...)`` asks for it.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from multiprocessing.connection import Connection


def spin_until_readable(conns: Sequence[Connection], seconds: float) -> None:
    """Return as soon as one of ``conns`` has data, or after ``seconds`` of polling (at once when 0)."""
    if seconds <= 0.0 or not conns:
        return
    deadline = time.perf_counter() + seconds
    while time.perf_counter() < deadline:
        for conn in conns:
            if conn.poll(0):
                return
