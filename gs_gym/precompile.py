"""Compile tasks' Genesis kernels ahead of the first env (``gs-gym compile``).

quadrants writes the kernels a process compiled into its cache (``KERNEL_CACHE``) only when that process exits
(Genesis's ``destroy``). So while one process holds an env, every other process that builds the same scene compiles
it again: a second cart-pole process on 2 cores took 76 s while the first still held its env, 23 s once it had
exited. Building each task once in a child that exits leaves the cache warm for every later process: worker
processes, a test run, jobs sharing a machine or a container image.

Each task is built in its own ``python -m gs_gym.precompile TASK BACKEND`` child (up to ``jobs`` at once), which
resets, steps until every episode is truncated (the masked-reset path) and resets again, so that the kernels of a
whole episode are compiled. A marker file in the cache records which tasks were compiled with which versions; a
task already recorded is skipped unless ``force``.
"""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from importlib import metadata
from pathlib import Path

from gs_gym.tasks.runtime import KERNEL_CACHE

VERSIONED_PACKAGES = ("gs-gym", "genesis-world", "quadrants", "torch")
"""The packages whose versions decide whether a task compiled earlier is still compiled."""
MARKER_NAME = "gs_gym-compiled.json"
COMPILE_NUM_ENVS = 2
COMPILE_EPISODE_STEPS = 2


@dataclasses.dataclass(frozen=True)
class Compiled:
    """One task's compile: ``status`` is "compiled", "skipped" (recorded in the marker) or "failed" (``error``
    holds the tail of the child's output)."""

    task: str
    backend: str
    status: str
    seconds: float = 0.0
    error: str = ""


def marker_key(task: str, backend: str) -> str:
    return f"{task}/{backend}"


def package_versions(packages: Sequence[str] = VERSIONED_PACKAGES) -> dict[str, str | None]:
    """Each installed package's version, None for those not installed."""
    versions: dict[str, str | None] = {}
    for package in packages:
        try:
            versions[package] = metadata.version(package)
        except metadata.PackageNotFoundError:
            versions[package] = None
    return versions


def read_marker(cache: Path = KERNEL_CACHE) -> dict[str, dict[str, str | None]]:
    """``{"task/backend": versions}`` of the tasks compiled into ``cache``; empty when there is no readable marker."""
    try:
        recorded = json.loads((cache / MARKER_NAME).read_text())
    except (OSError, ValueError):
        return {}
    return recorded if isinstance(recorded, dict) else {}


def pending_tasks(
    tasks: Sequence[str], backend: str, recorded: dict[str, dict[str, str | None]], versions: dict[str, str | None]
) -> list[str]:
    """The tasks of ``tasks`` that ``recorded`` does not list as compiled for ``backend`` with ``versions``."""
    return [task for task in tasks if recorded.get(marker_key(task, backend)) != versions]


def _record(task: str, backend: str, versions: dict[str, str | None], cache: Path) -> None:
    recorded = read_marker(cache)
    recorded[marker_key(task, backend)] = versions
    cache.mkdir(parents=True, exist_ok=True)
    (cache / MARKER_NAME).write_text(json.dumps(recorded, indent=1, sort_keys=True))


def _compile_in_child(task: str, backend: str, versions: dict[str, str | None], cache: Path) -> Compiled:
    start = time.perf_counter()
    child = subprocess.run(
        [sys.executable, "-m", "gs_gym.precompile", task, backend],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        check=False,
    )
    seconds = time.perf_counter() - start
    if child.returncode != 0:
        tail = "\n".join(child.stdout.splitlines()[-20:])
        return Compiled(task, backend, "failed", seconds, f"exit status {child.returncode}:\n{tail}")
    _record(task, backend, versions, cache)
    return Compiled(task, backend, "compiled", seconds)


def compile_tasks(
    tasks: Sequence[str],
    backend: str,
    *,
    jobs: int = 2,
    force: bool = False,
    on_result: Callable[[Compiled], None] | None = None,
    cache: Path = KERNEL_CACHE,
) -> list[Compiled]:
    """Compile ``tasks`` on ``backend`` ("cpu" or "gpu"), ``jobs`` children at once; results in ``tasks``' order.
    ``on_result`` is called as each finishes."""
    from gs_gym.tasks import resolve_task
    from gs_gym.vector.options import BACKENDS, as_choice, as_int

    for task in tasks:
        resolve_task(task)  # an unknown name fails here, naming the registered tasks
    as_choice("backend", backend, BACKENDS)
    jobs = as_int("jobs", jobs, 1)
    versions = package_versions()
    todo = list(tasks) if force else pending_tasks(tasks, backend, read_marker(cache), versions)
    results = {task: Compiled(task, backend, "skipped") for task in tasks if task not in todo}

    def run(task: str) -> Compiled:
        result = _compile_in_child(task, backend, versions, cache)
        if on_result is not None:
            on_result(result)
        return result

    if on_result is not None:
        for skipped in results.values():
            on_result(skipped)
    with ThreadPoolExecutor(max_workers=jobs) as pool:
        for result in pool.map(run, todo):
            results[result.task] = result
    return [results[task] for task in tasks]


def build_and_exercise(task: str, backend: str) -> None:
    """Build ``task``, reset, step until every episode has been truncated and reset, reset again, close."""
    import torch

    from gs_gym.vector.env import GenesisVectorEnv

    env = GenesisVectorEnv(
        COMPILE_NUM_ENVS,
        task,
        backend=backend,
        num_workers=0,
        seed=0,
        task_kwargs={"max_episode_steps": COMPILE_EPISODE_STEPS},
    )
    try:
        env.reset(seed=0)
        actions = torch.as_tensor(env.action_space.sample(), device=env.device).zero_()
        for _ in range(COMPILE_EPISODE_STEPS + 1):
            env.step(actions)
        env.reset(seed=1)
    finally:
        env.close()


if __name__ == "__main__":
    build_and_exercise(sys.argv[1], sys.argv[2])
