"""Where one worker's step spends the parent's time: wall, worker busy, step_async and step_wait, then cProfile.

    python bench/profile_step.py --n-envs 4096 --out profile.txt

Random actions every step on the env's main device, copy=False, check_actions=False (as ``bench/transport.py``).
Prints (and writes to ``--out``) the per-step means without the profiler, then the functions of the parent that
took the most time with it.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import pstats
import time

import torch

from gs_gym import GenesisVectorEnv
from gs_gym.benchmark import NO_EPISODE_ENDS


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--task", default="cartpole")
    parser.add_argument("--n-envs", type=int, default=4096)
    parser.add_argument("--backend", default="gpu")
    parser.add_argument("--steps", type=int, default=2000)
    parser.add_argument("--spin-wait-us", type=float, default=0.0, help="GenesisVectorEnv's spin_wait_us")
    parser.add_argument("--label", default="")
    parser.add_argument("--out", default="profile.txt")
    args = parser.parse_args()
    env = GenesisVectorEnv(
        args.n_envs,
        args.task,
        backend=args.backend,
        num_workers=1,
        seed=0,
        copy=False,
        check_actions=False,
        verbose=False,
        task_kwargs=NO_EPISODE_ENDS.get(args.task, {}),
        spin_wait_us=args.spin_wait_us,
    )
    env.reset(seed=0)
    actions = torch.empty(args.n_envs, *env.single_action_space.shape, device=env.main_device)
    for _ in range(200):
        env.step(actions.uniform_(-1, 1))
    split = {"actions": 0.0, "step_async": 0.0, "step_wait": 0.0}
    busy_before, start = env.worker_busy_seconds[0], time.perf_counter()
    for _ in range(args.steps):
        t0 = time.perf_counter()
        actions.uniform_(-1, 1)
        t1 = time.perf_counter()
        env.step_async(actions)
        t2 = time.perf_counter()
        env.step_wait()
        t3 = time.perf_counter()
        split["actions"] += t1 - t0
        split["step_async"] += t2 - t1
        split["step_wait"] += t3 - t2
    wall = time.perf_counter() - start
    busy = env.worker_busy_seconds[0] - busy_before
    lines = [
        f"{args.label} {args.task} n_envs={args.n_envs}, per step over {args.steps} steps (no profiler):",
        f"  wall {wall / args.steps * 1e6:.0f} us, worker busy {busy / args.steps * 1e6:.0f} us",
    ]
    lines += [f"  {name} {seconds / args.steps * 1e6:.0f} us" for name, seconds in split.items()]
    profiler = cProfile.Profile()
    profiler.enable()
    for _ in range(args.steps):
        env.step(actions.uniform_(-1, 1))
    profiler.disable()
    env.close()
    stream = io.StringIO()
    pstats.Stats(profiler, stream=stream).sort_stats("tottime").print_stats(25)
    text = "\n".join(lines) + "\n\n" + stream.getvalue()
    print(text)
    with open(args.out, "w") as handle:
        handle.write(text)


if __name__ == "__main__":
    main()
