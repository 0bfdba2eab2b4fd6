"""The ``gs-gym`` command (also ``python -m gs_gym``): ``info``, ``compile``, ``bench`` and ``demo``."""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

import torch

from gs_gym.precompile import package_versions
from gs_gym.tasks.runtime import KERNEL_CACHE

PACKAGES = ("gs-gym", "genesis-world", "quadrants", "torch", "gymnasium", "numpy")


def _default_backend() -> str:
    return "gpu" if torch.cuda.is_available() else "cpu"


def _directory_size(path: Path) -> int:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file()) if path.exists() else 0


def collect_info() -> dict[str, Any]:
    """GPUs, package versions, the kernel cache and whether CUDA IPC can be used here."""
    versions = package_versions(PACKAGES)
    gpus = []
    if torch.cuda.is_available():
        for index in range(torch.cuda.device_count()):
            props = torch.cuda.get_device_properties(index)
            gpus.append(
                {
                    "index": index,
                    "name": props.name,
                    "uuid": f"GPU-{props.uuid}",
                    "memory_mib": props.total_memory // 2**20,
                }
            )
    if not gpus:
        ipc = "no: torch sees no CUDA device (the CPU backend exchanges buffers through shared host memory)"
    elif sys.platform != "linux":
        ipc = f"no: CUDA IPC needs Linux, this is {sys.platform}"
    else:
        ipc = "yes"
    return {
        "gpus": gpus,
        "versions": versions,
        "python": sys.version.split()[0],
        "kernel_cache": {"path": str(KERNEL_CACHE), "bytes": _directory_size(KERNEL_CACHE)},
        "cuda_ipc": ipc,
    }


def cmd_info(args: argparse.Namespace) -> int:
    info = collect_info()
    if args.json:
        print(json.dumps(info, indent=1))
        return 0
    print("GPUs:" if info["gpus"] else "GPUs: none visible to torch")
    for gpu in info["gpus"]:
        print(f"  [{gpu['index']}] {gpu['name']}  {gpu['uuid']}  {gpu['memory_mib']:,} MiB")
    print(
        "versions: " + ", ".join(f"{name} {version or 'not installed'}" for name, version in info["versions"].items())
    )
    print(f"python: {info['python']}")
    cache = info["kernel_cache"]
    print(f"kernel cache: {cache['path']} ({cache['bytes'] / 2**20:.1f} MiB)")
    print(f"CUDA IPC usable: {info['cuda_ipc']}")
    return 0


def cmd_compile(args: argparse.Namespace) -> int:
    from gs_gym.precompile import Compiled, compile_tasks
    from gs_gym.tasks import available_tasks

    backend = args.backend or _default_backend()
    tasks = args.task or available_tasks()
    unknown = [task for task in tasks if task not in available_tasks()]
    if unknown:
        print(f"gs-gym compile: unknown task {unknown[0]!r}; expected some of {available_tasks()}", file=sys.stderr)
        return 2
    print(f"compiling {', '.join(tasks)} on the {backend} backend into {KERNEL_CACHE} ...", flush=True)

    def show(result: Compiled) -> None:
        if result.status == "skipped":
            print(f"{result.task}: already compiled with these versions (--force compiles it again)", flush=True)
        elif result.status == "compiled":
            print(f"{result.task}: compiled in {result.seconds:.0f} s", flush=True)
        else:
            print(f"{result.task}: failed after {result.seconds:.0f} s, {result.error}", flush=True)

    results = compile_tasks(tasks, backend, jobs=args.jobs, force=args.force, on_result=show)
    return 1 if any(result.status == "failed" for result in results) else 0


def cmd_bench(args: argparse.Namespace) -> int:
    from gs_gym.benchmark import format_table, plot, run_benchmark, standard_configs

    backend = args.backend or _default_backend()
    configs = standard_configs(backend, args.workers)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)

    def show(row: dict[str, Any]) -> None:
        print(
            f"{row['config']:32s} n_envs={row['n_envs']:6d} {row['us_per_step']:9.1f} us/step "
            f"{row['env_steps_per_s']:14,.0f} env-steps/s",
            flush=True,
        )

    result = run_benchmark(args.task, backend, args.n_envs, configs, args.seconds, args.repeats, on_row=show)
    (out / "bench.json").write_text(json.dumps(result, indent=1))
    print()
    print(format_table(result))
    try:
        plot(result, str(out / "bench.png"))
    except ImportError:
        print("note: matplotlib is not installed (pip install 'gs-gym[plots]'); no plot written")
    else:
        print(f"\nwrote {out / 'bench.json'} and {out / 'bench.png'}")
    return 0


