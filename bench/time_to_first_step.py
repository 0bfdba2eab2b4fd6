"""Time from ``gym.make_vec`` to the first step returning, for the README's minimal example (issue 14, item 6).

    python bench/time_to_first_step.py --backend cpu      # on this kind of machine: one cold run, one warm run
    python bench/time_to_first_step.py --backend gpu      # on the GPU machine

Each measurement is a fresh Python process (this file with ``--child``) running the README's example:
``gym.make_vec("GenesisMultiGPU-v0", num_envs=64, task="cartpole", backend=..., seed=0)`` with ``num_workers`` left
at its default (one worker on the CPU backend, one per GPU), then ``reset(seed=0)`` and one ``step`` with
``torch.rand(64, 1) * 2 - 1``, then ``close``.

The caches: all runs of one invocation share one fresh, empty cache directory (``--cache-dir`` to choose it), given
to the child as ``QD_OFFLINE_CACHE_FILE_PATH`` (where quadrants keeps the kernels Genesis compiles; it is a field of
quadrants' compile config, read from ``QD_<FIELD>``, and ``gs_gym.tasks.runtime`` reads it too) and
``GS_CACHE_FILE_PATH`` (Genesis's own asset cache). So the first run starts cold, as a new user's very first run
does, and the following ``--warm-runs`` runs find what it compiled, as every later run does (the table shows the
median of those). Numba's cache of Genesis's helper functions lives next to the installed package and stays warm.

The split is what can be seen from the parent process, in order:
  interpreter      from launching the process to the script's first line (Python, site hooks)
  imports          ``import gymnasium`` and ``import torch``
  import gs_gym    importing the package (``make_vec`` would import it; done first here to hook the stages)
  make_vec ->      ``make_vec`` called until the workers' build display opens (option checks, spaces)
  worker start     display open until a worker reports it is importing Genesis (spawn, Python, torch, gs_gym)
  import genesis   until it reports building the scene (``import genesis`` and ``gs.init``)
  build            until it reports ready (scene build: kernel compilation when cold, cache loads when warm)
  handshake        until ``make_vec`` returns (buffers shared with the parent)
  reset, step      ``reset(seed=0)`` and the first ``step``
The stages are the ones the workers report to the build display (``BuildProgress.update``, wrapped in the child to
timestamp them); with several workers the slowest worker's times are shown. ``first step`` in the table is the sum
from ``import gs_gym`` to the end of the first step (what a script that starts with ``gym.make_vec`` waits for); the
total from launching the process is shown too. Writes JSON to ``--out``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

RESULT_MARK = "TIME_TO_FIRST_STEP_RESULT "
SPLIT = ("interpreter", "imports", "import gs_gym", "make_vec ->", "worker start", "import genesis", "build",
         "handshake", "reset", "step")  # fmt: skip


# -- the measured process ----------------------------------------------------------------------------------------


def child(args: argparse.Namespace) -> None:
    """The README's example, timed; prints one result line."""
    script_start = time.perf_counter()
    interpreter = time.time() - args.launched_at
    import gymnasium as gym
    import torch

    imports_done = time.perf_counter()
    import gs_gym  # noqa: F401 (make_vec would import it; importing it first lets the stages be hooked)
    from gs_gym.transport import progress

    events: list[tuple[float, int, str]] = []
    opened: list[float] = []
    original_init, original_update = progress.BuildProgress.__init__, progress.BuildProgress.update

    def init(self, names, *rest, **kwargs):
        opened.append(time.perf_counter())
        original_init(self, names, *rest, **kwargs)

    def update(self, row, stage):
        events.append((time.perf_counter(), row, stage))
        original_update(self, row, stage)

    progress.BuildProgress.__init__, progress.BuildProgress.update = init, update
    package_done = time.perf_counter()

    envs = gym.make_vec("GenesisMultiGPU-v0", num_envs=args.num_envs, task=args.task, backend=args.backend, seed=0)
    made = time.perf_counter()
    envs.reset(seed=0)
    reset_done = time.perf_counter()
    actions = torch.rand(args.num_envs, 1) * 2 - 1
    envs.step(actions)
    stepped = time.perf_counter()
    num_workers = envs.unwrapped.num_workers if hasattr(envs, "unwrapped") else None
    envs.close()

    stages: dict[str, float] = {}
    for when, _, stage in events:  # the latest row to reach each stage
        stages[stage] = max(stages.get(stage, when), when)
    result = {
        "interpreter": interpreter,
        "imports": imports_done - script_start,
        "import gs_gym": package_done - imports_done,
        "make_vec": made - package_done,
        "reset": reset_done - made,
        "step": stepped - reset_done,
        "display_opened": (opened[0] - package_done) if opened else None,
        "stages": {stage: when - package_done for stage, when in stages.items()},
        "stage_order": list(dict.fromkeys(stage for _, _, stage in events)),
        "num_workers": num_workers,
    }
    print(RESULT_MARK + json.dumps(result), flush=True)


