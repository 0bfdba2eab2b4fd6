"""Start-up progress and worker logging with real worker processes: stand-in shards (no Genesis) for the message
flow, build timeouts and crashes; cartpole for what a user sees (``verbose``) and for Genesis's forwarded level."""

from __future__ import annotations

import logging
import os
import re
import signal
import time
from collections.abc import Callable, Sequence

import pytest
import torch

from gs_gym import BuildError, GenesisVectorEnv, WorkerCrashedError, WorkerTimeoutError
from gs_gym.tasks.runtime import KERNEL_CACHE
from gs_gym.transport.buffers import Handshake, ShardBuffers
from gs_gym.transport.pool import WorkerLaunch, WorkerPool
from gs_gym.transport.progress import READY, STOPPED, BuildProgress
from tests.faults.faulty_task import FaultyCartPole

NOTICE = (
    f"gs_gym: the first build of a scene compiles Genesis kernels (minutes); later builds load them from {KERNEL_CACHE}"
)
ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
HEARTBEAT = re.compile(r" \(\d+ s\)$")


class Recording(BuildProgress):
    """Records each change as ``(row name, stage)``."""

    def __init__(self, names: Sequence[str]) -> None:
        super().__init__(names)
        self.shown: list[tuple[str, str]] = []

    def _show(self, row: int, stage: str, elapsed: float) -> None:
        self.shown.append((self.names[row], stage))


class Recorder:
    """A ``ProgressFactory`` that keeps every display it opened."""

    def __init__(self) -> None:
        self.displays: list[Recording] = []

    def __call__(self, names: Sequence[str]) -> Recording:
        self.displays.append(Recording(names))
        return self.displays[-1]


def stand_in_factory(stages: Sequence[str], then: str = "return") -> Callable[[Callable[[str], None]], object]:
    """A shard factory that reports ``stages``, then returns a shard that does nothing (``"return"``), exits with
    code 3 (``"exit"``) or keeps reporting its last stage for ten minutes first (``"keep-reporting"``). Defined in
    a function so that cloudpickle sends it by value."""

    class StandInShard:
        def __init__(self) -> None:
            self.buffers = ShardBuffers.allocate(1, (1,), (1,), torch.device("cpu"))
            self.buffers.share()

        def handshake(self) -> Handshake:
            return Handshake.export(self.buffers, None, torch.device("cpu"))

        def step(self) -> None: ...
        def reset(self, *args: object) -> None: ...
        def call(self, *args: object) -> None: ...
        def get_attr(self, *args: object) -> None: ...
        def set_attr(self, *args: object) -> None: ...
        def set_episode_steps(self, *args: object) -> None: ...
        def render(self) -> None: ...
        def check_step(self) -> None: ...
        def close(self) -> None: ...

    def factory(report: Callable[[str], None]) -> StandInShard:
        for stage in stages:
            report(stage)
        if then == "exit":
            os._exit(3)
        if then == "keep-reporting":
            deadline = time.monotonic() + 600.0
            while time.monotonic() < deadline:
                report(stages[-1])
                time.sleep(0.05)
        return StandInShard()

    return factory


def launches(count: int, factory: Callable[..., object]) -> list[WorkerLaunch]:
    return [WorkerLaunch(label="cpu", environment={}, shard_factory=factory) for _ in range(count)]


STAGES = ("importing genesis", "building scene")


def test_pool_consumes_the_stages_and_shows_them_again_on_restart():
    recorder = Recorder()
    pool = WorkerPool(launches(2, stand_in_factory(STAGES)), build_timeout=120.0, progress=recorder)
    try:
        assert [handshake.pid for handshake in pool.handshakes] == pool.pids
        (display,) = recorder.displays
        for name in ("worker 0 (cpu)", "worker 1 (cpu)"):
            assert [stage for row, stage in display.shown if row == name] == [*STAGES, READY]
        assert display.stages == [READY, READY]

        os.kill(pool.pids[1], signal.SIGKILL)
        pool.restart(1)
        assert pool.handshakes[1].pid == pool.pids[1]
        assert recorder.displays[1].shown == [("worker 1 (cpu)", stage) for stage in (*STAGES, READY)]
    finally:
        pool.close()


