"""Play a checkpoint of examples/train_ppo.py: episode returns of its deterministic policy, optionally a video.

A fresh env of the checkpoint's task, each env playing one episode from ``reset(seed)`` with the policy's action mean
(observations normalized with the checkpoint's statistics). Prints each env's episode return as it ends and a summary;
optionally writes them as JSON and an MP4 of the first envs (tiled, each captioned with its return).

The run stops when every env has finished its first episode or after ``--max-steps`` steps; an env that finished
keeps stepping with the others, but its later episodes are not counted (so short episodes do not outnumber long
ones). Task metrics are averaged over the last half of the steps played. ``--random`` plays uniform random actions
instead, the baseline to compare with. ``--video`` renders every env at every step (one rasterizer pass each), so
by default it plays ``--video-envs`` envs; on a machine without a display, Genesis renders offscreen (EGL).

    python examples/play.py runs/cartpole-1/checkpoint.pt
    python examples/play.py runs/cartpole-1/checkpoint.pt --random
    python examples/play.py runs/go2-walk-1/checkpoint.pt --video go2.mp4 --video-envs 4 --json play.json
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import torch
from gymnasium.vector import AutoresetMode
from train_ppo import Agent, task_metrics  # this file's folder is on sys.path when it runs as a script

from gs_gym import GenesisVectorEnv
from gs_gym.video import EpisodeVideo
from gs_gym.wrappers import TorchRecordEpisodeStatistics


def parse_args() -> argparse.Namespace:
    formatter = argparse.ArgumentDefaultsHelpFormatter
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0], formatter_class=formatter, allow_abbrev=False)
    p.add_argument("checkpoint", help="checkpoint.pt written by train_ppo.py")
    p.add_argument("--num-envs", type=int, default=None, help="default: the checkpoint's, --video-envs with --video")
    p.add_argument("--num-workers", type=int, default=0, help="env worker processes (0: the env runs in this one)")
    p.add_argument("--backend", choices=("gpu", "cpu"), default=None, help="default: the checkpoint's")
    p.add_argument("--task-kwargs", type=json.loads, default={}, help="JSON object over the checkpoint's")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--max-steps", type=int, default=1000, help="stop after this many steps")
    p.add_argument("--random", action="store_true", help="uniform random actions instead of the policy")
    p.add_argument("--json", default=None, help="write the episodes and the summary to this file")
    p.add_argument("--video", default=None, help="write an MP4 of the first --video-envs envs to this file")
    p.add_argument("--video-envs", type=int, default=1, help="envs shown in the video (tiled)")
    args = p.parse_args()
    for name in ("num_envs", "max_steps", "video_envs"):
        if getattr(args, name) is not None and getattr(args, name) < 1:
            p.error(f"--{name.replace('_', '-')} must be >= 1, got {getattr(args, name)}")
    if not isinstance(args.task_kwargs, dict):
        p.error(f"--task-kwargs must be a JSON object, got {args.task_kwargs!r}")
    if args.video and args.num_envs is not None and args.num_envs < args.video_envs:
        p.error(f"--num-envs ({args.num_envs}) must be >= --video-envs ({args.video_envs})")
    return args


if __name__ == "__main__":
    args = parse_args()
    sys.stdout.reconfigure(line_buffering=True)
    checkpoint = torch.load(args.checkpoint, map_location="cpu", weights_only=False)
    trained = checkpoint["args"]
    task, backend = trained["task"], args.backend or trained["backend"]
    num_envs = args.num_envs or (args.video_envs if args.video else trained["num_envs"])
    base = GenesisVectorEnv(
        num_envs,
        task,
        backend=backend,
        num_workers=args.num_workers,
        seed=args.seed,
        autoreset_mode=AutoresetMode.SAME_STEP,
        task_kwargs={**trained["task_kwargs"], **args.task_kwargs},
        render_mode="rgb_array" if args.video else None,
    )
    env, device = TorchRecordEpisodeStatistics(base), base.main_device
    low = torch.as_tensor(base.single_action_space.low, device=device)
    high = torch.as_tensor(base.single_action_space.high, device=device)

    # -- the policy: the Gaussian's mean on observations normalized as in training, or uniform random actions --------
    generator = torch.Generator(device=device).manual_seed(args.seed)
    agent = Agent(checkpoint["obs_dim"], checkpoint["act_dim"], **checkpoint["network"]).to(device)
    agent.load_state_dict(checkpoint["agent"])
    rms = {k: v.to(device) for k, v in checkpoint["obs_rms"].items()} if checkpoint["obs_rms"] else None

    def act(obs: torch.Tensor) -> torch.Tensor:
        if args.random:
            return low + (high - low) * torch.rand(obs.shape[0], low.shape[0], generator=generator, device=device)
        if rms is not None:
            obs = ((obs - rms["mean"]) / (rms["var"] + 1e-8).sqrt()).clamp(-10.0, 10.0)
        return agent.actor_mean(obs.float()).clamp(low, high)

    # -- play: one episode per env, printing each as it ends ---------------------------------------------------------
    policy = "random actions" if args.random else "policy mean (deterministic)"
    print(f"{task} x{num_envs} on {backend}, {policy}, seed {args.seed}, at most {args.max_steps} steps")
    video = EpisodeVideo(args.video, envs=args.video_envs) if args.video else None
    obs = env.reset(seed=args.seed)[0]
    if video:
        video.add(base.render())
    finished = torch.zeros(num_envs, dtype=torch.bool, device=device)
    episodes, metrics, steps = [], [], 0
    while steps < args.max_steps and not bool(finished.all()):
        with torch.no_grad():
            obs, reward, terminated, truncated, info = env.step(act(obs))
        steps += 1
        if video:
            video.add(base.render(), reward, terminated | truncated)
        metrics.append(task_metrics(base))
        for i in (info["_episode"] & ~finished).nonzero().flatten().tolist():
            ended = "terminated" if bool(terminated[i]) else "truncated"
            episode = {"env": i, "return": float(info["episode"]["r"][i]), "length": int(info["episode"]["l"][i])}
            episodes.append({**episode, "ended": ended})
            print(
                f"episode {len(episodes)}: env {i}, return {episode['return']:.2f}, {episode['length']} steps, {ended}"
            )
        finished |= info["_episode"]
    if video:
        video.close()
    env.close()

    # -- summary: printed, and as JSON (null where no episode finished) ------------------------------------------------
    returns = [e["return"] for e in episodes]
    last_half = metrics[len(metrics) // 2 :]
    mean_metrics = {key: sum(m[key] for m in last_half) / len(last_half) for key in last_half[0]} if last_half else {}
    summary = {
        "checkpoint": args.checkpoint,
        "task": task,
        "policy": "random" if args.random else "mean",
        "num_envs": num_envs,
        "seed": args.seed,
        "steps": steps,
        "episodes": episodes,
        "mean_return": sum(returns) / len(returns) if returns else None,
        "min_return": min(returns, default=None),
        "max_return": max(returns, default=None),
        "terminated": sum(e["ended"] == "terminated" for e in episodes),
        "task_metrics_last_half": mean_metrics,
        "video": args.video,
    }
    if returns:
        line = (
            f"{len(returns)} of {num_envs} episodes finished in {steps} steps: mean return {summary['mean_return']:.2f}"
            f" (min {summary['min_return']:.2f}, max {summary['max_return']:.2f}), {summary['terminated']} terminated"
        )
    else:
        line = f"no episode finished in {steps} steps"
    print(f"{task}, {policy}: {line}" + "".join(f", {key} {value:.3f}" for key, value in mean_metrics.items()))
    if args.json:
        Path(args.json).write_text(json.dumps(summary, indent=1, allow_nan=False))
    if video:
        print(f"video: {video.path} ({video.frames} frames of {video.envs} env(s))")
