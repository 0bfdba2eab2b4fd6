"""Transport overhead on one GPU: the raw task against the vector env in-process, over CUDA IPC and over host memory.

    python bench/transport.py --n-envs 64 1024 4096 16384 --out bench/results/transport-h200.json

Per n_envs, side by side in one process tree on one GPU (``gs_gym.benchmark`` does the measuring):
  raw task                     the task's hooks stepped in-process (no autoreset)
  in-process env               GenesisVectorEnv(num_workers=0)
  1 worker(s), CUDA IPC        one worker, buffers shared through CUDA IPC
  1 worker(s), host memory     one worker, buffers in host shared memory (host_buffers=True)
Prints a table and writes JSON after every row (a run cut short keeps what it measured). For the worker paths it
also reports the worker's busy time per step (``GenesisVectorEnv.worker_busy_seconds``): the step's wall time minus
that is what the transport costs (pipe, wake-ups, the parent's action copies and gathers). ``--only`` picks configs
by their order above (e.g. ``--only 2 3`` for the two worker paths, as when re-running them under CUDA MPS).
"""

from __future__ import annotations

import argparse
import json

from gs_gym.benchmark import format_table, run_benchmark, standard_configs


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n-envs", type=int, nargs="+", default=[64, 1024, 4096, 16384])
    parser.add_argument("--seconds", type=float, default=1.0)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--out", default="transport.json")
    parser.add_argument("--only", type=int, nargs="+", default=None, help="config numbers (0-3) to run")
    parser.add_argument("--label", default="", help="recorded with the results (e.g. 'MPS on')")
    args = parser.parse_args()
    rows: list[dict] = []

    def record(row: dict) -> None:
        rows.append(row)
        busy = "" if row["busy_us_per_step"] is None else f" (worker busy {row['busy_us_per_step']:.1f} us)"
        print(
            f"{row['config']:28s} n_envs={row['n_envs']:6d} {row['us_per_step']:9.1f} us/step "
            f"{row['env_steps_per_s']:14,.0f} env-steps/s{busy}",
            flush=True,
        )
        with open(args.out, "w") as handle:
            json.dump({"partial": True, "rows": rows}, handle, indent=1)

    configs = standard_configs("gpu", [1])
    if args.only is not None:
        configs = [configs[i] for i in args.only]
    result = run_benchmark("cartpole", "gpu", args.n_envs, configs, args.seconds, args.repeats, on_row=record)
    result["label"] = args.label
    with open(args.out, "w") as handle:
        json.dump(result, handle, indent=1)
    print(f"\n{args.label}\n" + format_table(result))
    print("\n| config | n_envs | us per step | worker busy us | transport us |\n|---|---:|---:|---:|---:|")
    for row in result["rows"]:
        if row["busy_us_per_step"] is not None:
            busy = row["busy_us_per_step"]
            print(
                f"| {row['config']} | {row['n_envs']} | {row['us_per_step']:.0f} | {busy:.0f} | "
                f"{row['us_per_step'] - busy:.0f} |"
            )


if __name__ == "__main__":
    main()