def test_statuses_do_not_extend_the_build_timeout():
    """The stand-in reports a status every 50 ms for ten minutes: were statuses to extend the timeout, the build
    would succeed after ten minutes instead of timing out. 30 s leaves a loaded machine ample time to start it."""
    recorder = Recorder()
    with pytest.raises(WorkerTimeoutError, match=r"^worker 0 \(cpu\): no answer to build within 30 s$"):
        WorkerPool(launches(1, stand_in_factory(STAGES, then="keep-reporting")), build_timeout=30.0, progress=recorder)
    assert recorder.displays[0].shown == [("worker 0 (cpu)", stage) for stage in (*STAGES, STOPPED)]


def test_a_crash_after_a_status_is_reported_at_once():
    recorder = Recorder()
    with pytest.raises(
        WorkerCrashedError, match=r"^worker 0 \(cpu\): worker process \d+ exited with code 3 during build"
    ):
        WorkerPool(launches(1, stand_in_factory(STAGES[:1], then="exit")), build_timeout=120.0, progress=recorder)
    assert recorder.displays[0].shown == [("worker 0 (cpu)", "importing genesis"), ("worker 0 (cpu)", STOPPED)]


def worker_messages(caplog: pytest.LogCaptureFixture, name: str) -> list[str]:
    return [ANSI.sub("", r.getMessage()) for r in caplog.records if r.name == name and r.worker == 0]


def test_verbose_build_shows_each_stage_and_logs_the_workers_output(capsys, caplog):
    caplog.set_level(logging.INFO, logger="gs_gym.worker")
    env = GenesisVectorEnv(
        2, "cartpole", backend="cpu", num_workers=1, seed=0, verbose=True, genesis_logging_level="info"
    )
    try:
        err = capsys.readouterr().err
        # heartbeats ("building scene (12 s)") come with stages that last 10 s or more: on a cold or busy machine
        shown = [line for line in err.splitlines() if line.startswith("gs_gym") and not HEARTBEAT.search(line)]
        assert shown[:-1] == [
            NOTICE,
            "gs_gym worker 0 (cpu): starting",
            "gs_gym worker 0 (cpu): importing genesis",
            "gs_gym worker 0 (cpu): building scene",
        ]
        assert re.fullmatch(r"gs_gym worker 0 \(cpu\): ready after \d+\.\d s", shown[-1]), shown[-1]
        assert "[gs_gym worker 0]" not in err  # pytest's handlers took the records: the fallback stayed quiet

        running = re.compile(r"\[Genesis\] \[\d\d:\d\d:\d\d\] \[INFO\] Running on \[.+\] with backend gs\.cpu\. .*")
        deadline = time.monotonic() + 30.0  # the output thread logs on its own schedule
        while not any(running.fullmatch(m) for m in worker_messages(caplog, "gs_gym.worker.0")):
            assert time.monotonic() < deadline, worker_messages(caplog, "gs_gym.worker.0")
            time.sleep(0.1)
    finally:
        env.close()


def test_quiet_build_shows_nothing_and_genesis_stays_at_warning(capsys, caplog):
    caplog.set_level(logging.INFO, logger="gs_gym.worker")
    env = GenesisVectorEnv(2, "cartpole", backend="cpu", num_workers=1, seed=0, verbose=False)
    env.close()  # the worker exits: its output is read to the end
    captured = capsys.readouterr()
    assert [line for line in (captured.out + captured.err).splitlines() if "gs_gym" in line] == []
    assert [m for m in worker_messages(caplog, "gs_gym.worker.0") if "[INFO]" in m] == []


def test_in_process_build_shows_the_same_stages(capsys):
    message = (
        "worker 0 (in-process): RuntimeError: faulty-cartpole: injected build fault at build (env_offset 0) "
        "(during build)"
    )
    with pytest.raises(BuildError, match=f"^{re.escape(message)}$"):
        GenesisVectorEnv(2, FaultyCartPole, backend="cpu", num_workers=0, verbose=True, task_kwargs={"fault": "build"})
    err = capsys.readouterr().err
    # heartbeats of stages that last 10 s or more (a loaded machine importing Genesis) are the display's own test's
    shown = [line for line in err.splitlines() if line.startswith("gs_gym") and not HEARTBEAT.search(line)]
    assert shown == [
        NOTICE,
        "gs_gym in-process (cpu): starting",
        "gs_gym in-process (cpu): importing genesis",
        "gs_gym in-process (cpu): building scene",
        "gs_gym in-process (cpu): stopped",
    ]
