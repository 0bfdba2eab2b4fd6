"""Where two paths of ``bench/go2_vs_reference.py`` spend the host's time, function by function, side by side.

Builds the paths in one process (as the benchmark does), steps each ``--warmup`` steps, then runs ``--steps`` steps of
each under cProfile, in ``--rounds`` interleaved rounds, and prints per function (file:line name) the host
microseconds per step of the first two paths (``tottime``: the function's own time, callees excluded), the functions
that differ most first. cProfile inflates every Python call, so read differences between paths, not absolute times.

Before that, without the profiler, the same rounds measure per path the wall and process (CPU) time per step and
what Python's garbage collector took (collections per generation and their time, from ``gc.callbacks``), first with
the collector as it is, then after ``gc.freeze()`` (every object alive then, Genesis's scene included, is left out
of later collections): time that cProfile gives to whichever function was running when a collection started.
A path named ``X+sync`` (plain timing only) is path X with the host waiting for the device's stream at the end of
every step, ``X+event`` the same waiting for an event recorded there, as gs_gym's step does once when a check is on;
their table rows add the microseconds that wait blocked.

    python bench/profile_paths.py --paths d "b'" --synced d --out profile-paths.json
"""

from __future__ import annotations

import argparse
import cProfile
import gc
import json
import pstats
import statistics
import time
from pathlib import Path
from typing import Any, Literal

import torch
from go2_vs_reference import PATH_ALIASES, RandomActions, Stepper, build_path, synchronize


def function_label(key: tuple[str, int, str]) -> str:
    filename, line, name = key
    parts = Path(filename).parts
    short = "/".join(parts[-2:]) if len(parts) > 1 else filename
    return f"{short}:{line}({name})"


class GcTimer:
    """Collections per generation and their seconds while active, from ``gc.callbacks``."""

    def __init__(self) -> None:
        self.counts = [0, 0, 0]
        self.seconds = 0.0
        self._start = 0.0

    def __call__(self, phase: str, info: dict) -> None:
        if phase == "start":
            self._start = time.perf_counter()
        else:
            self.seconds += time.perf_counter() - self._start
            self.counts[info["generation"]] += 1

    def __enter__(self) -> GcTimer:
        gc.callbacks.append(self)
        return self

    def __exit__(self, *exc_info: object) -> None:
        gc.callbacks.remove(self)


class SyncedStepper:
    """A path's stepper whose host waits for the device after each step, timing the wait: for the device's current
    stream (``wait="stream"``) or for an event recorded on it (``wait="event"``, as gs_gym's in-process step waits
    for its flags)."""

    def __init__(self, stepper: Stepper, wait: Literal["stream", "event"]) -> None:
        self.device, self.close, self._stepper = stepper.device, lambda: None, stepper
        self._event = torch.cuda.Event() if wait == "event" and self.device.type == "cuda" else None
        self._stream = wait == "stream" and self.device.type == "cuda"
        self.wait_seconds = 0.0
        self.steps = 0

    def step(self, actions: Any) -> None:
        self._stepper.step(actions)
        start = time.perf_counter()
        if self._event is not None:
            self._event.record()
            self._event.synchronize()
        elif self._stream:
            torch.cuda.current_stream(self.device).synchronize()
        self.wait_seconds += time.perf_counter() - start
        self.steps += 1


def plain_rounds(steppers: dict, actions: Any, steps: int, rounds: int) -> dict[str, dict[str, Any]]:
    """Per path, over ``rounds`` interleaved blocks of ``steps`` steps: wall and CPU us per step (each block's),
    garbage collections per 1000 steps by generation, and the collector's us per step."""
    rows: dict[str, dict[str, Any]] = {p: {"wall_us": [], "cpu_us": [], "gc_us": 0.0, "gc_counts": [0, 0, 0]}
                                       for p in steppers}  # fmt: skip
    for _ in range(rounds):
        for path, stepper in steppers.items():
            synchronize(stepper.device)
            wall, cpu = time.perf_counter(), time.process_time()
            with GcTimer() as collections:
                for _ in range(steps):
                    stepper.step(actions())
                synchronize(stepper.device)
            rows[path]["wall_us"].append((time.perf_counter() - wall) / steps * 1e6)
            rows[path]["cpu_us"].append((time.process_time() - cpu) / steps * 1e6)
            rows[path]["gc_us"] += collections.seconds / (steps * rounds) * 1e6
            rows[path]["gc_counts"] = [n + c for n, c in zip(rows[path]["gc_counts"], collections.counts, strict=True)]
    for path, row in rows.items():
        stepper = steppers[path]
        if isinstance(stepper, SyncedStepper):
            row["sync_wait_us"] = stepper.wait_seconds / stepper.steps * 1e6
            stepper.wait_seconds, stepper.steps = 0.0, 0
        row["gc_per_1000_steps"] = [n * 1000 / (steps * rounds) for n in row.pop("gc_counts")]
    return rows


