"""PPO on a gs_gym task: CleanRL's ``ppo_continuous_action.py`` for a batched simulator, all on the env's device.

``GenesisVectorEnv`` returns torch tensors on its ``main_device``; ``gs_gym.wrappers`` keep the episode statistics and
the observation normalization there, and rewards are scaled by the running std of the discounted return in the loop.
A time limit is not a failure: with ``autoreset_mode=SAME_STEP`` a truncated env gets ``gamma * V(info["final_obs"])``
added to its reward. ``--lr-schedule adaptive`` is rsl_rl's: the lr is divided by 1.5 when the KL to the rollout
policy is above ``2 * desired_kl`` and multiplied by 1.5 below ``desired_kl / 2``. ``--task go2-walk`` applies
``PRESETS["go2-walk"]``; flags given still win. Outputs in ``--out-dir``: ``metrics.json`` (``null`` where no episode
finished), ``checkpoint.pt`` (for ``examples/play.py``), with matplotlib ``learning_curve.png``, and with
``--capture-video`` ``video.mp4`` of the action mean on a small env of its own that renders.

    python examples/train_ppo.py                  # go2-walk on a GPU, else cartpole (64 envs) on the CPU
    python examples/train_ppo.py --task go2-walk --max-train-time 300 --log-every 10 --capture-video
    python examples/train_ppo.py --task cartpole --num-envs 32 --task-kwargs '{"max_episode_steps": 200}'
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
import sys
import time
from pathlib import Path

import torch
from gymnasium.vector import AutoresetMode
from torch import nn
from torch.distributions import Normal, kl_divergence

from gs_gym import GenesisVectorEnv
from gs_gym.video import record
from gs_gym.wrappers import TorchNormalizeObservation, TorchRecordEpisodeStatistics, TorchRunningMeanStd

# Genesis' Go2 locomotion example (go2_train.py, rsl_rl's PPO): 4096 envs x 24 steps x 150 iterations, ELU MLPs,
# KL-adaptive lr, no observation or reward normalization, a fixed 0.5 m/s forward command. Its other settings
# (lr 1e-3, 5 epochs x 4 minibatches, clip 0.2, gamma 0.99, lambda 0.95, desired KL 0.01) are the defaults. vf_coef:
# rsl_rl's value_loss_coef 1.0 weighs (V - R)^2; the loss here is 0.5 * (V - R)^2.
# fmt: off
PRESETS = {
    "go2-walk": {
        "num_envs": 4096, "num_steps": 24, "total_timesteps": 150 * 24 * 4096, "return_window": 1000,
        "hidden_sizes": [512, 256, 128], "activation": "elu", "lr_schedule": "adaptive", "ent_coef": 0.01,
        "vf_coef": 2.0, "max_grad_norm": 1.0, "norm_obs": False, "norm_reward": False,
        "task_kwargs": {"lin_vel_x_range": (0.5, 0.5), "lin_vel_y_range": (0.0, 0.0), "ang_vel_yaw_range": (0.0, 0.0)},
    },
}
# fmt: on


def boolean(text: str) -> bool:
    if text.lower() not in ("true", "false", "1", "0"):
        raise argparse.ArgumentTypeError(f"expected true or false, got {text!r}")
    return text.lower() in ("true", "1")


def parse_args() -> argparse.Namespace:
    gpu = torch.cuda.is_available()
    formatter = argparse.ArgumentDefaultsHelpFormatter  # no abbreviations: --hidden-size is not --hidden-sizes
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0], formatter_class=formatter, allow_abbrev=False)
    p.add_argument("--task", default="go2-walk" if gpu else "cartpole", help=f"gs_gym task; presets: {list(PRESETS)}")
    p.add_argument("--num-envs", type=int, default=64)
    p.add_argument("--num-workers", type=int, default=1, help="env worker processes (0: the env runs in this one)")
    p.add_argument("--backend", choices=("gpu", "cpu"), default="gpu" if gpu else "cpu")
    p.add_argument("--task-kwargs", type=json.loads, default={}, help="task options as a JSON object")
    p.add_argument("--performance-mode", type=boolean, default=False, help="Genesis': faster steps, longer build")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--total-timesteps", type=int, default=600_000, help="env steps, summed over all envs")
    p.add_argument("--max-train-time", type=float, default=None, help="seconds: start no iteration after this")
    p.add_argument("--out-dir", default=None, help="default: runs/<task>-<seed>")
    p.add_argument("--torch-threads", type=int, default=1, help="threads of this process (env workers need cores)")
    p.add_argument("--capture-video", action="store_true", help="at the end, write video.mp4 of the action mean")
    p.add_argument("--video-envs", type=int, default=1, help="envs shown in the video (tiled)")
    p.add_argument("--video-steps", type=int, default=250, help="steps of the video (50 per second)")
    p.add_argument("--return-window", type=int, default=100, help="last episodes averaged for the mean return")
    p.add_argument("--log-every", type=float, default=5.0, help="seconds between progress lines")
    p.add_argument("--num-steps", type=int, default=32, help="rollout length per env and iteration")
    p.add_argument("--learning-rate", type=float, default=1e-3, help="the (initial) learning rate")
    p.add_argument("--lr-schedule", choices=("anneal", "adaptive", "constant"), default="anneal")
    p.add_argument("--desired-kl", type=float, default=0.01, help="KL target of --lr-schedule adaptive")
    p.add_argument("--gamma", type=float, default=0.99)
    p.add_argument("--gae-lambda", type=float, default=0.95)
    p.add_argument("--num-minibatches", type=int, default=4)
    p.add_argument("--update-epochs", type=int, default=5)
    p.add_argument("--norm-adv", type=boolean, default=True)
    p.add_argument("--clip-coef", type=float, default=0.2)
    p.add_argument("--clip-vloss", type=boolean, default=True)
    p.add_argument("--ent-coef", type=float, default=0.0)
    p.add_argument("--vf-coef", type=float, default=0.5)
    p.add_argument("--max-grad-norm", type=float, default=0.5)
    p.add_argument("--target-kl", type=float, default=None, help="end an update's epochs early above this KL")
    p.add_argument("--norm-obs", type=boolean, default=True, help="running mean/std normalization, clipped to 10")
    p.add_argument("--norm-reward", type=boolean, default=True, help="divide by the running std of the return")
    p.add_argument("--hidden-sizes", type=int, nargs="+", default=[64, 64], help="of the actor and of the critic")
    p.add_argument("--activation", choices=("tanh", "elu"), default="tanh")
    p.add_argument("--init-log-std", type=float, default=0.0, help="initial log-std of the action noise")
    preset = PRESETS.get(p.parse_known_args()[0].task, {})
    p.set_defaults(**{key: value for key, value in preset.items() if key != "task_kwargs"})
    args = p.parse_args()
    if not isinstance(args.task_kwargs, dict):
        p.error(f"--task-kwargs must be a JSON object, got {args.task_kwargs!r}")
    args.preset, args.task_kwargs = args.task if preset else None, {**preset.get("task_kwargs", {}), **args.task_kwargs}
    args.out_dir = args.out_dir or f"runs/{args.task}-{args.seed}"
    counts = ("num_envs", "num_steps", "num_minibatches", "update_epochs", "total_timesteps", "return_window")
    checks = [(name, getattr(args, name) >= 1, ">= 1") for name in (*counts, "video_envs", "video_steps")]
    checks += [("hidden_sizes", min(args.hidden_sizes) > 0, "> 0"), ("desired_kl", args.desired_kl > 0, "> 0")]
    checks += [("max_train_time", args.max_train_time is None or args.max_train_time > 0, "> 0")]
    for name, ok, bound in checks:
        if not ok:
            p.error(f"--{name.replace('_', '-')} must be {bound}, got {getattr(args, name)}")
    if args.num_envs * args.num_steps % args.num_minibatches:
        p.error(f"num_envs * num_steps ({args.num_envs * args.num_steps}) must be divisible by --num-minibatches")
    return args


def mlp(in_dim: int, hidden_sizes: list[int], out_dim: int, activation: str, out_std: float) -> nn.Sequential:
    """Linear layers with orthogonal weights (gain sqrt(2), ``out_std`` for the last) and zero biases, as CleanRL's."""
    sizes, layers = [in_dim, *hidden_sizes, out_dim], []
    for index, (fan_in, fan_out) in enumerate(itertools.pairwise(sizes)):
        layer = nn.Linear(fan_in, fan_out)
        nn.init.orthogonal_(layer.weight, out_std if index == len(hidden_sizes) else math.sqrt(2))
        nn.init.zeros_(layer.bias)
        layers += [layer, {"tanh": nn.Tanh, "elu": nn.ELU}[activation]()]
    return nn.Sequential(*layers[:-1])  # no activation after the last layer


