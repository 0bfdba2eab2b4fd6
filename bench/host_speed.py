"""Is a worker process's host slower than the parent's? (issue 14: a worker's step takes 2-13% more host time than
the same step in process, evenly over every task hook, with or without CUDA MPS and spinning.)

Times the same host work in this process and in spawned children, alternately: a pure-Python loop, and small CUDA
kernel launches (host time only: ``--launches`` additions to a 4096-element tensor, then one synchronize). Children:
``worker env`` is spawned with the variables gs_gym gives a GPU worker (``CUDA_VISIBLE_DEVICES=GPU-<uuid>``,
``QD_VISIBLE_DEVICE=0``), ``plain child`` with this process's own, and ``worker env, parent spins`` as the first while
this process polls a pipe the whole time, as the parent of a GPU worker does by default. No Genesis.

    python bench/host_speed.py --out host_speed.json
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import statistics
import sys
import time
from multiprocessing.connection import Connection
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout without installing

from gs_gym.transport.devices import cuda_uuid
from gs_gym.transport.launch import applied_environment


def python_loop(iterations: int) -> float:
    """Seconds for ``iterations`` calls of a small Python function (attribute reads, a dict, arithmetic)."""

    def work(values: dict[str, float], x: float) -> float:
        return values["a"] * x + values.get("b", 0.0)

    values = {"a": 1.5, "b": 2.0}
    start = time.perf_counter()
    total = 0.0
    for i in range(iterations):
        total += work(values, float(i))
    return time.perf_counter() - start


def launches(count: int) -> float:
    """Host seconds for ``count`` kernel launches (the GPU keeps up: each kernel takes a few microseconds)."""
    tensor = torch.zeros(4096, device="cuda")
    torch.cuda.synchronize()
    start = time.perf_counter()
    for _ in range(count):
        tensor.add_(1.0)
    elapsed = time.perf_counter() - start
    torch.cuda.synchronize()
    return elapsed


def measure(iterations: int, count: int) -> dict[str, float]:
    python_loop(iterations // 10)
    launches(count // 10)
    return {"python_us": python_loop(iterations) / iterations * 1e6, "launch_us": launches(count) / count * 1e6}


def _child(conn: Connection, iterations: int, count: int) -> None:
    measure(iterations, count)  # CUDA context and warm-up
    while conn.recv():
        conn.send(measure(iterations, count))


class Child:
    """A spawned process, started with ``environment`` applied, that runs ``measure`` each time it is asked."""

    def __init__(self, environment: dict[str, str], iterations: int, count: int) -> None:
        ctx = mp.get_context("spawn")
        with applied_environment(environment):
            self.conn, child_conn = ctx.Pipe()
            self.process = ctx.Process(target=_child, args=(child_conn, iterations, count), daemon=True)
            self.process.start()

    def measure(self, spin: bool) -> dict[str, float]:
        self.conn.send(True)
        if spin:
            while not self.conn.poll(0):
                pass
        return self.conn.recv()

    def close(self) -> None:
        self.conn.send(False)
        self.process.join(10)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--iterations", type=int, default=2_000_000)
    parser.add_argument("--launches", type=int, default=20_000)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--out", default="host_speed.json")
    args = parser.parse_args()
    worker_env = {"CUDA_VISIBLE_DEVICES": f"GPU-{cuda_uuid(0)}", "QD_VISIBLE_DEVICE": "0"}
    measure(args.iterations, args.launches)
    worker_like, plain = (Child(env, args.iterations, args.launches) for env in (worker_env, {}))
    children = {
        "worker env": (worker_like, False),
        "plain child": (plain, False),
        "worker env, parent spins": (worker_like, True),
    }
    rows: dict[str, list[dict[str, float]]] = {"this process": [], **{name: [] for name in children}}
    for _ in range(args.repeats):
        rows["this process"].append(measure(args.iterations, args.launches))
        for name, (child, spin) in children.items():
            rows[name].append(child.measure(spin))
    worker_like.close()
    plain.close()
    table = {
        name: {key: statistics.median(r[key] for r in results) for key in ("python_us", "launch_us")}
        for name, results in rows.items()
    }
    result = {
        "gpu": torch.cuda.get_device_name(0),
        "cpu_count": os.cpu_count(),
        "settings": vars(args),
        "median": table,
        "rounds": rows,
    }
    Path(args.out).write_text(json.dumps(result, indent=1))
    print("| process | Python call (us) | kernel launch, host (us) |\n|---|---:|---:|")
    for name, values in table.items():
        print(f"| {name} | {values['python_us']:.3f} | {values['launch_us']:.2f} |")


if __name__ == "__main__":
    main()