def print_plain(title: str, rows: dict[str, dict[str, Any]]) -> None:
    print(f"{title}\n| path | wall us/step (median, min) | CPU us/step (median) | gc us/step "
          "| gc per 1000 steps (gen 0/1/2) | end-of-step wait us |\n|---|---:|---:|---:|---|---:|")  # fmt: skip
    for path, row in rows.items():
        gens = "/".join(f"{n:.0f}" for n in row["gc_per_1000_steps"])
        wait = f"{row['sync_wait_us']:.0f}" if "sync_wait_us" in row else ""
        print(f"| {path} | {statistics.median(row['wall_us']):.0f}, {min(row['wall_us']):.0f} "
              f"| {statistics.median(row['cpu_us']):.0f} | {row['gc_us']:.1f} | {gens} | {wait} |")  # fmt: skip


def print_functions(args: argparse.Namespace, per_step: dict[str, dict[str, float]], wall: dict[str, list[float]],
                    first: str, second: str) -> None:  # fmt: skip
    """The cProfile table: per function, the host us per step of ``first`` and ``second``, largest difference first."""
    labels = sorted(
        set(per_step[first]) | set(per_step[second]),
        key=lambda label: -abs(per_step[second].get(label, 0.0) - per_step[first].get(label, 0.0)),
    )
    print(f"{args.task}, {args.n_envs} envs: host us per step under cProfile, {args.rounds} x {args.steps} steps")
    print(f"wall per step (profiled): {first} {statistics.mean(wall[first]):.0f}, "
          f"{second} {statistics.mean(wall[second]):.0f}")  # fmt: skip
    total = {path: sum(per_step[path].values()) for path in (first, second)}
    print(f"sum of tottime: {first} {total[first]:.0f}, {second} {total[second]:.0f}")
    print(f"| function | {first} | {second} | difference |\n|---|---:|---:|---:|")
    for label in labels[: args.top]:
        a, b = per_step[first].get(label, 0.0), per_step[second].get(label, 0.0)
        print(f"| {label} | {a:.1f} | {b:.1f} | {b - a:+.1f} |")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--task", default="go2-walk")
    p.add_argument("--n-envs", type=int, default=4096)
    p.add_argument("--backend", default="gpu")
    p.add_argument("--paths", nargs="+", default=["d", "b'"], help="the function table compares the first two")
    p.add_argument("--warmup", type=int, default=50)
    p.add_argument("--steps", type=int, default=200)
    p.add_argument("--rounds", type=int, default=2, help="cProfile rounds (0: plain timing only)")
    p.add_argument("--synced", nargs="*", default=[], help="paths also timed as X+sync, X+event")
    p.add_argument("--plain-rounds", type=int, default=6, help="rounds of each plain timing (gc as is, gc frozen)")
    p.add_argument("--top", type=int, default=40)
    p.add_argument("--out", type=Path, default=None)
    args = p.parse_args()

    paths = [PATH_ALIASES.get(path, path) for path in args.paths]
    steppers = {path: build_path(args.task, args.n_envs, args.backend, path) for path in paths}
    device = next(iter(steppers.values())).device
    timed: dict[str, Any] = dict(steppers)
    for path in args.synced:
        timed[f"{path}+sync"] = SyncedStepper(steppers[PATH_ALIASES.get(path, path)], "stream")
        timed[f"{path}+event"] = SyncedStepper(steppers[PATH_ALIASES.get(path, path)], "event")
    actions = RandomActions(args.task, args.n_envs, device, 1.0)
    per_step: dict[str, dict[str, float]] = {path: {} for path in paths}
    wall: dict[str, list[float]] = {path: [] for path in paths}
    try:
        for stepper in steppers.values():
            for _ in range(args.warmup):
                stepper.step(actions())
        plain = {"gc as is": plain_rounds(timed, actions, args.steps, args.plain_rounds)}
        gc.freeze()
        plain["gc frozen"] = plain_rounds(timed, actions, args.steps, args.plain_rounds)
        gc.unfreeze()
        for title, rows in plain.items():
            print_plain(f"{args.task}, {args.n_envs} envs, no profiler, {title}:", rows)
        for _ in range(args.rounds):
            for path, stepper in steppers.items():
                profiler = cProfile.Profile()
                synchronize(device)
                start = time.perf_counter()
                profiler.enable()
                for _ in range(args.steps):
                    stepper.step(actions())
                profiler.disable()
                synchronize(device)
                wall[path].append((time.perf_counter() - start) / args.steps * 1e6)
                for key, (_, _, tottime, _, _) in pstats.Stats(profiler).stats.items():  # type: ignore[attr-defined]
                    label = function_label(key)
                    steps = args.steps * args.rounds
                    per_step[path][label] = per_step[path].get(label, 0.0) + tottime / steps * 1e6
    finally:
        for stepper in steppers.values():
            stepper.close()

    if len(paths) > 1 and args.rounds > 0:
        print_functions(args, per_step, wall, paths[0], paths[1])
    if args.out:
        args.out.write_text(json.dumps({"settings": vars(args) | {"out": str(args.out)}, "wall_us": wall,
                                        "tottime_us_per_step": per_step, "plain": plain}, indent=1))  # fmt: skip
        print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
