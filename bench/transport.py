"""Transport overhead on one GPU: the raw task against the vector env in-process, over CUDA IPC and over host memory.

    python bench/transport.py --n-envs 64 1024 4096 16384 --out bench/results/transport-h200.json

Per n_envs, side by side in one process tree on one GPU:
  A  the task stepped raw in-process (apply_actions, simulate, observe, rewards, dones; no autoreset)
  B  GenesisVectorEnv in-process (num_workers=0)
  C  GenesisVectorEnv, 1 worker, buffers shared through CUDA IPC
  D  GenesisVectorEnv, 1 worker, buffers in host shared memory (host_buffers=True)
Random actions every step, no episode ends (limits lifted, so that no config pays for resets the raw task skips),
warm kernel cache (the first build compiles), ``torch.cuda.synchronize()`` before the clock stops; vector envs run with copy=False and check_actions=False (the fast path a trainer would use).
Reports the median of repeats in env-steps/s and microseconds per step, prints a table and writes JSON.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import time

import torch

from gs_gym import GenesisVectorEnv
from gs_gym.tasks.cartpole import CartPole
from gs_gym.tasks.random import EnvRandom
from gs_gym.tasks.runtime import init_genesis


def time_steps(step, n_envs: int, seconds: float, repeats: int, device: str) -> list[float]:
    """Seconds per step for each repeat of ``seconds`` of stepping with random actions."""
    actions = torch.empty(n_envs, 1, device=device)
    for _ in range(20):
        step(actions.uniform_(-1, 1))
    torch.cuda.synchronize()
    results = []
    for _ in range(repeats):
        steps, start = 0, time.perf_counter()
        while True:
            step(actions.uniform_(-1, 1))
            steps += 1
            if steps % 50 == 0 and time.perf_counter() - start >= seconds:
                break
        torch.cuda.synchronize()
        results.append((time.perf_counter() - start) / steps)
    return results


def raw_task(n_envs: int, task_kwargs: dict):
    config = CartPole.make_config(**task_kwargs)
    task = CartPole(config, n_envs, torch.device("cuda:0"))
    task.build()
    rng = EnvRandom(n_envs, 0, task.device)
    rng.seed_range(0)
    task.reset_envs(torch.arange(n_envs, device=task.device), rng)

    def step(actions):
        task.apply_actions(actions)
        task.simulate()
        return task.observe(), task.compute_rewards(), task.compute_terminated(), task.compute_truncated()

    return step, task.close


def vector_env(n_envs: int, task_kwargs: dict, **kwargs):
    env = GenesisVectorEnv(n_envs, "cartpole", backend="gpu", seed=0, copy=False, check_actions=False,
                           task_kwargs=task_kwargs, **kwargs)
    env.reset(seed=0)
    return env.step, env.close


def write_json(args: argparse.Namespace, rows: list[dict]) -> None:
    result = {"machine": {"gpu": torch.cuda.get_device_name(0), "torch": torch.__version__,
                          "python": platform.python_version(), "cpu_count": os.cpu_count()},
              "task": "cartpole", "settings": {"seconds": args.seconds, "repeats": args.repeats,
                                               "copy": False, "check_actions": False}, "rows": rows}
    with open(args.out, "w") as handle:
        json.dump(result, handle, indent=1)


CONFIGS = {
    "A raw task": lambda n, kw: raw_task(n, kw),
    "B in-process env": lambda n, kw: vector_env(n, kw, num_workers=0),
    "C 1 worker, CUDA IPC": lambda n, kw: vector_env(n, kw, num_workers=1),
    "D 1 worker, host memory": lambda n, kw: vector_env(n, kw, num_workers=1, host_buffers=True),
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n-envs", type=int, nargs="+", default=[64, 1024, 4096, 16384])
    parser.add_argument("--seconds", type=float, default=1.0)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--out", default="transport.json")
    args = parser.parse_args()
    init_genesis("gpu")
    # No episode ends: A never resets, so resets (each a few Genesis kernels) would otherwise be charged to B-D.
    task_kwargs = {"max_episode_steps": 10**9, "angle_limit": 1e9, "track_limit": 1e9}
    rows = []
    for n_envs in args.n_envs:
        for name, make in CONFIGS.items():
            step, close = make(n_envs, task_kwargs)
            try:
                per_step = time_steps(step, n_envs, args.seconds, args.repeats, "cuda:0")
            finally:
                close()
            median = statistics.median(per_step)
            rows.append({"config": name, "n_envs": n_envs, "us_per_step": median * 1e6,
                         "env_steps_per_s": n_envs / median, "repeats_us": [s * 1e6 for s in per_step]})
            print(f"{name:26s} n_envs={n_envs:6d} {median * 1e6:9.1f} us/step {n_envs / median:14,.0f} env-steps/s",
                  flush=True)
            write_json(args, rows)  # after every row, so that a run cut short keeps what it measured
    print("\n| n_envs | " + " | ".join(CONFIGS) + " | C vs A | C/D |")
    print("|---:|" + "---:|" * (len(CONFIGS) + 2))
    for n_envs in args.n_envs:
        by = {r["config"]: r for r in rows if r["n_envs"] == n_envs}
        a, c, d = by["A raw task"], by["C 1 worker, CUDA IPC"], by["D 1 worker, host memory"]
        cells = [f"{by[name]['env_steps_per_s']:,.0f} ({by[name]['us_per_step']:.0f} us)" for name in CONFIGS]
        print(f"| {n_envs} | " + " | ".join(cells) +
              f" | {c['us_per_step'] - a['us_per_step']:+.0f} us | {d['us_per_step'] / c['us_per_step']:.2f}x |")


if __name__ == "__main__":
    main()
