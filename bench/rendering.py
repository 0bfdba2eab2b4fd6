"""What rendering costs the step: no render mode, a camera that is never used, and a render every k steps.

    python bench/rendering.py                                   # CPU backend: cartpole, 16 envs, one worker
    python bench/rendering.py --backend gpu --n-envs 4096 --render-every 100 --out rendering-h200.json

Three envs of the same task, built one after the other (one worker each, ``--num-workers``), stepped with fresh
random actions in ``--repeats`` interleaved rounds of ``--steps`` steps (a slow spell of the machine hits every path
alike; the device is synchronized at the ends of a round only):

  off        ``render_mode=None``: no camera exists (the default)
  camera     ``render_mode="rgb_array"``, ``render()`` never called: what a camera costs while it is not used
  every-k    ``render_mode="rgb_array"``, ``render()`` after every ``--render-every``-th step

Prints us per step (medians) and the per-round ratios against ``off`` (medians), and for ``every-k`` what one
``render()`` costs in the parent against the worker's own time for it (the task's camera; both means): the
difference is what bringing the frames over costs (the shared frame buffer and the parent's copies). Writes JSON
to ``--out``. Rendering on a machine without a display goes through EGL (``PYOPENGL_PLATFORM=egl``, set here unless
set).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import time

os.environ.setdefault("PYOPENGL_PLATFORM", "egl")

import torch

from gs_gym import GenesisVectorEnv

PATHS = ("off", "camera", "every-k")


def synchronize(env: GenesisVectorEnv) -> None:
    if torch.cuda.is_available() and env.options.backend == "gpu":
        torch.cuda.synchronize()


def time_round(env: GenesisVectorEnv, steps: int, render_every: int | None) -> tuple[float, list[float], float]:
    """Seconds per step over ``steps`` steps (renders included); each render's wall seconds; the worker's busy
    seconds spent in those renders."""
    low, high = (torch.as_tensor(bound) for bound in (env.single_action_space.low, env.single_action_space.high))
    renders, render_busy = [], 0.0
    synchronize(env)
    start = time.perf_counter()
    for step in range(1, steps + 1):
        env.step(low + (high - low) * torch.rand(env.num_envs, *low.shape))
        if render_every is not None and step % render_every == 0:
            busy_before, render_start = max(env.worker_busy_seconds), time.perf_counter()
            env.render()
            renders.append(time.perf_counter() - render_start)
            render_busy += max(env.worker_busy_seconds) - busy_before
    synchronize(env)
    return (time.perf_counter() - start) / steps, renders, render_busy


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--task", default="cartpole")
    parser.add_argument("--backend", choices=("cpu", "gpu"), default="cpu")
    parser.add_argument("--n-envs", type=int, default=16)
    parser.add_argument("--num-workers", type=int, default=1)
    parser.add_argument("--steps", type=int, default=200, help="steps per timed block")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--render-every", type=int, default=50)
    parser.add_argument("--out", default="rendering.json")
    args = parser.parse_args()

    envs = {}
    for path in PATHS:
        print(f"building {path}", flush=True)
        envs[path] = GenesisVectorEnv(
            args.n_envs,
            args.task,
            backend=args.backend,
            num_workers=args.num_workers,
            seed=0,
            render_mode=None if path == "off" else "rgb_array",
        )
        envs[path].reset(seed=0)
    seconds: dict[str, list[float]] = {path: [] for path in PATHS}
    render_seconds: list[float] = []
    render_busy = 0.0
    for _ in range(args.repeats):
        for path, env in envs.items():
            per_step, renders, busy = time_round(env, args.steps, args.render_every if path == "every-k" else None)
            seconds[path].append(per_step)
            render_seconds += renders
            render_busy += busy
        print("round: " + ", ".join(f"{p} {s[-1] * 1e6:.0f} us/step" for p, s in seconds.items()), flush=True)
    for env in envs.values():
        env.close()

    rows = {
        path: {
            "us_per_step": statistics.median(values) * 1e6,
            "rounds_us": [value * 1e6 for value in values],
            "speed_vs_off": statistics.median(off / value for off, value in zip(seconds["off"], values, strict=True)),
        }
        for path, values in seconds.items()
    }
    render = {
        "renders": len(render_seconds),
        "ms_per_render": statistics.mean(render_seconds) * 1e3,
        "worker_ms_per_render": render_busy / len(render_seconds) * 1e3,
    }
    result = {
        "settings": vars(args),
        "machine": {"python": platform.python_version(), "torch": torch.__version__, "cpu_count": os.cpu_count()},
        "paths": rows,
        "render": render,
    }
    with open(args.out, "w") as handle:
        json.dump(result, handle, indent=1)
    print(f"\n{args.task}, {args.n_envs} envs, {args.num_workers} worker(s), {args.backend}, {args.repeats} rounds")
    print("| path | us/step (median) | speed vs off (median of per-round ratios) |\n|---|---:|---:|")
    for path, row in rows.items():
        label = f"render every {args.render_every}" if path == "every-k" else path
        print(f"| {label} | {row['us_per_step']:.0f} | {row['speed_vs_off']:.3f} |")
    print(
        f"one render() of {args.n_envs} frames: {render['ms_per_render']:.1f} ms in the parent, "
        f"{render['worker_ms_per_render']:.1f} ms of it in the worker (the camera); wrote {args.out}"
    )


if __name__ == "__main__":
    main()
