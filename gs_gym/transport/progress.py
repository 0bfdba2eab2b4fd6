"""Start-up events: the stages a worker reports while it builds, and the ``BuildProgress`` interface that receives
them.

A build wait opens a ``BuildProgress`` over its rows (one per worker), feeds it the stages the workers report, calls
its ``tick`` while waiting (if it asks for ticks) and closes it. ``BuildProgress`` itself shows nothing; the displays
that render rows or lines live above the transport, in ``gs_gym.display``. Every row starts at ``STARTING``;
``READY`` ends it; rows still unfinished when the display closes (a failed build) end ``STOPPED``.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Iterator, Sequence

STARTING = "starting"
"""Set by the parent when it starts the worker process (Python, torch and gs_gym are imported in this stage)."""
READY = "ready"
"""Reported by the worker once its shard is built, just before its handshake."""
STOPPED = "stopped"
"""Given by the display to rows that had not reached ``READY`` when it closed."""

ProgressFactory = Callable[[Sequence[str]], "BuildProgress"]
"""Opens a display for rows named as given (``"worker 0 (cuda:1)"``)."""


class BuildProgress:
    """Stages per row, with no output: the silent display and the base of the others. Updates after ``close`` are
    ignored, so a worker may keep a reference to it."""

    tick_every: float | None = None
    """Longest the build wait may block without calling ``tick``, in seconds; None: this display needs no ticks (the
    wait then blocks until a reply or its deadline, as if there were no display)."""

    def __init__(self, names: Sequence[str], *, clock: Callable[[], float] = time.monotonic) -> None:
        self.names = list(names)
        self.stages = [STARTING] * len(self.names)
        self._clock = clock
        self._started = [clock()] * len(self.names)
        self._closed = False

    def update(self, row: int, stage: str) -> None:
        """Row ``row`` reached ``stage``; repeats, and anything after ``READY``, are ignored."""
        if self._closed or stage == self.stages[row] or self.stages[row] == READY:
            return
        self.stages[row] = stage
        self._show(row, stage, self._clock() - self._started[row])

    def tick(self) -> None:
        """Called by the build wait each time it wakes, at least every ``tick_every`` seconds: a display that shows
        time passing (a worker compiling kernels reports nothing for minutes) does it here, reading its clock."""

    def close(self) -> None:
        """Mark unfinished rows ``STOPPED`` and release the display. Idempotent."""
        if self._closed:
            return
        for row, stage in enumerate(self.stages):
            if stage != READY:
                self.update(row, STOPPED)
        self._closed = True
        self._finish()

    def __enter__(self) -> BuildProgress:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def _show(self, row: int, stage: str, elapsed: float) -> None:
        """Render one change (``elapsed``: seconds since the row started)."""

    def _finish(self) -> None:
        """Release what rendering holds."""


@contextlib.contextmanager
def ticking(display: BuildProgress) -> Iterator[None]:
    """Tick ``display`` from a background thread, every ``tick_every`` seconds, while the body runs: a build in this
    thread (the in-process shard) cannot tick it itself. No thread when the display asks for no ticks."""
    if display.tick_every is None:
        yield
        return
    interval = display.tick_every
    stop = threading.Event()

    def tick_until_stopped() -> None:
        while not stop.wait(interval):
            display.tick()

    thread = threading.Thread(target=tick_until_stopped, name="gs_gym-build-ticks", daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join()