class Agent(nn.Module):
    """MLP critic and Gaussian actor with a learned, state-independent log-std (``examples/play.py`` loads one)."""

    def __init__(self, obs_dim: int, act_dim: int, hidden_sizes: list[int], activation: str, init_log_std=0.0):
        super().__init__()
        self.critic = mlp(obs_dim, hidden_sizes, 1, activation, out_std=1.0)
        self.actor_mean = mlp(obs_dim, hidden_sizes, act_dim, activation, out_std=0.01)
        self.actor_logstd = nn.Parameter(torch.full((1, act_dim), float(init_log_std)))

    def get_value(self, x: torch.Tensor) -> torch.Tensor:
        return self.critic(x).squeeze(-1)

    def get_action_and_value(self, x: torch.Tensor, action: torch.Tensor | None = None):
        mean = self.actor_mean(x)
        dist = Normal(mean, self.actor_logstd.expand_as(mean).exp())
        if action is None:
            action = dist.sample()
        return action, dist.log_prob(action).sum(-1), dist.entropy().sum(-1), self.get_value(x)


def task_metrics(env: GenesisVectorEnv) -> dict[str, float]:
    """The task's ``metrics()`` over all envs: each worker's, weighted by its env count ({} if the task has none)."""
    weighted = list(zip(env.call("metrics"), [part.count for part in env.env_ranges], strict=True))
    return {key: sum(metrics[key] * count for metrics, count in weighted) / env.num_envs for key in weighted[0][0]}


