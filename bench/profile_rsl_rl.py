"""Where a step of rsl_rl's rollout spends its time, on gs_gym's go2-walk and on the reference env.

    python bench/profile_rsl_rl.py --env gs_gym --num-workers 1 --out gpu-out/profile-rsl-rl-c.json
    python bench/profile_rsl_rl.py --env gs_gym --num-workers 0 --out gpu-out/profile-rsl-rl-b.json
    python bench/profile_rsl_rl.py --env reference --out gpu-out/profile-rsl-rl-a.json
    python bench/profile_rsl_rl.py --table gpu-out/profile-rsl-rl-*.json        # the three side by side

Builds the env and runner exactly as ``examples/rsl_rl_go2.py`` does (Genesis's go2 recipe, 4096 envs), warms up
(``--warmup`` iterations, the first with ``init_at_random_ep_len=True``), then times ``--iterations`` iterations
twice: with rsl_rl's defaults, and with ``check_for_nan=False`` (its three ``isnan(...).any()`` host waits per step
gone). Each phase of the rollout step is timed on the host (``time.perf_counter``; the phases that wait for the device
absorb the device time queued before them):

  act          ``alg.act(obs)``: the policy's forward pass and the sampled actions
  env.step     the env's ``step`` as rsl_rl calls it (the adapter, the vector env, the task)
  check_nan    rsl_rl's NaN checks on the step's outputs (three host waits)
  process      ``alg.process_env_step``: the rollout storage
  logger       ``logger.process_env_step``: episode sums, with a ``nonzero`` and ``.cpu()`` (host waits)
  other        the rest of the collection loop (``obs.to(device)``, the loop itself)

``--frozen-policy`` skips the policy updates, so that every env is stepped by the same untrained Gaussian policy and
the physics costs the same per step in each (a training run's cost per step follows what its policy learned); the
collection is then the env's cost in rsl_rl's loop, comparable across envs.

Then ``--profile-iterations`` iterations run under ``torch.profiler`` (CPU and CUDA): per phase, the CUDA kernels and
copies launched from this process, their summed GPU time, and its host syncs with the time they blocked. With
``--num-workers 1`` the task's kernels are launched by the worker and are not in this process's profile; its
``env.step`` is then the parent's side only.
"""

from __future__ import annotations

import argparse
import copy
import json
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "examples"), str(ROOT / "bench")]

from go2_vs_reference import SYNC_CALLS, machine_description  # noqa: E402
from rsl_rl_go2 import TRAIN_CFG, CurveWriter, make_env, parse_args  # noqa: E402

PHASES = ("act", "env.step", "check_nan", "process", "logger")


class PhaseTimer:
    """Wraps callables so that each call is timed on the host and marked for ``torch.profiler`` under its phase;
    keeps the collection time of every iteration the runner logs."""

    def __init__(self) -> None:
        self.seconds = dict.fromkeys(PHASES, 0.0)
        self.collections: list[float] = []

    def wrap(self, phase: str, function: Callable[..., Any]) -> Callable[..., Any]:
        def timed(*args: Any, **kwargs: Any) -> Any:
            start = time.perf_counter()
            with torch.profiler.record_function(phase):
                result = function(*args, **kwargs)
            self.seconds[phase] += time.perf_counter() - start
            return result

        return timed

    def reset(self) -> None:
        self.seconds = dict.fromkeys(PHASES, 0.0)
        self.collections = []


def instrument(runner: Any, env: Any, timer: PhaseTimer) -> None:
    """Put ``timer`` around each phase of ``runner``'s rollout loop (see the module docstring)."""
    import rsl_rl.runners.on_policy_runner as runner_module

    runner.alg.act = timer.wrap("act", runner.alg.act)
    env.step = timer.wrap("env.step", env.step)
    runner_module.check_nan = timer.wrap("check_nan", runner_module.check_nan)
    runner.alg.process_env_step = timer.wrap("process", runner.alg.process_env_step)
    runner.logger.process_env_step = timer.wrap("logger", runner.logger.process_env_step)
    log = runner.logger.log

    def logged(*args: Any, **kwargs: Any) -> Any:
        timer.collections.append(kwargs["collect_time"])
        return log(*args, **kwargs)

    runner.logger.log = logged


def freeze_policy(runner: Any) -> None:
    """Make the runner's updates only empty the rollout storage (no loss values to log)."""
    runner.alg.update = lambda: runner.alg.storage.clear() or {}


