"""Where two paths of ``bench/go2_vs_reference.py`` spend the host's time, function by function, side by side.

Builds the paths in one process (as the benchmark does), steps each ``--warmup`` steps, then runs ``--steps`` steps of
each under cProfile, in ``--rounds`` interleaved rounds, and prints per function (file:line name) the host
microseconds per step of each path (``tottime``: the function's own time, callees excluded), the functions that
differ most first. cProfile inflates every Python call, so read differences between paths, not absolute times.

    python bench/profile_paths.py --paths d "b'" --out profile-paths.json
"""

from __future__ import annotations

import argparse
import cProfile
import json
import pstats
import time
from pathlib import Path

from go2_vs_reference import PATH_ALIASES, RandomActions, build_path, synchronize


def function_label(key: tuple[str, int, str]) -> str:
    filename, line, name = key
    parts = Path(filename).parts
    short = "/".join(parts[-2:]) if len(parts) > 1 else filename
    return f"{short}:{line}({name})"


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--task", default="go2-walk")
    p.add_argument("--n-envs", type=int, default=4096)
    p.add_argument("--backend", default="gpu")
    p.add_argument("--paths", nargs=2, default=["d", "b'"])
    p.add_argument("--warmup", type=int, default=50)
    p.add_argument("--steps", type=int, default=200)
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--top", type=int, default=40)
    p.add_argument("--out", type=Path, default=None)
    args = p.parse_args()

    paths = [PATH_ALIASES.get(path, path) for path in args.paths]
    steppers = {path: build_path(args.task, args.n_envs, args.backend, path) for path in paths}
    device = next(iter(steppers.values())).device
    actions = RandomActions(args.task, args.n_envs, device, 1.0)
    per_step: dict[str, dict[str, float]] = {path: {} for path in paths}
    wall: dict[str, list[float]] = {path: [] for path in paths}
    try:
        for stepper in steppers.values():
            for _ in range(args.warmup):
                stepper.step(actions())
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

    first, second = paths
    labels = sorted(
        set(per_step[first]) | set(per_step[second]),
        key=lambda label: -abs(per_step[second].get(label, 0.0) - per_step[first].get(label, 0.0)),
    )
    print(f"{args.task}, {args.n_envs} envs: host us per step under cProfile, {args.rounds} x {args.steps} steps")
    print(f"wall per step (profiled): {first} {sum(wall[first]) / len(wall[first]):.0f}, "
          f"{second} {sum(wall[second]) / len(wall[second]):.0f}")  # fmt: skip
    total = {path: sum(per_step[path].values()) for path in paths}
    print(f"sum of tottime: {first} {total[first]:.0f}, {second} {total[second]:.0f}")
    print(f"| function | {first} | {second} | difference |\n|---|---:|---:|---:|")
    for label in labels[: args.top]:
        a, b = per_step[first].get(label, 0.0), per_step[second].get(label, 0.0)
        print(f"| {label} | {a:.1f} | {b:.1f} | {b - a:+.1f} |")
    if args.out:
        args.out.write_text(json.dumps({"settings": vars(args) | {"out": str(args.out)}, "wall_us": wall,
                                        "tottime_us_per_step": per_step}, indent=1))  # fmt: skip
        print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