# -- the parent: one process per measurement ---------------------------------------------------------------------


def split(result: dict[str, Any]) -> dict[str, float | None]:
    """The table's columns (seconds) from one child's result."""
    make_vec, stages = result["make_vec"], result["stages"]
    importing = stages.get("importing genesis")
    building = stages.get("building scene")
    ready = stages.get("ready")
    opened = result["display_opened"]
    parts = {
        "interpreter": result["interpreter"],
        "imports": result["imports"],
        "import gs_gym": result["import gs_gym"],
        "make_vec ->": opened,
        "worker start": None if importing is None or opened is None else importing - opened,
        "import genesis": None if building is None or importing is None else building - importing,
        "build": None if ready is None or building is None else ready - building,
        "handshake": None if ready is None else make_vec - ready,
        "reset": result["reset"],
        "step": result["step"],
    }
    if None in (opened, importing, building, ready):  # stages renamed or not reported: keep make_vec whole
        parts.update(
            {"make_vec ->": make_vec, "worker start": None, "import genesis": None, "build": None, "handshake": None}
        )
    return parts


def run_child(args: argparse.Namespace, cache_dir: Path) -> dict[str, Any]:
    environment = dict(os.environ)
    environment["QD_OFFLINE_CACHE_FILE_PATH"] = str(cache_dir / "quadrants")
    environment["GS_CACHE_FILE_PATH"] = str(cache_dir / "genesis")
    command = [
        sys.executable,
        __file__,
        "--child",
        "--backend",
        args.backend,
        "--num-envs",
        str(args.num_envs),
        "--task",
        args.task,
        "--launched-at",
        repr(time.time()),
    ]
    start = time.perf_counter()
    completed = subprocess.run(
        command, env=environment, capture_output=True, text=True, timeout=args.timeout, check=False
    )
    wall = time.perf_counter() - start
    lines = [line for line in completed.stdout.splitlines() if line.startswith(RESULT_MARK)]
    if completed.returncode != 0 or not lines:
        tail = (completed.stdout + completed.stderr)[-3000:]
        raise RuntimeError(f"the measured process failed (exit {completed.returncode}):\n{tail}")
    result = json.loads(lines[-1][len(RESULT_MARK) :])
    result["process_wall"] = wall
    result["split"] = split(result)
    result["to_first_step"] = result["import gs_gym"] + result["make_vec"] + result["reset"] + result["step"]
    result["from_launch_to_first_step"] = result["interpreter"] + result["imports"] + result["to_first_step"]
    return result


def machine_description(backend: str) -> dict[str, Any]:
    import importlib.metadata

    machine = {
        "python": platform.python_version(),
        "cpu_count": os.cpu_count(),
        "platform": platform.platform(),
        "backend": backend,
    }
    for package in ("torch", "genesis-world", "quadrants", "gymnasium"):
        try:
            machine[package] = importlib.metadata.version(package)
        except importlib.metadata.PackageNotFoundError:
            machine[package] = None
    if backend == "gpu":
        try:
            machine["gpu"] = subprocess.run(
                ["nvidia-smi", "--query-gpu=name,driver_version", "--format=csv,noheader"],
                capture_output=True,
                text=True,
                timeout=10,
                check=False,
            ).stdout.strip()
        except (OSError, subprocess.SubprocessError):
            machine["gpu"] = None
    return machine


