"""What gs_gym's step costs beyond the task, measured with a task whose hooks do no work (issue 14).

``IdleTask`` has go2-walk's spaces (45 observations, 12 actions) and no scene: its hooks return preallocated tensors
and nothing ends an episode. Stepping it raw costs next to nothing, so the time of ``env.step`` is the wrapper's own:
Python, its torch operations (kernel launches on a GPU) and its one host wait per step. Variants: in process and with
one worker, with the default options, with the checks off, with ``copy=False``, under SAME_STEP, and in process with a
task that declares ``fresh_outputs`` (as every built-in task does: the env then clones nothing). The variants are
timed in interleaved rounds (``--repeats``) of ``--steps`` steps, the device synchronized at the ends of each block;
the table gives the median microseconds per step.

    python bench/wrapper_overhead.py                       # CPU backend, 4096 envs
    python bench/wrapper_overhead.py --spin-wait-us 20000  # its workers polling their pipes, as on a GPU
    python bench/wrapper_overhead.py --backend gpu --out bench/results/wrapper-overhead-h100.json
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import torch

from gs_gym import GenesisVectorEnv
from gs_gym.benchmark import machine_description, synchronize
from gs_gym.tasks.base import Task

VARIANTS: dict[str, dict[str, Any]] = {
    "in process": dict(num_workers=0),
    "in process, checks off": dict(num_workers=0, check_actions=False, check_observations=False),
    "in process, copy=False": dict(num_workers=0, copy=False),
    "in process, SAME_STEP": dict(num_workers=0, autoreset_mode="same_step"),
    "in process, fresh outputs": dict(num_workers=0, task="fresh"),
    "1 worker": dict(num_workers=1),
    "1 worker, checks off": dict(num_workers=1, check_actions=False, check_observations=False),
}


class IdleTask(Task):
    """go2-walk's spaces, no scene, hooks that return preallocated tensors; episodes never end."""

    name = "idle"

    @classmethod
    def spaces(cls, config: Any) -> tuple[gym.spaces.Box, gym.spaces.Box]:
        return gym.spaces.Box(-np.inf, np.inf, (45,), np.float32), gym.spaces.Box(-1.0, 1.0, (12,), np.float32)

    def build(self) -> None:
        n, device = self.context.num_envs, self.context.device
        self.observations = torch.zeros(n, 45, device=device)
        self.rewards = torch.zeros(n, device=device)
        self.terminated = torch.zeros(n, dtype=torch.bool, device=device)

    def apply_actions(self, actions: torch.Tensor) -> None:
        pass

    def simulate(self) -> None:
        pass

    def reset_envs(self, mask: torch.Tensor) -> None:
        pass

    def observe(self) -> torch.Tensor:
        return self.observations

    def compute_rewards(self) -> torch.Tensor:
        return self.rewards

    def compute_terminated(self) -> torch.Tensor:
        return self.terminated


class FreshIdleTask(IdleTask):
    """``IdleTask`` declaring ``fresh_outputs``, as the built-in tasks do. Its tensors are never written after
    ``build`` and nothing here writes into what a step returns, so the declaration changes no value: only whether the
    env clones."""

    fresh_outputs = True


TASKS = {"idle": IdleTask, "fresh": FreshIdleTask}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--backend", choices=("cpu", "gpu"), default="cpu")
    p.add_argument("--n-envs", type=int, default=4096)
    p.add_argument("--steps", type=int, default=500)
    p.add_argument("--repeats", type=int, default=7)
    p.add_argument("--variants", nargs="+", default=list(VARIANTS), choices=list(VARIANTS))
    p.add_argument(
        "--spin-wait-us",
        type=float,
        default=None,
        help="spin_wait_us of the worker variants (default: the env's, which spins on GPUs only; give 20000 to time a "
        "CPU backend's workers as they run on a GPU)",
    )
    p.add_argument("--out", type=Path, default=None, help="JSON results (default: print only)")
    args = p.parse_args()

    no_ends = {"max_episode_steps": 10**9}
    options = dict(backend=args.backend, seed=0, verbose=False, task_kwargs=no_ends)
    envs = {}
    for name in args.variants:
        variant = dict(VARIANTS[name])
        if variant["num_workers"] > 0:
            variant["spin_wait_us"] = args.spin_wait_us
        envs[name] = GenesisVectorEnv(args.n_envs, TASKS[variant.pop("task", "idle")], **options, **variant)
    try:
        device = next(iter(envs.values())).main_device
        actions = torch.zeros(args.n_envs, 12, device=device)
        seconds: dict[str, list[float]] = {name: [] for name in envs}
        for env in envs.values():
            env.reset(seed=0)
            for _ in range(50):
                env.step(actions)
        for _ in range(args.repeats):
            for name, env in envs.items():
                synchronize(device)
                start = time.perf_counter()
                for _ in range(args.steps):
                    env.step(actions)
                synchronize(device)
                seconds[name].append((time.perf_counter() - start) / args.steps)
    finally:
        for env in envs.values():
            env.close()

    us = {name: statistics.median(values) * 1e6 for name, values in seconds.items()}
    print(f"gs_gym's own step cost, a task with no scene, {args.n_envs} envs, {args.backend} backend")
    print("| variant | us/step (median) | min | max |\n|---|---:|---:|---:|")
    for name, values in seconds.items():
        print(f"| {name} | {us[name]:.1f} | {min(values) * 1e6:.1f} | {max(values) * 1e6:.1f} |")
    if args.out:
        result = {
            "machine": machine_description(args.backend),
            "settings": {k: str(v) if isinstance(v, Path) else v for k, v in vars(args).items()},
            "us_per_step": us,
            "rounds_us": {name: [s * 1e6 for s in values] for name, values in seconds.items()},
        }
        args.out.write_text(json.dumps(result, indent=1))
        print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
