"""What the user sees while workers start: one row per worker and the stage it reached.

A build wait opens a ``BuildProgress`` over its rows (one per worker), feeds it the stages the workers report and
closes it. ``BuildProgress`` itself shows nothing; ``RichProgress`` draws live rows with ``rich`` on a terminal;
``PlainProgress`` writes one line per change (logs, notebooks, or without ``rich``). Every row starts at
``STARTING``; ``READY`` ends it; rows still unfinished when the display closes (a failed build) end ``STOPPED``.
"""

from __future__ import annotations

import importlib.util
import sys
import time
from collections.abc import Callable, Sequence
from typing import Any, TextIO

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


class PlainProgress(BuildProgress):
    """One line per change: ``gs_gym worker 0 (cpu): building scene``, ``...: ready after 12.3 s``."""

    def __init__(
        self,
        names: Sequence[str],
        stream: TextIO,
        *,
        notice: str | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        super().__init__(names, clock=clock)
        self._stream = stream
        if notice:
            self._write(f"gs_gym: {notice}")
        for name in self.names:
            self._write(f"gs_gym {name}: {STARTING}")

    def _show(self, row: int, stage: str, elapsed: float) -> None:
        text = f"{READY} after {elapsed:.1f} s" if stage == READY else stage
        self._write(f"gs_gym {self.names[row]}: {text}")

    def _write(self, line: str) -> None:
        self._stream.write(line + "\n")
        self._stream.flush()


class RichProgress(BuildProgress):
    """Live rows on a terminal (spinner, name, stage, elapsed time), left on screen when closed."""

    def __init__(
        self,
        names: Sequence[str],
        console: Any,
        *,
        notice: str | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

        super().__init__(names, clock=clock)
        if notice:
            console.print(f"gs_gym: {notice}", markup=False, highlight=False)
        self._progress = Progress(
            SpinnerColumn(finished_text="✓"),
            TextColumn("gs_gym {task.fields[name]}", markup=False),
            TextColumn("{task.description}", markup=False),
            TimeElapsedColumn(),
            console=console,
            get_time=clock,
        )
        self._tasks = [self._progress.add_task(STARTING, total=None, name=name) for name in self.names]
        self._progress.start()

    def _show(self, row: int, stage: str, elapsed: float) -> None:
        finished = {"total": 1, "completed": 1} if stage == READY else {}
        self._progress.update(self._tasks[row], description=stage, **finished)

    def _finish(self) -> None:
        self._progress.stop()


def _is_terminal(stream: TextIO) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):  # no isatty, or a closed stream
        return False


def rich_installed() -> bool:
    """Whether the optional ``rich`` (``pip install "gs-gym[progress]"``) can be imported."""
    return importlib.util.find_spec("rich") is not None


def open_progress(names: Sequence[str], stream: TextIO, *, notice: str | None = None) -> BuildProgress:
    """``RichProgress`` when ``stream`` is a terminal and ``rich`` is installed, else ``PlainProgress``."""
    if _is_terminal(stream) and rich_installed():
        from rich.console import Console

        return RichProgress(names, Console(file=stream), notice=notice)
    return PlainProgress(names, stream, notice=notice)


class StartupDisplay:
    """The ``ProgressFactory`` of one vector env: silent unless ``verbose``; ``verbose=None`` means "when stderr is
    a terminal", decided once, here. Displays write to the ``sys.stderr`` of the moment they open; the ``notice``
    comes with the first one only (a restart later does not repeat it)."""

    def __init__(self, verbose: bool | None, *, notice: str | None = None) -> None:
        if verbose is not None and not isinstance(verbose, bool):
            raise TypeError(f"verbose: expected True, False or None (when stderr is a terminal), got {verbose!r}")
        if verbose is None:
            verbose = sys.stderr is not None and _is_terminal(sys.stderr)
        self.enabled = verbose
        self._notice = notice

    def __call__(self, names: Sequence[str]) -> BuildProgress:
        if not self.enabled or sys.stderr is None:
            return BuildProgress(names)
        notice, self._notice = self._notice, None
        return open_progress(names, sys.stderr, notice=notice)