def worker_busy_seconds(env: Any) -> float | None:
    """Seconds the gs_gym env's first worker has spent on commands so far; None for the reference env or in process."""
    venv = getattr(env, "venv", None)
    return venv.worker_busy_seconds[0] if venv is not None and venv.num_workers > 0 else None


def timed_iterations(runner: Any, env: Any, timer: PhaseTimer, iterations: int, steps: int) -> dict[str, Any]:
    """Run ``iterations`` learning iterations; per rollout step: the collection's wall time and each phase's (and
    the worker's busy time, with a worker)."""
    timer.reset()
    busy_before = worker_busy_seconds(env)
    runner.learn(num_learning_iterations=iterations)
    busy_after = worker_busy_seconds(env)
    n = iterations * steps
    phases_ms = {phase: seconds / n * 1e3 for phase, seconds in timer.seconds.items()}
    collect_ms = sum(timer.collections) / n * 1e3
    phases_ms["other"] = collect_ms - sum(phases_ms.values())
    return {
        "collection_ms_per_step": collect_ms,
        "collection_ms_per_step_by_iteration": [seconds / steps * 1e3 for seconds in timer.collections],
        "phase_ms_per_step": phases_ms,
        "worker_busy_ms_per_step": None if busy_after is None else (busy_after - busy_before) / n * 1e3,
    }


def profiled_iterations(runner: Any, iterations: int, steps: int) -> dict[str, Any]:
    """Per rollout step and phase: kernels and copies launched from this process, their GPU time, host syncs."""
    from torch.autograd import DeviceType
    from torch.profiler import ProfilerActivity, profile

    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if torch.cuda.is_available() else [])
    with profile(activities=activities) as profiler:
        runner.learn(num_learning_iterations=iterations)
    n = iterations * steps
    summary: dict[str, Any] = {}
    for phase in PHASES:
        kernels = copies = syncs = 0
        gpu_us = wait_us = 0.0
        for top in (event for event in profiler.events() if event.name == phase):
            for event in descendants(top):
                if event.device_type == DeviceType.CPU and event.name in SYNC_CALLS:
                    syncs += 1
                    wait_us += event.time_range.elapsed_us()
                for kernel in event.kernels:
                    is_copy = kernel.name.startswith(("Memcpy", "Memset"))
                    copies += is_copy
                    kernels += not is_copy
                    gpu_us += kernel.duration
        summary[phase] = {
            "kernels": kernels / n,
            "copies": copies / n,
            "gpu_us": gpu_us / n,
            "host_syncs": syncs / n,
            "sync_wait_us": wait_us / n,
        }
    return summary


def host_functions(runner: Any, iterations: int, steps: int, top: int = 30) -> list[dict[str, Any]]:
    """The ``top`` functions by own host time (``cProfile``'s tottime) over ``iterations`` iterations, per rollout
    step: where the host time of every phase goes, down to each torch op and Genesis/quadrants call (cProfile's
    overhead inflates Python-heavy functions; compare paths with it, not with the timed runs)."""
    import cProfile
    import pstats

    profiler = cProfile.Profile()
    profiler.enable()
    runner.learn(num_learning_iterations=iterations)
    profiler.disable()
    n = iterations * steps
    stats = pstats.Stats(profiler).stats  # type: ignore[attr-defined]
    rows = sorted(stats.items(), key=lambda item: item[1][2], reverse=True)[:top]
    return [
        {
            "function": f"{Path(file).name}:{line}({name})" if file != "~" else name,
            "calls_per_step": calls / n,
            "own_us_per_step": own * 1e6 / n,
            "cumulative_us_per_step": cumulative * 1e6 / n,
        }
        for (file, line, name), (_, calls, own, cumulative, _) in rows
    ]


def descendants(event: Any) -> list[Any]:
    found, stack = [], [event]
    while stack:
        current = stack.pop()
        found.append(current)
        stack.extend(current.cpu_children)
    return found


