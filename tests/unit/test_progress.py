"""The start-up display: stage transitions and their rendering, without workers or Genesis."""

import io
import re
import threading

import pytest

from gs_gym import display as progress
from gs_gym.display import PlainProgress, RichProgress, StartupDisplay, open_progress
from gs_gym.transport.progress import READY, STARTING, STOPPED, BuildProgress, ticking

NAMES = ["worker 0 (cpu)", "worker 1 (cpu)"]
ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


class FakeClock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


class Terminal(io.StringIO):
    """A text stream that says it is a terminal."""

    def isatty(self) -> bool:
        return True


class Recording(BuildProgress):
    def __init__(self, names, **kwargs) -> None:
        super().__init__(names, **kwargs)
        self.shown: list[tuple[int, str, float]] = []
        self.finished = 0

    def _show(self, row, stage, elapsed) -> None:
        self.shown.append((row, stage, elapsed))

    def _finish(self) -> None:
        self.finished += 1


def test_stage_transitions():
    clock = FakeClock()
    display = Recording(NAMES, clock=clock)
    assert display.stages == [STARTING, STARTING]
    clock.now = 102.5
    display.update(1, "importing genesis")
    display.update(1, "importing genesis")  # a repeat is no change
    clock.now = 110.0
    display.update(1, READY)
    display.update(1, "building scene")  # nothing after READY
    display.update(0, "importing genesis")
    display.close()
    display.close()  # idempotent
    display.update(0, "building scene")  # ignored once closed
    assert display.shown == [
        (1, "importing genesis", 2.5),
        (1, READY, 10.0),
        (0, "importing genesis", 10.0),
        (0, STOPPED, 10.0),
    ]
    assert display.stages == [STOPPED, READY]
    assert display.finished == 1


def test_context_manager_closes():
    with Recording(NAMES) as display:
        display.update(0, READY)
    assert display.stages == [READY, STOPPED]
    assert display.finished == 1


def test_plain_progress_writes_one_line_per_change():
    clock, stream = FakeClock(), io.StringIO()
    display = PlainProgress(NAMES, stream, notice="kernels compile once", clock=clock)
    display.update(0, "importing genesis")
    clock.now = 103.0
    display.update(0, "building scene")
    display.update(1, "importing genesis")
    clock.now = 112.34
    display.update(0, READY)
    display.close()
    assert stream.getvalue().splitlines() == [
        "gs_gym: kernels compile once",
        "gs_gym worker 0 (cpu): starting",
        "gs_gym worker 1 (cpu): starting",
        "gs_gym worker 0 (cpu): importing genesis",
        "gs_gym worker 0 (cpu): building scene",
        "gs_gym worker 1 (cpu): importing genesis",
        "gs_gym worker 0 (cpu): ready after 12.3 s",
        "gs_gym worker 1 (cpu): stopped",
    ]


def test_plain_progress_heartbeat_comes_after_the_interval_for_rows_not_ready():
    clock, stream = FakeClock(), io.StringIO()
    display = PlainProgress(NAMES, stream, heartbeat=10.0, clock=clock)
    clock.now = 103.0
    display.update(0, "importing genesis")  # a line: row 0's interval starts again
    clock.now = 109.9
    display.tick()  # before the interval: nothing
    clock.now = 110.0
    display.tick()  # row 1 has been silent for 10 s
    display.tick()  # one line per interval, however often ticked
    clock.now = 113.0
    display.tick()  # row 0's turn
    clock.now = 114.0
    display.update(1, READY)
    clock.now = 125.0
    display.tick()  # row 0 again; row 1 is ready
    clock.now = 134.9
    display.tick()
    display.close()
    assert stream.getvalue().splitlines() == [
        "gs_gym worker 0 (cpu): starting",
        "gs_gym worker 1 (cpu): starting",
        "gs_gym worker 0 (cpu): importing genesis",
        "gs_gym worker 1 (cpu): starting (10 s)",
        "gs_gym worker 0 (cpu): importing genesis (13 s)",
        "gs_gym worker 1 (cpu): ready after 14.0 s",
        "gs_gym worker 0 (cpu): importing genesis (25 s)",
        "gs_gym worker 0 (cpu): stopped",
    ]


def test_plain_progress_late_tick_writes_one_heartbeat():
    clock, stream = FakeClock(), io.StringIO()
    display = PlainProgress(NAMES[:1], stream, heartbeat=10.0, clock=clock)
    display.update(0, "building scene")
    clock.now = 145.0
    display.tick()  # 45 s without a tick: one line, not four
    clock.now = 154.9
    display.tick()
    clock.now = 155.0
    display.tick()
    display.close()
    clock.now = 200.0
    display.tick()  # closed: nothing
    assert stream.getvalue().splitlines() == [
        "gs_gym worker 0 (cpu): starting",
        "gs_gym worker 0 (cpu): building scene",
        "gs_gym worker 0 (cpu): building scene (45 s)",
        "gs_gym worker 0 (cpu): building scene (55 s)",
        "gs_gym worker 0 (cpu): stopped",
    ]


