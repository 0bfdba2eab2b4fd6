"""How long a CPU worker takes to start when forked from gs_gym's fork server (torch and Genesis imported once,
``gs_gym/transport/preload.py``) against spawned, in one process, alternating the two.

    python bench/worker_start.py [--rounds 3 --num-envs 8 --out bench/results/worker-start-cpu.json]

Each start builds a cart-pole env with one worker on the CPU backend, resets it and steps it once, then closes it;
the time is from the constructor to the end of the step. A spawned start is forced the way the env decides it: the
fork server serves only starts whose environment equals the one it started with, so a spawned round sets a variable
the server did not see (``GS_GYM_BENCH_SPAWN``). The first start, which also starts the server, is reported apart.
Kernel cache warm (run ``gs-gym compile --task cartpole --backend cpu`` first). Prints a table, writes JSON.
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


def start_once(num_envs: int) -> float:
    start = time.perf_counter()
    env = GenesisVectorEnv(num_envs, "cartpole", backend="cpu", num_workers=1, seed=0, forward_output=False)
    try:
        env.reset(seed=0)
        env.step(torch.zeros(num_envs, 1))
        return time.perf_counter() - start
    finally:
        env.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--num-envs", type=int, default=8)
    parser.add_argument("--out", default="worker-start-cpu.json")
    args = parser.parse_args()

    os.environ.pop("GS_GYM_BENCH_SPAWN", None)
    first = start_once(args.num_envs)  # starts the fork server too
    seconds: dict[str, list[float]] = {"fork server": [], "spawn": []}
    for index in range(args.rounds):
        for method in seconds:
            if method == "spawn":
                os.environ["GS_GYM_BENCH_SPAWN"] = str(index)
            seconds[method].append(start_once(args.num_envs))
            os.environ.pop("GS_GYM_BENCH_SPAWN", None)
            print(f"round {index}: {method} {seconds[method][-1]:.1f} s", flush=True)

    result = {
        "machine": {"cpus": os.cpu_count(), "platform": platform.platform(), "python": platform.python_version()},
        "num_envs": args.num_envs,
        "first_start_with_server_s": first,
        "seconds": seconds,
        "median_s": {method: statistics.median(values) for method, values in seconds.items()},
    }
    with open(args.out, "w") as out:
        json.dump(result, out, indent=1)
    print(f"\nfirst start (fork server starting too): {first:.1f} s")
    print("| start | median s | rounds s |\n|---|---|---|")
    for method, values in seconds.items():
        print(f"| {method} | {statistics.median(values):.1f} | {', '.join(f'{v:.1f}' for v in values)} |")
    print(f"\nwrote {args.out}")


if __name__ == "__main__":
    main()
