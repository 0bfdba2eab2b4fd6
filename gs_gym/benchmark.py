"""Throughput of one task through each path: the raw task, the in-process env and worker processes.

Used by ``gs-gym bench`` and ``bench/transport.py``. Random actions every step, a warm-up before timing, the
device synchronized before the clock stops, medians of repeats. Episode limits are lifted where the task allows
(cartpole, go2-walk), so that no configuration pays for resets that the raw task skips.
"""

from __future__ import annotations

import dataclasses
import os
import platform
import statistics
import time
from collections.abc import Callable, Sequence
from typing import Any

import torch

from gs_gym.tasks import TaskContext, resolve_task
from gs_gym.tasks.runtime import init_genesis
from gs_gym.vector.env import GenesisVectorEnv

StepFn = Callable[[torch.Tensor], Any]
NO_EPISODE_ENDS = {
    "cartpole": {"max_episode_steps": 10**9, "angle_limit": 1e9, "track_limit": 1e9},
    "go2-walk": {"max_episode_steps": 10**9, "max_roll": 1e9, "max_pitch": 1e9},
}


@dataclasses.dataclass(frozen=True)
class BenchConfig:
    """One path to measure: ``workers`` 0 means in-process; ``raw`` steps the task's hooks directly."""

    label: str
    workers: int = 0
    raw: bool = False
    host_buffers: bool = False


def standard_configs(backend: str, worker_counts: Sequence[int]) -> list[BenchConfig]:
    """The comparison: raw task, in-process env, then workers over device memory (and host memory on GPUs)."""
    configs = [BenchConfig("raw task", raw=True), BenchConfig("in-process env")]
    for count in worker_counts:
        if backend == "gpu":
            configs.append(BenchConfig(f"{count} worker(s), CUDA IPC", workers=count))
            configs.append(BenchConfig(f"{count} worker(s), host memory", workers=count, host_buffers=True))
        else:
            configs.append(BenchConfig(f"{count} worker(s), shared memory", workers=count))
    return configs


