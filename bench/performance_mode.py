"""What Genesis's ``performance_mode`` buys and costs: build (compile) time and stepping speed, per task and n_envs.

    python bench/performance_mode.py --task go2-walk --n-envs 4096 --performance-mode 1 --out rows.jsonl
    python bench/performance_mode.py --table rows.jsonl

Each run builds one env with one worker process (so that every run can pick its own mode: Genesis takes it once per
process) and appends a JSON line: the build's wall time (cold the first time a (task, n_envs, mode) is built on a
machine, warm from the kernel cache afterwards; say which with ``--cache``) and, unless ``--build-only``, the
seconds per step with random actions, both wall and inside the worker (``worker_busy_seconds``, the simulation
without the transport). ``--table`` prints the collected lines as a Markdown table.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

from gs_gym.benchmark import NO_EPISODE_ENDS, machine_description, time_steps


def measure(task: str, num_envs: int, performance_mode: bool, seconds: float, repeats: int, build_only: bool) -> dict:
    from gs_gym import GenesisVectorEnv

    start = time.perf_counter()
    env = GenesisVectorEnv(
        num_envs,
        task,
        backend="gpu",
        num_workers=1,
        seed=0,
        copy=False,
        check_actions=False,
        performance_mode=performance_mode,
        task_kwargs=NO_EPISODE_ENDS.get(task, {}),
        verbose=False,
    )
    build_seconds = time.perf_counter() - start
    row = {"task": task, "n_envs": num_envs, "performance_mode": performance_mode, "build_s": build_seconds}
    try:
        if not build_only:
            env.reset(seed=0)
            timing = time_steps(
                env.step,
                num_envs,
                env.single_action_space.shape,
                env.main_device,
                seconds,
                repeats,
                probe=lambda: env.worker_busy_seconds[0],
            )
            wall = statistics.median(timing.seconds_per_step)
            row |= {
                "us_per_step": wall * 1e6,
                "worker_us_per_step": timing.probe_per_step * 1e6,
                "env_steps_per_s": num_envs / wall,
            }
    finally:
        env.close()
    return row


def table(path: str) -> str:
    with open(path) as file:
        rows = [json.loads(line) for line in file]
    lines = [
        "| task | n_envs | performance_mode | cache | build s | us/step (worker) | env-steps/s |",
        "|---|---:|---|---|---:|---:|---:|",
    ]
    for r in rows:
        step = f"{r['us_per_step']:.0f} ({r['worker_us_per_step']:.0f})" if "us_per_step" in r else "-"
        speed = f"{r['env_steps_per_s']:,.0f}" if "env_steps_per_s" in r else "-"
        lines.append(
            f"| {r['task']} | {r['n_envs']} | {r['performance_mode']} | {r['cache']} | {r['build_s']:.1f} "
            f"| {step} | {speed} |"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--task", default="go2-walk")
    parser.add_argument("--n-envs", type=int, default=4096)
    parser.add_argument("--performance-mode", type=int, choices=(0, 1), default=0)
    parser.add_argument("--cache", choices=("cold", "warm"), default="warm", help="recorded with the row")
    parser.add_argument("--build-only", action="store_true")
    parser.add_argument("--seconds", type=float, default=1.0)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--out", default="performance_mode.jsonl")
    parser.add_argument("--table", metavar="JSONL", help="print the table of collected rows and exit")
    args = parser.parse_args()
    if args.table:
        print(table(args.table))
        return
    row = measure(args.task, args.n_envs, bool(args.performance_mode), args.seconds, args.repeats, args.build_only)
    row |= {"cache": args.cache, "machine": machine_description("gpu")}
    print(json.dumps(row), flush=True)
    with open(args.out, "a") as handle:
        handle.write(json.dumps(row) + "\n")


if __name__ == "__main__":
    main()
