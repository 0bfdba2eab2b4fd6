"""Torch operations per env step in process, split into the task's hooks and gs_gym's own (issue 14).

On a GPU nearly every torch operation is a kernel launch or a copy, and the step is host-bound, so the count is what
the wrapper costs. It is the same on any machine, so it is measured on the CPU backend (no GPU needed) with
``torch.utils._python_dispatch.TorchDispatchMode``: each operation is attributed to the innermost ``gs_gym`` frame
that issued it, ``gs_gym/tasks/`` (the task's hooks and Genesis's tensor glue) or the rest of ``gs_gym`` (shard and
env). Views (``view``, ``slice``, ``detach``, ...) are counted but launch nothing.

    python bench/step_ops.py            # prints a table, writes bench/results/step-ops-cpu.json
"""

from __future__ import annotations

import argparse
import collections
import json
import sys
from pathlib import Path

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from gs_gym import GenesisVectorEnv
from gs_gym.benchmark import machine_description

VIEWS = {"view", "_unsafe_view", "slice", "select", "detach", "alias", "expand", "reshape", "lift_fresh"}
NO_ENDS = {"max_episode_steps": 10**6, "angle_limit": 1e9}  # zero actions keep the cart on its track
SCENARIOS = {
    "next_step, no episode ends": dict(autoreset_mode="next_step", task_kwargs=NO_ENDS),
    "next_step, time limit of 4 steps": dict(autoreset_mode="next_step", task_kwargs={"max_episode_steps": 4}),
    "same_step, time limit of 4 steps": dict(autoreset_mode="same_step", task_kwargs={"max_episode_steps": 4}),
}
VARIANTS = {
    "copy=True (default)": {},
    "copy=False": dict(copy=False),
    "checks off": dict(check_actions=False, check_observations=False),
}


class OpCounter(TorchDispatchMode):
    """Counts operations by (where, name): where is "task" or "gs_gym" (see the module docstring)."""

    def __init__(self) -> None:
        super().__init__()
        self.counts: collections.Counter[tuple[str, str]] = collections.Counter()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        frame = sys._getframe(1)
        while frame is not None and "gs_gym/" not in frame.f_code.co_filename:
            frame = frame.f_back
        where = "task" if frame is not None and "gs_gym/tasks/" in frame.f_code.co_filename else "gs_gym"
        self.counts[(where, func.overloadpacket.__name__)] += 1
        return func(*args, **(kwargs or {}))


def count(env: GenesisVectorEnv, steps: int) -> dict[str, float]:
    env.reset(seed=0)
    actions = torch.zeros(env.action_space.shape)
    for _ in range(8):  # past the first steps' one-off work
        env.step(actions)
    with OpCounter() as counter:
        for _ in range(steps):
            env.step(actions)
    per_step = {"task": 0.0, "gs_gym": 0.0, "gs_gym launching": 0.0}
    for (where, name), number in counter.counts.items():
        per_step[where] += number / steps
        if where == "gs_gym" and name not in VIEWS:
            per_step["gs_gym launching"] += number / steps
    ours = sorted((name, number) for (where, name), number in counter.counts.items() if where == "gs_gym")
    per_step["gs_gym ops"] = {name: number / steps for name, number in ours}
    return per_step


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=40, help="counted steps")
    parser.add_argument("--out", type=Path, default=Path(__file__).parent / "results" / "step-ops-cpu.json")
    args = parser.parse_args()
    torch.set_num_threads(1)
    rows = []
    for scenario, scenario_kwargs in SCENARIOS.items():
        for variant, variant_kwargs in VARIANTS.items():
            env = GenesisVectorEnv(4, "cartpole", backend="cpu", num_workers=0, seed=0,
                                   **scenario_kwargs, **variant_kwargs)  # fmt: skip
            try:
                rows.append({"scenario": scenario, "variant": variant, **count(env, args.steps)})
            finally:
                env.close()
    machine = machine_description("cpu")
    result = {"task": "cartpole", "num_envs": 4, "steps": args.steps, "machine": machine, "rows": rows}
    args.out.write_text(json.dumps(result, indent=1))
    print(f"\ncartpole, 4 envs, in process: torch operations per step ({args.steps} steps), written to {args.out}")
    print(f"{'scenario':34s} {'variant':22s} {'task':>6s} {'gs_gym':>7s} {'gs_gym, not views':>18s}")
    for row in rows:
        print(f"{row['scenario']:34s} {row['variant']:22s} {row['task']:6.1f} {row['gs_gym']:7.1f} "
              f"{row['gs_gym launching']:18.1f}")  # fmt: skip


if __name__ == "__main__":
    sys.exit(main())