def format_table(rows: list[dict[str, Any]]) -> str:
    def cell(value: float | None) -> str:
        return "-" if value is None else f"{value:.1f}"

    header = ["run", "cache", "make_vec to first step (s)", "launch to first step (s)", *SPLIT]
    lines = ["| " + " | ".join(header) + " |", "|---|---|" + "---:|" * (len(header) - 2)]
    for row in rows:
        cells = [row["run"], row["cache"], cell(row["to_first_step"]), cell(row["from_launch_to_first_step"])]
        cells += [cell(row["split"][name]) for name in SPLIT]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__.splitlines()[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--backend",
        choices=("cpu", "gpu"),
        default=None,
        help="Genesis backend (default: gpu when nvidia-smi finds one, else cpu)",
    )
    parser.add_argument("--num-envs", type=int, default=64, help="num_envs of the example")
    parser.add_argument("--task", default="cartpole", help="task of the example")
    parser.add_argument("--warm-runs", type=int, default=1, help="runs after the cold one (the median is shown)")
    parser.add_argument(
        "--no-cold",
        action="store_true",
        help="with --cache-dir: do not count the first run as cold (the directory is already warm)",
    )
    parser.add_argument(
        "--cache-dir",
        default=None,
        help="cache directory for the runs (default: a fresh temporary one, removed afterwards)",
    )
    parser.add_argument("--timeout", type=float, default=1200.0, help="seconds allowed per run")
    parser.add_argument(
        "--out", default=None, help="JSON path (default bench/results/time-to-first-step-{cpu,h200}.json)"
    )
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--launched-at", type=float, default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.backend is None:
        try:
            found = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, check=False).stdout
        except OSError:
            found = ""
        args.backend = "gpu" if "GPU" in found else "cpu"
    if args.child:
        child(args)
        return
    args.out = args.out or f"bench/results/time-to-first-step-{'h200' if args.backend == 'gpu' else 'cpu'}.json"

    temporary = None
    if args.cache_dir is None:
        temporary = tempfile.TemporaryDirectory(prefix="gs-gym-first-step-")
        cache_dir = Path(temporary.name)
    else:
        cache_dir = Path(args.cache_dir)
    plan = ([] if args.no_cold else ["cold"]) + ["warm"] * args.warm_runs
    report: dict[str, Any] = {
        "machine": machine_description(args.backend),
        "settings": {
            "example": f'gym.make_vec("GenesisMultiGPU-v0", num_envs={args.num_envs}, task="{args.task}", '
            f'backend="{args.backend}", seed=0); reset(seed=0); step(torch.rand({args.num_envs}, '
            f"1) * 2 - 1)",
            "cache_dir": "(a fresh temporary directory)" if args.cache_dir is None else str(cache_dir),
        },
        "runs": [],
    }
    try:
        for index, cache in enumerate(plan):
            print(f"run {index + 1}/{len(plan)} ({cache} cache) ...", flush=True)
            result = run_child(args, cache_dir)
            result.update(run=str(index + 1), cache=cache)
            report["runs"].append(result)
            print(
                f"  make_vec to first step {result['to_first_step']:.1f} s, launch to first step "
                f"{result['from_launch_to_first_step']:.1f} s",
                flush=True,
            )
            Path(args.out).parent.mkdir(parents=True, exist_ok=True)
            with open(args.out, "w") as handle:
                json.dump(report, handle, indent=1)
    finally:
        if temporary is not None:
            temporary.cleanup()

    rows = list(report["runs"])
    warm = [r for r in rows if r["cache"] == "warm"]
    if len(warm) > 1:  # a median row over the warm runs
        median = {"run": f"median of {len(warm)}", "cache": "warm"}
        for key in ("to_first_step", "from_launch_to_first_step"):
            median[key] = statistics.median(r[key] for r in warm)
        median["split"] = {
            name: statistics.median(r["split"][name] for r in warm)
            if all(r["split"][name] is not None for r in warm)
            else None
            for name in SPLIT
        }
        rows.append(median)
        report["warm_median"] = median
    with open(args.out, "w") as handle:
        json.dump(report, handle, indent=1)
    print(f"\n{args.backend} backend, {report['machine']['cpu_count']} CPU cores; seconds")
    print(format_table(rows))
    print(f"\nwrote {args.out}")


if __name__ == "__main__":
    main()
