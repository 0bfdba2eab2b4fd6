"""What fusing a task's torch math would save per step, before building it (issue 14).

On the lent GPUs a step is host-bound: each torch operation of a task hook costs 15-20 us of host time there, and
go2-walk's ``observe``, ``compute_rewards`` and ``compute_terminated`` are some 75 torch operations (counted on the
CPU). This script computes those three outputs from one fixed state (``read_state`` ran once; the scene is not stepped
while timing) in these ways:

- ``eager``: the hooks as the env calls them;
- ``compiled``: the same three calls under ``torch.compile`` (inductor: Triton kernels on a GPU, C++ on the CPU); after
  the timing, one real step and one more call tell whether its guards hold from step to step (no compiling again)
  and whether it then still computes what eager does;
- ``compiled, each hook``: each of the three compiled on its own, as an env that calls them apart would (three
  guard checks and three launches of compiled code per step instead of one);
- ``compiled, reduce-overhead`` (GPU only): the same with inductor's CUDA graphs;
- ``graph`` (GPU only): the three calls captured once in a CUDA graph and replayed. Inputs stay where they were at
  capture, which is what this measures; an env built on it would have ``read_state`` write into those tensors.

A variant that cannot be built on the machine (no Triton, no C++ compiler) is reported with its error.

Each variant runs ``--calls`` calls per block in interleaved rounds, the device synchronized at the ends of a block;
the table gives the median microseconds per call, CUDA kernels per call (GPU) and, per output, the largest
difference from eager (0: bit-identical; ``terminated`` counts the envs that differ). It does not change gs_gym.

    python bench/fused_hooks.py                                   # CPU backend, go2-walk, 64 envs
    python bench/fused_hooks.py --backend gpu --tasks go2-walk franka-reach --out bench/results/fused-hooks-h100.json
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

# before torch: else inductor's C++ build (the CPU backend) on Python 3.11 trips setuptools' check of distutils
import setuptools  # noqa: F401
import torch

from gs_gym import GenesisVectorEnv
from gs_gym.benchmark import machine_description, synchronize
from gs_gym.vector.capture import capture_graph, warm_up

Outputs = tuple[torch.Tensor, torch.Tensor, torch.Tensor]
T = TypeVar("T")
OUTPUT_NAMES = ("observations", "rewards", "terminated")


def build_task(task: str, n_envs: int, backend: str, warm_steps: int) -> tuple[Any, GenesisVectorEnv]:
    """The in-process env's task after ``warm_steps`` steps of random actions (robots moving, some reset)."""
    env = GenesisVectorEnv(n_envs, task, backend=backend, seed=0, verbose=False, num_workers=0)
    env.reset(seed=0)
    space = env.single_action_space
    low, high = (torch.as_tensor(bound, device=env.main_device) for bound in (space.low, space.high))
    generator = torch.Generator(env.main_device).manual_seed(0)
    for _ in range(warm_steps):
        noise = torch.rand((n_envs, *low.shape), generator=generator, device=env.main_device)
        env.step(low + (high - low) * noise)
    return env.local_task, env


def captured_graph(function: Callable[[], T], device: torch.device) -> Callable[[], T]:
    """One CUDA graph of ``function``'s torch work, warmed up and captured as the env's ``cuda_graph`` option does
    (``gs_gym.vector.capture``); replaying it recomputes what ``function`` returned at the capture into the same
    tensors, which the replay returns."""
    warm_up(function, device)
    graph, captured = capture_graph(function)

    def replay() -> T:
        graph.replay()
        return captured

    return replay


def variants(task: Any, device: torch.device) -> tuple[dict[str, Callable[[], Outputs]], dict[str, Any]]:
    """The ways to compute the three outputs that could be built here, and per variant the seconds it took to become
    callable (its first call included: compilation) or the error that stopped it."""

    def hooks() -> Outputs:
        return task.observe(), task.compute_rewards(), task.compute_terminated()

    def each_compiled() -> Callable[[], Outputs]:
        observe, rewards, terminated = (
            torch.compile(hook, dynamic=False) for hook in (task.observe, task.compute_rewards, task.compute_terminated)
        )
        return lambda: (observe(), rewards(), terminated())

    makers: dict[str, Callable[[], Callable[[], Outputs]]] = {
        "eager": lambda: hooks,
        "compiled": lambda: torch.compile(hooks, dynamic=False),
        "compiled, each hook": each_compiled,
    }
    if device.type == "cuda":
        makers["compiled, reduce-overhead"] = lambda: torch.compile(hooks, dynamic=False, mode="reduce-overhead")
        makers["graph"] = lambda: captured_graph(hooks, device)
    found: dict[str, Callable[[], Outputs]] = {}
    ready: dict[str, Any] = {}
    for name, make in makers.items():
        start = time.perf_counter()
        try:
            function = make()
            function()
            synchronize(device)
        except Exception as error:  # a variant this machine cannot build (no Triton, no compiler): the others still run
            traceback.print_exc()
            ready[name] = f"{type(error).__name__}: {error}"
            continue
        found[name] = function
        ready[name] = time.perf_counter() - start
    return found, ready