def test_plain_progress_asks_for_ticks_often_enough_for_its_heartbeat():
    assert BuildProgress(NAMES).tick_every is None  # the silent display: the build wait never wakes for it
    assert PlainProgress(NAMES, io.StringIO()).heartbeat == 10.0
    assert PlainProgress(NAMES, io.StringIO()).tick_every == 1.0
    assert PlainProgress(NAMES, io.StringIO(), heartbeat=0.25).tick_every == 0.25
    with pytest.raises(ValueError, match=r"^heartbeat: expected seconds > 0, got 0$"):
        PlainProgress(NAMES, io.StringIO(), heartbeat=0)


def test_rich_progress_leaves_the_final_rows():
    from rich.console import Console

    clock, stream = FakeClock(), io.StringIO()
    console = Console(file=stream, force_terminal=True, width=80, color_system=None)
    names = ["worker 0 (cpu)", "worker [bold]1[/bold]"]  # shown as written, not as markup
    display = RichProgress(names, console, notice="kernels compile once", clock=clock)
    display.update(0, "building scene")
    clock.now = 165.0
    display.update(0, READY)
    display.close()
    text = ANSI.sub("", stream.getvalue())
    assert text.startswith("gs_gym: kernels compile once\n")
    final = [re.sub(r"\s+", " ", line).strip() for line in text.replace("\r", "\n").splitlines()[-2:]]
    assert final[0] == "✓ gs_gym worker 0 (cpu) ready 0:01:05"
    assert re.fullmatch(r". gs_gym worker \[bold\]1\[/bold\] stopped 0:01:05", final[1]), final[1]


def test_open_progress_picks_rich_on_a_terminal_only(monkeypatch):
    terminal = Terminal()
    assert type(open_progress(NAMES, io.StringIO())) is PlainProgress
    rich_display = open_progress(NAMES, terminal)
    rich_display.close()
    assert type(rich_display) is RichProgress
    monkeypatch.setattr(progress, "rich_installed", lambda: False)
    assert type(open_progress(NAMES, terminal)) is PlainProgress


@pytest.mark.parametrize("verbose", ["yes", 1, 0.0])
def test_startup_display_refuses_non_bool(verbose):
    message = f"verbose: expected True, False or None (when stderr is a terminal), got {verbose!r}"
    with pytest.raises(TypeError, match=f"^{re.escape(message)}$"):
        StartupDisplay(verbose)


@pytest.mark.parametrize(
    ("verbose", "stderr", "enabled"),
    [(None, io.StringIO(), False), (None, Terminal(), True), (False, Terminal(), False), (True, io.StringIO(), True)],
)
def test_startup_display_decides_when_shown(monkeypatch, verbose, stderr, enabled):
    monkeypatch.setattr("sys.stderr", stderr)
    startup = StartupDisplay(verbose, notice="kernels compile once")
    assert startup.enabled is enabled
    display = startup(NAMES)
    display.update(0, READY)
    display.close()
    if enabled:
        assert "gs_gym worker 0 (cpu)" in ANSI.sub("", stderr.getvalue())
    else:
        assert type(display) is BuildProgress
        assert stderr.getvalue() == ""


def test_startup_display_shows_the_notice_once(monkeypatch):
    stderr = io.StringIO()
    monkeypatch.setattr("sys.stderr", stderr)
    startup = StartupDisplay(True, notice="kernels compile once")
    startup(NAMES[:1]).close()
    startup(NAMES[1:]).close()
    assert stderr.getvalue().splitlines() == [
        "gs_gym: kernels compile once",
        "gs_gym worker 0 (cpu): starting",
        "gs_gym worker 0 (cpu): stopped",
        "gs_gym worker 1 (cpu): starting",
        "gs_gym worker 1 (cpu): stopped",
    ]


class Ticks(BuildProgress):
    """Counts ticks; ``seen`` is set once ``wanted`` have come."""

    def __init__(self, tick_every, wanted=3) -> None:
        super().__init__(["in-process (cpu)"])
        self.tick_every = tick_every
        self.count = 0
        self.wanted = wanted
        self.seen = threading.Event()

    def tick(self) -> None:
        self.count += 1
        if self.count >= self.wanted:
            self.seen.set()


def test_ticking_ticks_the_display_while_the_body_runs_and_stops_after():
    """A build in this thread (``num_workers=0``) cannot tick its display itself: ``ticking`` does it from a thread,
    so that the heartbeat lines of a long in-process compilation come as they do for workers."""
    display = Ticks(tick_every=0.001)
    with ticking(display):
        assert display.seen.wait(60.0)  # the body blocks; the ticks come anyway
    after = display.count
    assert not any(t.name == "gs_gym-build-ticks" for t in threading.enumerate())
    assert display.count == after


def test_ticking_starts_no_thread_for_a_display_that_needs_no_ticks():
    display = Ticks(tick_every=None)
    with ticking(display):
        assert not any(t.name == "gs_gym-build-ticks" for t in threading.enumerate())
    assert display.count == 0
