"""How start-up is shown to the user: the transport's build stages rendered as live rows (``rich``) or lines.

The transport only reports stages (``gs_gym.transport.progress``); ``GenesisVectorEnv`` opens one of these displays
through ``StartupDisplay``. ``RichProgress`` draws live rows with ``rich`` on a terminal; ``PlainProgress`` writes one
line per change, and a heartbeat line while a row stays in one stage (logs, notebooks, or without ``rich``).
"""

from __future__ import annotations

import importlib.util
import sys
import time
from collections.abc import Callable, Sequence
from typing import Any, TextIO

from gs_gym.transport.progress import READY, STARTING, BuildProgress


class PlainProgress(BuildProgress):
    """One line per change: ``gs_gym worker 0 (cpu): building scene``, ``...: ready after 12.3 s``; and, for a row
    that has written nothing for ``heartbeat`` seconds and is not ready, a line with its time since it started:
    ``gs_gym worker 0 (cpu): building scene (35 s)``, so that a log shows the build alive through minutes of kernel
    compilation. Heartbeats come from ``tick`` (called by the build wait); a late tick writes one line, not several.
    """

    def __init__(
        self,
        names: Sequence[str],
        stream: TextIO,
        *,
        notice: str | None = None,
        heartbeat: float = 10.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if not heartbeat > 0:
            raise ValueError(f"heartbeat: expected seconds > 0, got {heartbeat!r}")
        super().__init__(names, clock=clock)
        self.heartbeat = heartbeat
        self.tick_every = min(1.0, heartbeat)
        """Ticks every second at most: a heartbeat comes at most a second late."""
        self._stream = stream
        self._last_line = list(self._started)
        """Per row: when its last line was written (``clock`` time)."""
        if notice:
            self._write(f"gs_gym: {notice}")
        for name in self.names:
            self._write(f"gs_gym {name}: {STARTING}")

    def tick(self) -> None:
        if self._closed:
            return
        now = self._clock()
        for row, stage in enumerate(self.stages):
            if stage != READY and now - self._last_line[row] >= self.heartbeat:
                self._last_line[row] = now
                self._write(f"gs_gym {self.names[row]}: {stage} ({now - self._started[row]:.0f} s)")

    def _show(self, row: int, stage: str, elapsed: float) -> None:
        self._last_line[row] = self._clock()
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
        finished: dict[str, Any] = {"total": 1, "completed": 1} if stage == READY else {}
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