def synchronize(device: torch.device) -> None:
    """Wait for the work queued on ``device`` (a CUDA device; nothing to wait for on the CPU)."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)


@dataclasses.dataclass(frozen=True)
class Timing:
    seconds_per_step: list[float]
    """One entry per repeat."""
    probe_per_step: float | None
    """How much ``probe()`` grew per timed step (e.g. the workers' busy seconds), over all repeats."""


def time_steps(
    step: StepFn,
    num_envs: int,
    action_shape: tuple[int, ...],
    device: torch.device,
    seconds: float,
    repeats: int,
    warmup: int = 20,
    probe: Callable[[], float] | None = None,
) -> Timing:
    """Seconds per step for each of ``repeats`` runs of at least ``seconds`` with fresh random actions."""
    actions = torch.empty(num_envs, *action_shape, device=device)
    for _ in range(warmup):
        step(actions.uniform_(-1, 1))
    synchronize(device)
    results, total_steps = [], 0
    probe_start = probe() if probe is not None else 0.0
    for _ in range(repeats):
        steps, start = 0, time.perf_counter()
        while steps % 10 or time.perf_counter() - start < seconds:
            step(actions.uniform_(-1, 1))
            steps += 1
        synchronize(device)
        results.append((time.perf_counter() - start) / steps)
        total_steps += steps
    probe_per_step = None if probe is None else (probe() - probe_start) / total_steps
    return Timing(results, probe_per_step)


def _raw_task(task_name: str, num_envs: int, backend: str, task_kwargs: dict[str, Any]):
    init_genesis(backend)
    import genesis as gs

    task_class = resolve_task(task_name)
    context = TaskContext.create(num_envs, 0, gs.device, base_seed=0)
    task = task_class(task_class.make_config(**task_kwargs), context)
    task.build()
    task.reset_envs(torch.ones(num_envs, dtype=torch.bool, device=task.device))

    def step(actions: torch.Tensor) -> None:
        task.apply_actions(actions)
        task.simulate()
        task.read_state()
        task.observe(), task.compute_rewards(), task.compute_terminated(), task.compute_truncated()

    return step, task.device, task.close, None


def _vector_env(config: BenchConfig, task_name: str, num_envs: int, backend: str, task_kwargs: dict[str, Any]):
    env = GenesisVectorEnv(
        num_envs,
        task_name,
        backend=backend,
        num_workers=config.workers,
        seed=0,
        copy=False,
        check_actions=False,
        host_buffers=config.host_buffers,
        task_kwargs=task_kwargs,
        verbose=False,
    )
    env.reset(seed=0)
    return env.step, env.device, env.close, lambda: max(env.worker_busy_seconds)


def run_benchmark(
    task: str,
    backend: str,
    n_envs: Sequence[int],
    configs: Sequence[BenchConfig],
    seconds: float = 1.0,
    repeats: int = 3,
    on_row: Callable[[dict[str, Any]], None] | None = None,
) -> dict[str, Any]:
    """Measure every config at every ``n_envs``; returns the JSON-ready result (machine, settings, rows)."""
    task_kwargs = NO_EPISODE_ENDS.get(task, {})
    action_shape = resolve_task(task).spaces(resolve_task(task).make_config(**task_kwargs))[1].shape
    rows = []
    for num_envs in n_envs:
        for config in configs:
            if config.workers > num_envs:
                continue
            if config.raw:
                step, device, close, busy = _raw_task(task, num_envs, backend, task_kwargs)
            else:
                step, device, close, busy = _vector_env(config, task, num_envs, backend, task_kwargs)
            try:
                timing = time_steps(step, num_envs, action_shape, device, seconds, repeats, probe=busy)
            finally:
                close()
            median = statistics.median(timing.seconds_per_step)
            row = {
                "config": config.label,
                "workers": config.workers,
                "raw": config.raw,
                "n_envs": num_envs,
                "us_per_step": median * 1e6,
                "env_steps_per_s": num_envs / median,
                "repeats_us": [s * 1e6 for s in timing.seconds_per_step],
                "busy_us_per_step": None if timing.probe_per_step is None else timing.probe_per_step * 1e6,
            }
            rows.append(row)
            if on_row is not None:
                on_row(row)
    return {
        "machine": machine_description(backend),
        "task": task,
        "backend": backend,
        "settings": {
            "seconds": seconds,
            "repeats": repeats,
            "copy": False,
            "check_actions": False,
            "task_kwargs": task_kwargs,
        },
        "rows": rows,
    }


def machine_description(backend: str) -> dict[str, Any]:
    machine = {
        "python": platform.python_version(),
        "torch": torch.__version__,
        "cpu_count": os.cpu_count(),
        "processor": platform.processor() or platform.machine(),
    }
    if backend == "gpu" and torch.cuda.is_available():
        machine["gpu"] = torch.cuda.get_device_name(0)
    return machine


def format_table(result: dict[str, Any]) -> str:
    """A Markdown table: one row per n_envs, one column per config, env-steps/s (microseconds per step)."""
    labels = list(dict.fromkeys(row["config"] for row in result["rows"]))
    lines = ["| n_envs | " + " | ".join(labels) + " |", "|---:|" + "---:|" * len(labels)]
    for num_envs in dict.fromkeys(row["n_envs"] for row in result["rows"]):
        cells = []
        for label in labels:
            match = [r for r in result["rows"] if r["n_envs"] == num_envs and r["config"] == label]
            cells.append(f"{match[0]['env_steps_per_s']:,.0f} ({match[0]['us_per_step']:.0f} us)" if match else "-")
        lines.append(f"| {num_envs} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def plot(result: dict[str, Any], path: str) -> None:
    """PNG: env-steps/s against n_envs (one line per config) and against worker count (largest n_envs)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = result["rows"]
    figure, (by_envs, by_workers) = plt.subplots(1, 2, figsize=(11, 4))
    for label in dict.fromkeys(row["config"] for row in rows):
        points = sorted((r["n_envs"], r["env_steps_per_s"]) for r in rows if r["config"] == label)
        by_envs.plot([p[0] for p in points], [p[1] for p in points], marker="o", label=label)
    by_envs.set(
        xscale="log",
        yscale="log",
        xlabel="n_envs",
        ylabel="env-steps/s",
        title=f"{result['task']}, {result['backend']} backend",
    )
    by_envs.legend(fontsize=8)
    largest = max(row["n_envs"] for row in rows)
    workers = sorted(
        (r["workers"], r["env_steps_per_s"])
        for r in rows
        if r["n_envs"] == largest and not r["raw"] and "host memory" not in r["config"]
    )
    by_workers.plot([w for w, _ in workers], [s for _, s in workers], marker="o")
    by_workers.set(xlabel="worker processes (0 = in-process)", ylabel="env-steps/s", title=f"n_envs = {largest}")
    figure.tight_layout()
    figure.savefig(path, dpi=100)
    plt.close(figure)