def fmt(value: float | None, spec: str = ".2f") -> str:
    return "n/a (no episode finished)" if value is None else format(value, spec)


if __name__ == "__main__":
    args = parse_args()
    sys.stdout.reconfigure(line_buffering=True)
    torch.manual_seed(args.seed)
    torch.set_num_threads(args.torch_threads)
    out_dir = Path(args.out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    settings = dict(sorted(vars(args).items()))
    print(f"settings ({'preset ' + args.preset if args.preset else 'no preset'}): {json.dumps(settings)}")

    # -- env: episode statistics of the raw rewards, then observation normalization ----------------------------------
    start = time.perf_counter()
    same = {"backend": args.backend, "seed": args.seed, "task_kwargs": args.task_kwargs}  # also the video env's
    # verbose: start-up progress on stderr, also into a log (a first build compiles for minutes)
    options = {"autoreset_mode": AutoresetMode.SAME_STEP, "performance_mode": args.performance_mode, "verbose": True}
    base = GenesisVectorEnv(args.num_envs, args.task, num_workers=args.num_workers, **options, **same)
    episodes = TorchRecordEpisodeStatistics(base, buffer_length=args.return_window)
    envs = TorchNormalizeObservation(episodes) if args.norm_obs else episodes
    obs_clip = 10.0 if args.norm_obs else math.inf  # normalized observations are clipped to [-10, 10]
    device, num_envs, num_steps = base.main_device, args.num_envs, args.num_steps
    obs_dim, act_dim = base.single_observation_space.shape[0], base.single_action_space.shape[0]
    low = torch.as_tensor(base.single_action_space.low, device=device)
    high = torch.as_tensor(base.single_action_space.high, device=device)
    sync = torch.cuda.synchronize if device.type == "cuda" else lambda: None  # for the phase timings
    build_time = time.perf_counter() - start
    print(f"env: {args.task} x{num_envs} on {args.backend} ({args.num_workers} worker(s)), built in {build_time:.1f}s")

    # -- agent and rollout storage ----------------------------------------------------------------------------------
    agent = Agent(obs_dim, act_dim, args.hidden_sizes, args.activation, args.init_log_std).to(device)
    optimizer = torch.optim.Adam(agent.parameters(), lr=args.learning_rate, eps=1e-5)
    batch_size = num_envs * num_steps
    minibatch_size = batch_size // args.num_minibatches
    num_iterations = max(1, args.total_timesteps // batch_size)
    obs_buf = torch.zeros((num_steps, num_envs, obs_dim), device=device)
    actions_buf, means_buf = torch.zeros((2, num_steps, num_envs, act_dim), device=device)
    logprobs_buf, rewards_buf, dones_buf, values_buf = torch.zeros((4, num_steps, num_envs), device=device)
    return_rms = TorchRunningMeanStd((), device)  # of the discounted return, for --norm-reward
    discounted_return = torch.zeros(num_envs, dtype=torch.float64, device=device)

    next_obs = envs.reset(seed=args.seed)[0].clamp(-obs_clip, obs_clip)
    has_metrics = bool(task_metrics(base))
    history, global_step, lr, iterations, rollout_time, update_time = [], 0, args.learning_rate, 0, 0.0, 0.0
    sync()
    train_start = last_log = time.perf_counter()
    for iteration in range(1, num_iterations + 1):
        if iteration > 1 and args.max_train_time and time.perf_counter() - train_start >= args.max_train_time:
            print(f"stopping after {iterations} of {num_iterations} iterations: --max-train-time reached")
            break
        iterations = iteration
        if args.lr_schedule == "anneal":
            lr = optimizer.param_groups[0]["lr"] = args.learning_rate * (1.0 - (iteration - 1.0) / num_iterations)

        phase_start = time.perf_counter()
        for step in range(num_steps):
            global_step += num_envs
            obs_buf[step] = next_obs
            with torch.no_grad():
                actions_buf[step], logprobs_buf[step], _, values_buf[step] = agent.get_action_and_value(next_obs)
                means_buf[step] = agent.actor_mean(next_obs)
            next_obs, reward, terminated, truncated, info = envs.step(actions_buf[step].clamp(low, high))
            next_obs, done = next_obs.clamp(-obs_clip, obs_clip), terminated | truncated
            if args.norm_reward:
                discounted_return = discounted_return * args.gamma + reward
                return_rms.update(discounted_return)
                discounted_return = discounted_return.masked_fill(done, 0.0)
                reward = reward / torch.sqrt(return_rms.var + 1e-8)
            if "final_obs" in info:  # some env finished: bootstrap the ones that only ran out of time
                with torch.no_grad():
                    final_value = agent.get_value(info["final_obs"].clamp(-obs_clip, obs_clip))
                reward = reward + args.gamma * torch.where(truncated & ~terminated, final_value, 0.0)
            rewards_buf[step], dones_buf[step] = reward, done
        sync()
        rollout_time += time.perf_counter() - phase_start
        phase_start = time.perf_counter()

        with torch.no_grad():  # GAE; dones_buf[t]: the obs stored at t + 1 starts a new episode
            advantages = torch.zeros_like(rewards_buf)
            last_gae, next_value = 0.0, agent.get_value(next_obs)
            for t in reversed(range(num_steps)):
                nonterminal = 1.0 - dones_buf[t]
                delta = rewards_buf[t] + args.gamma * next_value * nonterminal - values_buf[t]
                advantages[t] = last_gae = delta + args.gamma * args.gae_lambda * nonterminal * last_gae
                next_value = values_buf[t]
            returns = advantages + values_buf

        b_obs, b_actions, b_means = obs_buf.flatten(0, 1), actions_buf.flatten(0, 1), means_buf.flatten(0, 1)
        b_logprobs, b_advantages = logprobs_buf.flatten(), advantages.flatten()
        b_returns, b_values = returns.flatten(), values_buf.flatten()
        old_std = agent.actor_logstd.detach().exp()  # the rollout policy's
        for _epoch in range(args.update_epochs):
            order = torch.randperm(batch_size, device=device)
            for begin in range(0, batch_size, minibatch_size):
                mb = order[begin : begin + minibatch_size]
                if args.lr_schedule == "adaptive":  # on the KL from the rollout policy to the current one
                    with torch.no_grad():
                        new = Normal(agent.actor_mean(b_obs[mb]), agent.actor_logstd.exp())
                        kl = float(kl_divergence(Normal(b_means[mb], old_std), new).sum(-1).mean())
                    if kl > 2.0 * args.desired_kl:
                        lr = max(1e-5, lr / 1.5)
                    elif 0.0 < kl < args.desired_kl / 2.0:
                        lr = min(1e-2, lr * 1.5)
                    optimizer.param_groups[0]["lr"] = lr
                _, newlogprob, entropy, newvalue = agent.get_action_and_value(b_obs[mb], b_actions[mb])
                logratio = newlogprob - b_logprobs[mb]
                ratio = logratio.exp()
                with torch.no_grad():
                    approx_kl = ((ratio - 1) - logratio).mean()
                mb_adv = b_advantages[mb]
                if args.norm_adv:
                    mb_adv = (mb_adv - mb_adv.mean()) / (mb_adv.std() + 1e-8)
                pg_loss = torch.max(-mb_adv * ratio, -mb_adv * ratio.clamp(1 - args.clip_coef, 1 + args.clip_coef))
                v_loss = (newvalue - b_returns[mb]).square()
                if args.clip_vloss:
                    v_clipped = b_values[mb] + (newvalue - b_values[mb]).clamp(-args.clip_coef, args.clip_coef)
                    v_loss = torch.max(v_loss, (v_clipped - b_returns[mb]).square())
                v_loss = 0.5 * v_loss.mean()
                loss = pg_loss.mean() - args.ent_coef * entropy.mean() + args.vf_coef * v_loss
                optimizer.zero_grad()
                loss.backward()
                nn.utils.clip_grad_norm_(agent.parameters(), args.max_grad_norm)
                optimizer.step()
            if args.target_kl is not None and float(approx_kl) > args.target_kl:
                break
        sync()
        update_time += time.perf_counter() - phase_start

        # -- logging: metrics.json is rewritten at every progress line, so a stopped run leaves its curve --------------
        now, recent = time.perf_counter(), episodes.return_queue
        mean_return = float(recent.mean()) if recent.numel() else None
        entry = {"global_step": global_step, "time": now - train_start, "mean_return": mean_return, "lr": lr}
        history.append({**entry, "task_metrics": task_metrics(base)} if has_metrics else entry)
        if now - last_log >= args.log_every or iteration == num_iterations:
            last_log = now
            print(
                f"step {global_step:>9,} | {entry['time']:6.1f}s | SPS {global_step / entry['time']:7.0f} | return "
                f"{fmt(mean_return, '7.2f')} ({recent.numel()} eps) | v_loss {v_loss.item():.4f} kl "
                f"{approx_kl.item():.4f} std {agent.actor_logstd.exp().mean().item():.3f} lr {lr:.1e}"
                + "".join(f" | {key} {value:.3f}" for key, value in history[-1].get("task_metrics", {}).items())
            )
            partial = {"complete": False, "args": settings, "history": history}
            (out_dir / "metrics.json").write_text(json.dumps(partial, indent=1, allow_nan=False))

    train_time, final_returns = time.perf_counter() - train_start, episodes.return_queue
    final_return = float(final_returns.mean()) if final_returns.numel() else None
    print(
        f"trained {global_step:,} steps in {train_time:.1f}s ({global_step / train_time:.0f} SPS; rollouts "
        f"{global_step / rollout_time:.0f} SPS, updates {update_time:.1f}s), {episodes.episode_count} episodes"
    )
    network = {"hidden_sizes": args.hidden_sizes, "activation": args.activation}
    obs_rms = envs.obs_rms.state_dict() if args.norm_obs else None
    checkpoint = {"agent": agent.state_dict(), "obs_rms": obs_rms, "obs_dim": obs_dim, "act_dim": act_dim}
    torch.save({**checkpoint, "network": network, "args": settings}, out_dir / "checkpoint.pt")
    envs.close()

    # -- video: the action mean on a small env of its own that renders (the training env has no camera) --------------
    video_start, video_result = time.perf_counter(), None
    if args.capture_video:
        workers = min(args.num_workers, 1)
        video_env = GenesisVectorEnv(args.video_envs, args.task, num_workers=workers, render_mode="rgb_array", **same)
        normalize = envs.normalize if args.norm_obs else lambda obs: obs
        act = lambda obs: agent.actor_mean(normalize(obs).clamp(-obs_clip, obs_clip)).clamp(low, high)  # noqa: E731
        video = record(video_env, act, out_dir / "video.mp4", args.video_steps, envs=args.video_envs, seed=args.seed)
        video_env.close()
        video_result = {"path": str(video.path), "frames": video.frames, "returns": video.returns}
        ended = "; ".join(f"env {i}: " + ", ".join(f"{r:.2f}" for r in rs) for i, rs in enumerate(video.returns) if rs)
        print(f"video: {video.path} ({video.frames} frames); returns of the episodes that ended: {ended or 'none'}")
    video_time = time.perf_counter() - video_start

    # -- outputs: summary line, learning curve, metrics.json ----------------------------------------------------------
    window = f" (mean of the last {final_returns.numel()} episodes)" if final_returns.numel() else ""
    summary = f"{args.task}: training return {fmt(final_return)}{window}"
    summary += "".join(f", {key} {value:.3f}" for key, value in history[-1].get("task_metrics", {}).items())
    try:
        import matplotlib.pyplot as plt

        plt.switch_backend("agg")
        fig, ax = plt.subplots(figsize=(7, 4), dpi=100)
        points = [(h["global_step"], h["mean_return"]) for h in history if h["mean_return"] is not None]
        ax.plot([x for x, _ in points], [y for _, y in points])
        ax.set(xlabel="env steps", ylabel="episode return (recent mean)", title=f"PPO on {args.task} ({num_envs} envs)")
        ax.grid(alpha=0.3)
        fig.savefig(out_dir / "learning_curve.png", bbox_inches="tight")
    except ImportError:
        print("note: matplotlib is not installed, so no learning_curve.png (pip install matplotlib)")
    wall_time = time.perf_counter() - start
    times = {"build": build_time, "train": train_time, "video": video_time}
    result = {"complete": True, "args": settings, "summary": summary, "iterations": iterations}
    result |= {"planned_iterations": num_iterations, "global_step": global_step, "episodes": episodes.episode_count}
    result |= {"final_return": final_return, "final_episodes": final_returns.numel(), "final_lr": lr}
    phases = {"rollout": rollout_time, "update": update_time, "wall": wall_time}
    result |= {"times": {**times, **phases}, "video": video_result, "history": history}
    (out_dir / "metrics.json").write_text(json.dumps(result, indent=1, allow_nan=False))
    print(f"wall time {wall_time:.1f}s ({', '.join(f'{k} {v:.1f}s' for k, v in times.items())}); outputs in {out_dir}")
    print(f"play the policy: python examples/play.py {out_dir / 'checkpoint.pt'}")
    print(summary)