def cmd_demo(args: argparse.Namespace) -> int:
    from gymnasium import spaces

    from gs_gym.vector.env import GenesisVectorEnv

    backend = args.backend or _default_backend()
    start = time.perf_counter()
    render_mode = "rgb_array" if args.video else None
    env = GenesisVectorEnv(
        args.num_envs, args.task, backend=backend, num_workers=args.num_workers, seed=args.seed, render_mode=render_mode
    )
    video = None
    try:
        built = time.perf_counter() - start
        env.reset(seed=args.seed)
        if args.video:
            from gs_gym.video import EpisodeVideo

            video = EpisodeVideo(args.video)
            video.add(env.render() or ())  # a tuple of frames with a render mode
        action_space = env.single_action_space
        assert isinstance(action_space, spaces.Box)  # every task's action space is a Box (Task.spaces)
        shape = (args.num_envs, *action_space.shape)
        low = torch.as_tensor(action_space.low, device=env.device)
        high = torch.as_tensor(action_space.high, device=env.device)
        episodes = 0
        start = time.perf_counter()
        for _ in range(args.steps):
            actions = low + (high - low) * torch.rand(shape, device=env.device)
            _, rewards, terminated, truncated, _ = env.step(actions)
            episodes += int((terminated | truncated).sum())
            if video is not None:
                video.add(env.render() or (), rewards, terminated | truncated)
        elapsed = time.perf_counter() - start
    finally:
        if video is not None:
            video.close()
        env.close()
    rate = args.steps * args.num_envs / elapsed
    print(
        f"task {args.task}: {args.num_envs} envs on {env.num_workers or 'no'} worker(s) ({backend} backend), "
        f"built in {built:.1f} s"
    )
    rendering = ", rendering every step" if video is not None else ""
    print(f"{args.steps} steps in {elapsed:.2f} s{rendering}: {rate:,.0f} env-steps/s, {episodes} episodes ended")
    if video is not None:
        print(f"video: {video.path} ({video.frames} frames of env 0)")
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="gs-gym", description="Genesis scenes as one vector env over GPU workers.")
    commands = parser.add_subparsers(dest="command", required=True)

    info = commands.add_parser("info", help="GPUs, versions, kernel cache, CUDA IPC")
    info.add_argument("--json", action="store_true", help="print JSON instead of text")
    info.set_defaults(run=cmd_info)

    compile_ = commands.add_parser(
        "compile", help="compile tasks' kernels into the cache now, so that later env builds load them"
    )
    compile_.add_argument("--task", nargs="+", default=None, help="tasks to compile (default: every registered task)")
    compile_.add_argument("--backend", choices=("gpu", "cpu"), default=None)
    compile_.add_argument("--jobs", type=int, default=2, help="tasks compiled at once, each in its own process")
    compile_.add_argument("--force", action="store_true", help="compile tasks the cache already records")
    compile_.set_defaults(run=cmd_compile)

    bench = commands.add_parser("bench", help="raw task vs in-process env vs worker processes")
    bench.add_argument("--task", default="cartpole")
    bench.add_argument("--backend", choices=("gpu", "cpu"), default=None)
    bench.add_argument("--n-envs", type=int, nargs="+", default=[64, 1024, 4096])
    bench.add_argument("--workers", type=int, nargs="+", default=[1], help="worker counts to compare")
    bench.add_argument("--seconds", type=float, default=1.0, help="timed seconds per repeat")
    bench.add_argument("--repeats", type=int, default=3)
    bench.add_argument("--out", default="gs-gym-bench", help="folder for bench.json and bench.png")
    bench.set_defaults(run=cmd_bench)

    demo = commands.add_parser("demo", help="step a task with random actions and report throughput")
    demo.add_argument("--task", default="cartpole")
    demo.add_argument("--backend", choices=("gpu", "cpu"), default=None)
    demo.add_argument("--num-envs", type=int, default=64)
    demo.add_argument("--num-workers", type=int, default=1)
    demo.add_argument("--steps", type=int, default=500)
    demo.add_argument("--seed", type=int, default=0)
    demo.add_argument(
        "--video",
        default=None,
        metavar="PATH",
        help="write an MP4 of env 0, its return in a caption (render() draws every env: use few, e.g. --num-envs 1)",
    )
    demo.set_defaults(run=cmd_demo)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return args.run(args)


if __name__ == "__main__":
    sys.exit(main())
