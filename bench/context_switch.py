"""What a second process on the same GPU costs per round trip, without Genesis: pipes and CUDA contexts alone.

    python bench/context_switch.py --out context_switch.json

Each round does what one vector-env step does around the simulation: the "parent" launches ``--kernels`` small
kernels and synchronizes, then the "worker" does the same (its share of a step), and the round ends. Variants:
  one process        both halves in one process (one CUDA context): the in-process env
  pipe only          two processes ping-pong over a Pipe, no GPU work: the transport's floor
  two processes      both halves, each in its own process and CUDA context, handing over through a Pipe
  two, worker only   as above, but only the worker touches the GPU (a parent idle on the GPU)
If ``two processes`` minus ``pipe only`` is far above ``one process``, the GPU pays for switching between the two
contexts (time slicing); CUDA MPS, which runs both processes in one context, removes it. Prints a table and writes
JSON (``--out``).
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import platform
import statistics
import time
from multiprocessing.connection import Connection

import torch


def _gpu_half(tensor: torch.Tensor | None, kernels: int) -> None:
    if tensor is None:
        return
    for _ in range(kernels):
        tensor.add_(1.0)
    torch.cuda.synchronize()


def _worker(conn: Connection, use_gpu: bool, kernels: int, numel: int) -> None:
    tensor = torch.zeros(numel, device="cuda") if use_gpu else None
    _gpu_half(tensor, kernels)  # create the context before the clock starts
    conn.send("ready")
    while conn.recv():
        _gpu_half(tensor, kernels)
        conn.send(True)


def _time_rounds(run_round, rounds: int, repeats: int) -> list[float]:
    for _ in range(max(10, rounds // 10)):
        run_round()
    results = []
    for _ in range(repeats):
        start = time.perf_counter()
        for _ in range(rounds):
            run_round()
        results.append((time.perf_counter() - start) / rounds)
    return results


def one_process(kernels: int, numel: int, rounds: int, repeats: int) -> list[float]:
    parent, worker = torch.zeros(numel, device="cuda"), torch.zeros(numel, device="cuda")
    return _time_rounds(lambda: (_gpu_half(parent, kernels), _gpu_half(worker, kernels)), rounds, repeats)


def two_processes(
    parent_gpu: bool, worker_gpu: bool, kernels: int, numel: int, rounds: int, repeats: int
) -> list[float]:
    ctx = mp.get_context("spawn")
    conn, child_conn = ctx.Pipe()
    child = ctx.Process(target=_worker, args=(child_conn, worker_gpu, kernels, numel), daemon=True)
    child.start()
    assert conn.recv() == "ready"
    tensor = torch.zeros(numel, device="cuda") if parent_gpu else None

    def run_round() -> None:
        _gpu_half(tensor, kernels)
        conn.send(True)
        conn.recv()

    try:
        return _time_rounds(run_round, rounds, repeats)
    finally:
        conn.send(False)
        child.join(10)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kernels", type=int, nargs="+", default=[1, 20], help="kernels per half-round")
    parser.add_argument("--numel", type=int, default=4096)
    parser.add_argument("--rounds", type=int, default=2000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--label", default="", help="recorded with the results (e.g. 'MPS on')")
    parser.add_argument("--out", default="context_switch.json")
    args = parser.parse_args()
    variants = {
        "one process": lambda k: one_process(k, args.numel, args.rounds, args.repeats),
        "pipe only": lambda k: two_processes(False, False, k, args.numel, args.rounds, args.repeats),
        "two processes": lambda k: two_processes(True, True, k, args.numel, args.rounds, args.repeats),
        "two, worker only": lambda k: two_processes(False, True, k, args.numel, args.rounds, args.repeats),
    }
    rows = []
    for kernels in args.kernels:
        for name, measure in variants.items():
            per_round = measure(kernels)
            rows.append(
                {
                    "variant": name,
                    "kernels_per_half": kernels,
                    "us_per_round": statistics.median(per_round) * 1e6,
                    "repeats_us": [s * 1e6 for s in per_round],
                }
            )
            print(f"{name:18s} kernels={kernels:3d} {rows[-1]['us_per_round']:9.1f} us/round", flush=True)
    result = {
        "label": args.label,
        "gpu": torch.cuda.get_device_name(0),
        "torch": torch.__version__,
        "python": platform.python_version(),
        "mps_pipe": os.environ.get("CUDA_MPS_PIPE_DIRECTORY"),
        "settings": {"numel": args.numel, "rounds": args.rounds, "repeats": args.repeats},
        "rows": rows,
    }
    with open(args.out, "w") as handle:
        json.dump(result, handle, indent=1)
    print(f"\n| variant ({args.label or 'default'}) | " + " | ".join(f"{k} kernels/half" for k in args.kernels) + " |")
    print("|---|" + "---:|" * len(args.kernels))
    for name in variants:
        cells = [f"{r['us_per_round']:.1f} us" for r in rows if r["variant"] == name]
        print(f"| {name} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
