"""Shared fixtures. Env builds cost seconds (kernel cache warm) to minutes (cold), so envs are built once per
session and keyed by their settings; tests start with ``reset(seed=...)`` and never close a shared env.

Before the first test, every task's CPU kernels are compiled into the kernel cache (``gs-gym compile``), each task in
a process that exits: quadrants writes kernels only at exit, so otherwise every process that builds a scene while
the suite holds one (each worker, each example run) compiles it again. Tasks the cache records are skipped. With
pytest-xdist (``-n 2``, as CI runs) the controller compiles before it starts the test processes."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from gs_gym import GenesisVectorEnv
from gs_gym.precompile import Compiled, compile_tasks
from gs_gym.tasks import available_tasks

NUM_ENVS = 7  # odd, so that two workers get an uneven split (4 + 3)
MAX_EPISODE_STEPS = 8
TASK_KWARGS = {"max_episode_steps": MAX_EPISODE_STEPS}


GPU_TESTS = Path(__file__).resolve().parent / "gpu"


def pytest_sessionstart(session: pytest.Session) -> None:
    """Compile the CPU kernels of every task, once per run: not in pytest-xdist's test processes (their controller
    did), nor when only collecting or when every path asked for is under ``tests/gpu`` (their own backend)."""
    config = session.config
    if hasattr(config, "workerinput") or config.option.collectonly:
        return
    asked = [Path(config.invocation_params.dir, arg.split("::")[0]).resolve() for arg in config.args]
    if asked and all(path == GPU_TESTS or GPU_TESTS in path.parents for path in asked):
        return
    reporter = config.pluginmanager.get_plugin("terminalreporter")

    def show(result: Compiled) -> None:
        if result.status != "skipped":
            line = f"gs-gym compile: {result.task} {result.status} in {result.seconds:.0f} s"
            reporter.write_line(f"{line}, {result.error}" if result.error else line)

    compile_tasks(available_tasks(), "cpu", jobs=os.cpu_count() or 1, on_result=show)


@pytest.fixture(scope="session")
def shared_env() -> Iterator[Callable[..., GenesisVectorEnv]]:
    """``shared_env(num_workers, autoreset_mode, **options)``: a cartpole env on the CPU backend, built once per
    session for each combination."""
    built: dict[tuple[Any, ...], GenesisVectorEnv] = {}

    def get(num_workers: int, autoreset_mode: str = "next_step", **options: Any) -> GenesisVectorEnv:
        key = (num_workers, autoreset_mode, *sorted(options.items()))
        if key not in built:
            built[key] = GenesisVectorEnv(
                NUM_ENVS,
                "cartpole",
                backend="cpu",
                num_workers=num_workers,
                seed=0,
                autoreset_mode=autoreset_mode,
                task_kwargs=TASK_KWARGS,
                **options,
            )
        return built[key]

    yield get
    for env in built.values():
        env.close()