def differences(reference: Outputs, outputs: Outputs) -> dict[str, float]:
    """Largest absolute difference of each float output from ``reference``; for ``terminated``, envs that differ."""
    result = {}
    for name, ref, out in zip(OUTPUT_NAMES, reference, outputs, strict=True):
        if ref.dtype == torch.bool:
            result[name] = float((ref != out).sum())
        else:
            result[name] = float((ref.float() - out.float()).abs().max())
    return result


def kernels_per_call(function: Callable[[], Outputs], calls: int) -> float:
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as profiler:
        for _ in range(calls):
            function()
        torch.cuda.synchronize()
    kernels = [e for e in profiler.events() if e.device_type == torch.autograd.DeviceType.CUDA]
    return len(kernels) / calls


def after_a_step(env: GenesisVectorEnv, eager: Callable[[], Outputs], fused: Callable[[], Outputs]) -> dict[str, Any]:
    """``fused`` (compiled) after a real step, a new state object for tensors of the same shapes: how many graphs
    ``torch.compile`` compiled again (0: its guards hold from step to step) and its outputs' difference from eager."""
    from torch._dynamo.utils import counters

    env.step(torch.zeros((env.num_envs, *env.single_action_space.shape), device=env.main_device))
    before = counters["stats"]["unique_graphs"]
    outputs = fused()
    return {
        "graphs_compiled_after_a_step": counters["stats"]["unique_graphs"] - before,
        "max_difference_after_a_step": differences(eager(), outputs),
    }


def measure(task_name: str, n_envs: int, args: argparse.Namespace) -> dict[str, Any]:
    task, env = build_task(task_name, n_envs, args.backend, args.warm_steps)
    device = env.main_device
    try:
        found, ready = variants(task, device)
        reference = tuple(t.clone() for t in found["eager"]())
        seconds: dict[str, list[float]] = {name: [] for name in found}
        for _ in range(args.repeats):
            for name, function in found.items():
                synchronize(device)
                start = time.perf_counter()
                for _ in range(args.calls):
                    function()
                synchronize(device)
                seconds[name].append((time.perf_counter() - start) / args.calls)
        rows: dict[str, dict[str, Any]] = {name: {"error": ready[name]} for name in ready if name not in found}
        for name, function in found.items():
            rows[name] = {
                "us_per_call": statistics.median(seconds[name]) * 1e6,
                "repeats_us": [s * 1e6 for s in seconds[name]],
                "ready_s": ready[name],
                "max_difference": differences(reference, function()),
            }
            if device.type == "cuda":
                rows[name]["cuda_kernels_per_call"] = kernels_per_call(function, 5)
        if "compiled" in found:
            rows["compiled"].update(after_a_step(env, found["eager"], found["compiled"]))
        return rows
    finally:
        env.close()


def print_table(task: str, n_envs: int, rows: dict[str, dict[str, Any]]) -> None:
    print(f"\n{task}, {n_envs} envs: observe + compute_rewards + compute_terminated")
    print("| variant | us per call | vs eager | CUDA kernels per call | ready (s) | max difference from eager |")
    print("|---|---:|---:|---:|---:|---|")
    eager = rows["eager"]["us_per_call"]
    for name, row in rows.items():
        if "error" in row:
            print(f"| {name} | failed: {row['error'][:80]} | | | | |")
            continue
        kernels = row.get("cuda_kernels_per_call")
        diff = ", ".join(f"{k} {v:.3g}" for k, v in row["max_difference"].items())
        print(
            f"| {name} | {row['us_per_call']:.0f} | {row['us_per_call'] / eager:.2f} | "
            f"{'-' if kernels is None else f'{kernels:.0f}'} | {row['ready_s']:.1f} | {diff} |"
        )
    if "graphs_compiled_after_a_step" in rows.get("compiled", {}):
        after = rows["compiled"]
        diff = ", ".join(f"{k} {v:.3g}" for k, v in after["max_difference_after_a_step"].items())
        print(f"compiled, after a real step: {after['graphs_compiled_after_a_step']} graph(s) compiled again; {diff}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--backend", choices=("gpu", "cpu"), default="gpu" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--tasks", nargs="+", default=["go2-walk"], choices=("go2-walk", "franka-reach"))
    parser.add_argument("--n-envs", type=int, default=None, help="default 4096 on the GPU, 64 on the CPU")
    parser.add_argument("--calls", type=int, default=200, help="calls per timed block")
    parser.add_argument("--repeats", type=int, default=9, help="interleaved rounds")
    parser.add_argument("--warm-steps", type=int, default=50, help="env steps before the state is frozen")
    parser.add_argument("--out", type=Path, default=None, help="JSON path (default: print only)")
    args = parser.parse_args()
    n_envs = args.n_envs or (4096 if args.backend == "gpu" else 64)
    settings = {**vars(args), "n_envs": n_envs, "out": str(args.out)}
    tasks = {}
    for task in args.tasks:
        rows = measure(task, n_envs, args)
        tasks[task] = {str(n_envs): rows}
        print_table(task, n_envs, rows)
    results = {"tasks": tasks, "machine": machine_description(args.backend), "settings": settings}
    if args.out is not None:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(results, indent=1) + "\n")
        print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