def measure(args: argparse.Namespace) -> dict[str, Any]:
    env_args = parse_args(["--env", args.env, "--num-envs", str(args.num_envs), "--num-workers",
                           str(args.num_workers), "--backend", args.backend])  # fmt: skip
    torch.manual_seed(env_args.seed)
    env = make_env(env_args)
    train_cfg = copy.deepcopy(TRAIN_CFG)
    train_cfg.update(run_name="profile", logger={"class_name": CurveWriter})
    steps = train_cfg["num_steps_per_env"]
    with tempfile.TemporaryDirectory() as log_dir:
        from rsl_rl.runners import OnPolicyRunner

        runner = OnPolicyRunner(env, train_cfg, log_dir=log_dir, device=str(env.device))
        timer = PhaseTimer()
        instrument(runner, env, timer)
        if args.frozen_policy:
            freeze_policy(runner)
        runner.learn(num_learning_iterations=args.warmup, init_at_random_ep_len=True)
        defaults = timed_iterations(runner, env, timer, args.iterations, steps)
        runner.cfg["check_for_nan"] = False
        no_nan_checks = timed_iterations(runner, env, timer, args.iterations, steps)
        runner.cfg["check_for_nan"] = True
        profile = profiled_iterations(runner, args.profile_iterations, steps)
        functions = host_functions(runner, args.profile_iterations, steps) if args.host_profile else None
        env.close()
    label = args.env if args.env == "reference" else f"gs_gym, {args.num_workers} worker(s)"
    label += f", {args.label}" if args.label else ""
    return {
        "label": label,
        "env": args.env,
        "num_workers": args.num_workers if args.env == "gs_gym" else None,
        "num_envs": args.num_envs,
        "steps_per_iteration": steps,
        "frozen_policy": args.frozen_policy,
        "iterations": {"warmup": args.warmup, "timed": args.iterations, "profiled": args.profile_iterations},
        "defaults": defaults,
        "check_for_nan_off": no_nan_checks,
        "profile": profile,
        "host_functions": functions,
        "machine": machine_description(args.backend),
    }


def table(results: list[dict[str, Any]]) -> str:
    """Per phase and env: host ms per step (defaults / without the NaN checks); kernels, GPU us, syncs per step."""
    frozen = " with the policy frozen" if results[0].get("frozen_policy") else ""
    lines = [f"rsl_rl rollout{frozen}, ms per step ({results[0]['num_envs']} envs; collection: median of iterations)"]
    lines.append(f"{'phase':<12}" + "".join(f"{r['label']:>28}" for r in results))

    def row(name: str, cell: Callable[[dict[str, Any]], str]) -> None:
        lines.append(f"{name:<12}" + "".join(f"{cell(r):>28}" for r in results))

    def both(value: Callable[[dict[str, Any]], float | None]) -> Callable[[dict[str, Any]], str]:
        def cell(r: dict[str, Any]) -> str:
            values = [value(r[run]) for run in ("defaults", "check_for_nan_off")]
            return " / ".join("-" if v is None else f"{v:.3f}" for v in values)

        return cell

    row("collection", both(lambda run: statistics.median(run["collection_ms_per_step_by_iteration"])))
    for phase in (*PHASES, "other"):
        row(phase, both(lambda run, p=phase: run["phase_ms_per_step"][p]))
    row("worker busy", both(lambda run: run.get("worker_busy_ms_per_step")))
    lines.append("(host ms: rsl_rl defaults / check_for_nan=False)")
    lines.append("profiled, per step: kernels+copies, GPU us, host syncs (wait us)")
    for phase in PHASES:
        row(phase, lambda r, p=phase: "{kernels:.0f}+{copies:.0f}, {gpu_us:.0f}, {host_syncs:.1f} ({sync_wait_us:.0f})"
            .format(**r["profile"][p]))  # fmt: skip
    return "\n".join(lines)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--env", choices=("gs_gym", "reference"), default="gs_gym")
    p.add_argument("--num-workers", type=int, default=1)
    p.add_argument("--num-envs", type=int, default=4096)
    p.add_argument("--backend", choices=("cpu", "gpu"), default="gpu" if torch.cuda.is_available() else "cpu")
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--iterations", type=int, default=5)
    p.add_argument("--profile-iterations", type=int, default=2)
    p.add_argument("--frozen-policy", action="store_true", help="no policy updates (see the module docstring)")
    p.add_argument("--host-profile", action="store_true", help="also the top functions by host time (cProfile)")
    p.add_argument("--label", default="", help="added to the env's name in the table (e.g. MPS on)")
    p.add_argument("--out", type=Path, default=None, help="write the result as JSON")
    p.add_argument("--table", type=Path, nargs="+", default=None, help="print the table of these results, run nothing")
    args = p.parse_args()
    if args.table:
        print(table([json.loads(path.read_text()) for path in args.table]))
        return
    result = measure(args)
    if args.out is not None:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(result, indent=1))
    print(table([result]))
    for row in result["host_functions"] or []:
        print(f"{row['own_us_per_step']:8.1f} us own {row['cumulative_us_per_step']:8.1f} us cum "
              f"{row['calls_per_step']:6.2f} calls/step  {row['function']}")  # fmt: skip


if __name__ == "__main__":
    main()
