"""Data-parallel PPO over torchrun ranks: the PPO of ``examples/train_ppo.py`` with one ``GenesisVectorEnv`` per rank.

Every rank steps its own env (seeded so that the ranks' envs together are seeded like one env of ``world_size *
num_envs``) and computes its own losses; ``DistributedDataParallel`` averages the gradients. What else must agree is
decided over all ranks: the observation and reward statistics are updated from all ranks' moments (one small
all-reduce each per env step), and the adaptive lr, ``--target-kl`` and ``--max-train-time`` act on means over ranks.

The options are train_ppo.py's less the video flags, plus the distributed ones; ``--num-envs`` is per rank and
``--total-timesteps`` counts all ranks' env steps. Rank 0 prints and writes ``checkpoint.pt`` (train_ppo.py's format)
and ``metrics.json``, every rank ``rank<r>.json`` (env seed, first observations, checksums); see docs/distributed.md.

    torchrun --standalone --nproc_per_node=8 examples/ddp_ppo.py --num-envs 4096      # one GPU per rank
    torchrun --standalone --nproc_per_node=4 examples/ddp_ppo.py --gpus-per-rank 2    # two GPU workers per rank
    python -m torch.distributed.run --standalone --nproc_per_node=2 examples/ddp_ppo.py --backend cpu --num-envs 8
"""

import argparse
import hashlib
import itertools
import json
import math
import os
import sys
import time
from pathlib import Path

import numpy as np
import torch
import torch.distributed as dist
from gymnasium.vector import AutoresetMode
from torch import nn
from torch.distributed.elastic.multiprocessing.errors import record
from torch.distributions import Normal, kl_divergence

from gs_gym import GenesisVectorEnv
from gs_gym.distributed import (
    all_reduce_episode_stats,
    all_reduce_moments,
    all_reduce_sum,
    default_dist_backend,
    rank_info,
    vector_env_kwargs,
)
from gs_gym.wrappers import TorchNormalizeObservation, TorchRecordEpisodeStatistics, TorchRunningMeanStd

PRESETS = {  # train_ppo.py's go2-walk preset
    "go2-walk": {
        "num_envs": 4096, "num_steps": 24, "total_timesteps": 150 * 24 * 4096, "return_window": 1000,
        "hidden_sizes": [512, 256, 128], "activation": "elu", "lr_schedule": "adaptive", "ent_coef": 0.01,
        "vf_coef": 2.0, "max_grad_norm": 1.0, "norm_obs": False, "norm_reward": False,
        "task_kwargs": {"lin_vel_x_range": (0.5, 0.5), "lin_vel_y_range": (0.0, 0.0), "ang_vel_yaw_range": (0.0, 0.0)},
    },
}  # fmt: skip


def boolean(text: str) -> bool:
    if text.lower() not in ("true", "false", "1", "0"):
        raise argparse.ArgumentTypeError(f"expected true or false, got {text!r}")
    return text.lower() in ("true", "1")


def parse_args() -> argparse.Namespace:
    gpu = torch.cuda.is_available()
    formatter = argparse.ArgumentDefaultsHelpFormatter  # no abbreviations: --hidden-size is not --hidden-sizes
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0], formatter_class=formatter, allow_abbrev=False)
    p.add_argument("--task", default="go2-walk" if gpu else "cartpole", help=f"gs_gym task; presets: {list(PRESETS)}")
    p.add_argument("--num-envs", type=int, default=64, help="per rank")
    p.add_argument("--num-workers", type=int, default=None, help="env workers per rank; default one per GPU")
    p.add_argument("--backend", choices=("gpu", "cpu"), default="gpu" if gpu else "cpu")
    p.add_argument("--task-kwargs", type=json.loads, default={}, help="task options as a JSON object")
    p.add_argument("--performance-mode", type=boolean, default=False, help="Genesis': faster steps, longer build")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--total-timesteps", type=int, default=600_000, help="env steps, summed over all envs of all ranks")
    p.add_argument("--max-train-time", type=float, default=None, help="seconds (mean over ranks): no iteration after")
    p.add_argument("--out-dir", default=None, help="default: runs/ddp-<task>-<seed>")
    p.add_argument("--torch-threads", type=int, default=1, help="threads of each rank (env workers need cores)")
    p.add_argument("--return-window", type=int, default=100, help="last episodes of each rank for the mean return")
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
    p.add_argument("--target-kl", type=float, default=None, help="end an update's epochs early above this mean KL")
    p.add_argument("--norm-obs", type=boolean, default=True, help="running mean/std normalization, clipped to 10")
    p.add_argument("--norm-reward", type=boolean, default=True, help="divide by the running std of the return")
    p.add_argument("--hidden-sizes", type=int, nargs="+", default=[64, 64], help="of the actor and of the critic")
    p.add_argument("--activation", choices=("tanh", "elu"), default="tanh")
    p.add_argument("--init-log-std", type=float, default=0.0, help="initial log-std of the action noise")
    p.add_argument("--gpus-per-rank", type=int, default=1, help="GPUs of each rank, one env worker each")
    p.add_argument("--dist-backend", choices=("nccl", "gloo"), default=None, help="default: nccl on GPUs, else gloo")
    p.add_argument("--fail-rank", type=int, default=None, help="debug: this rank raises after its first update")
    preset = PRESETS.get(p.parse_known_args()[0].task, {})
    p.set_defaults(**{key: value for key, value in preset.items() if key != "task_kwargs"})
    args = p.parse_args()
    if not isinstance(args.task_kwargs, dict):
        p.error(f"--task-kwargs must be a JSON object, got {args.task_kwargs!r}")
    args.preset, args.task_kwargs = args.task if preset else None, {**preset.get("task_kwargs", {}), **args.task_kwargs}
    args.out_dir = args.out_dir or f"runs/ddp-{args.task}-{args.seed}"
    counts = ("num_envs", "num_steps", "num_minibatches", "update_epochs", "total_timesteps", "return_window")
    checks = [(name, getattr(args, name) >= 1, ">= 1") for name in counts]
    checks += [("hidden_sizes", min(args.hidden_sizes) > 0, "> 0"), ("desired_kl", args.desired_kl > 0, "> 0")]
    checks += [("max_train_time", args.max_train_time is None or args.max_train_time > 0, "> 0")]
    for name, ok, bound in checks:
        if not ok:
            p.error(f"--{name.replace('_', '-')} must be {bound}, got {getattr(args, name)}")
    if args.num_envs * args.num_steps % args.num_minibatches:
        p.error(f"num_envs * num_steps ({args.num_envs * args.num_steps}) must be divisible by --num-minibatches")
    if args.backend == "gpu" and args.num_workers == 0:
        p.error("--num-workers 0 runs Genesis on its default GPU, not on this rank's; use >= 1 with --backend gpu")
    world_size = rank_info().world_size
    if args.fail_rank is not None and not 0 <= args.fail_rank < world_size:
        p.error(f"--fail-rank must be a rank in [0, {world_size}), got {args.fail_rank}")
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
    """train_ppo.py's agent; ``forward`` is ``get_action_and_value``, the call whose gradients DDP averages."""

    def __init__(self, obs_dim: int, act_dim: int, hidden_sizes: list[int], activation: str, init_log_std=0.0):
        super().__init__()
        self.critic = mlp(obs_dim, hidden_sizes, 1, activation, out_std=1.0)
        self.actor_mean = mlp(obs_dim, hidden_sizes, act_dim, activation, out_std=0.01)
        self.actor_logstd = nn.Parameter(torch.full((1, act_dim), float(init_log_std)))

    def get_value(self, x: torch.Tensor) -> torch.Tensor:
        return self.critic(x).squeeze(-1)

    def forward(self, x: torch.Tensor, action: torch.Tensor | None = None):
        mean = self.actor_mean(x)
        dist = Normal(mean, self.actor_logstd.expand_as(mean).exp())
        if action is None:
            action = dist.sample()
        return action, dist.log_prob(action).sum(-1), dist.entropy().sum(-1), self.get_value(x)


class SyncedRunningMeanStd(TorchRunningMeanStd):
    """Updated from the moments of every rank's batch together (one all-reduce): the same statistics on all ranks."""

    def update(self, batch: torch.Tensor) -> None:
        count, mean, var = all_reduce_moments(batch, shift=self.mean)
        delta, total = mean - self.mean, self.count + count
        self.mean = self.mean + delta * (count / total)
        self.var = (self.var * self.count + var * count + delta.square() * (self.count * count / total)) / total
        self.count = total


def rank_mean(value: float | torch.Tensor) -> float:
    """The mean of ``value`` over ranks, the same on every rank (a collective: every rank must call it)."""
    return float(all_reduce_sum(torch.as_tensor(value, dtype=torch.float64).reshape(1))) / dist.get_world_size()


def digest(tensors) -> str:
    return hashlib.sha256(b"".join(t.detach().cpu().contiguous().numpy().tobytes() for t in tensors)).hexdigest()


def fmt(value: float | None, spec: str = ".2f") -> str:
    return "n/a (no episode finished)" if value is None else format(value, spec)


@record  # torchrun reports a failing rank's traceback
def main() -> None:
    args, me = parse_args(), rank_info()
    sys.stdout.reconfigure(line_buffering=True)
    log = print if me.is_main else lambda *_: None
    env_kwargs = vector_env_kwargs(me, args.num_envs, args.seed, backend=args.backend, gpus_per_rank=args.gpus_per_rank)
    if env_kwargs["backend"] == "gpu":
        torch.cuda.set_device(torch.device(env_kwargs["main_device"]))
    backend = args.dist_backend or default_dist_backend(env_kwargs["main_device"])
    if me.world_size == 1 and "MASTER_ADDR" not in os.environ:  # started without torchrun: a group of one
        dist.init_process_group(backend, store=dist.HashStore(), rank=0, world_size=1)
    else:
        dist.init_process_group(backend)
    torch.set_num_threads(args.torch_threads)
    out_dir, world, env_seed = Path(args.out_dir), me.world_size, env_kwargs["seed"]
    out_dir.mkdir(parents=True, exist_ok=True)
    settings = dict(sorted(vars(args).items()))
    log(f"settings ({'preset ' + args.preset if args.preset else 'no preset'}): {json.dumps(settings)}")

    start = time.perf_counter()
    # verbose: start-up progress on stderr, also into a log (a first build compiles for minutes)
    options = {"autoreset_mode": AutoresetMode.SAME_STEP, "performance_mode": args.performance_mode, "verbose": True}
    options |= {"task": args.task, "task_kwargs": args.task_kwargs, "num_workers": args.num_workers}  # None: 1 per GPU
    base = GenesisVectorEnv(**options, **env_kwargs)
    episodes = envs = TorchRecordEpisodeStatistics(base, buffer_length=args.return_window)
    if args.norm_obs:
        envs = TorchNormalizeObservation(episodes)
        envs.obs_rms = SyncedRunningMeanStd(base.single_observation_space.shape, base.main_device)
    obs_clip = 10.0 if args.norm_obs else math.inf
    device, num_envs, num_steps = base.main_device, args.num_envs, args.num_steps
    obs_dim, act_dim = base.single_observation_space.shape[0], base.single_action_space.shape[0]
    low = torch.as_tensor(base.single_action_space.low, device=device)
    high = torch.as_tensor(base.single_action_space.high, device=device)
    batch_size, minibatch_size = num_envs * num_steps, num_envs * num_steps // args.num_minibatches
    num_iterations = max(1, args.total_timesteps // (world * batch_size))
    log(
        f"{world} rank(s) x {args.task} x{num_envs} on {args.backend} ({base.num_workers} worker(s) each), built in "
        f"{time.perf_counter() - start:.1f}s; {num_iterations} iterations of {world * batch_size} env steps planned"
    )

    torch.manual_seed(args.seed)  # the same initial agent on every rank (DDP also broadcasts rank 0's)
    agent = Agent(obs_dim, act_dim, args.hidden_sizes, args.activation, args.init_log_std).to(device)
    model = nn.parallel.DistributedDataParallel(agent, device_ids=[device] if device.type == "cuda" else None)
    initial_params = digest(agent.parameters())
    torch.manual_seed(int(np.random.SeedSequence([args.seed, me.rank]).generate_state(1)[0]))  # noise: own stream
    optimizer = torch.optim.Adam(model.parameters(), lr=args.learning_rate, eps=1e-5)
    obs_buf = torch.zeros((num_steps, num_envs, obs_dim), device=device)
    actions_buf, means_buf = torch.zeros((2, num_steps, num_envs, act_dim), device=device)
    logprobs_buf, rewards_buf, dones_buf, values_buf = torch.zeros((4, num_steps, num_envs), device=device)
    return_rms = SyncedRunningMeanStd((), device)  # of the discounted return, for --norm-reward
    discounted_return = torch.zeros(num_envs, dtype=torch.float64, device=device)
    first_obs = base.reset(seed=env_seed)[0].cpu()  # raw, for the rank report (the next reset repeats it)
    next_obs = envs.reset(seed=env_seed)[0].clamp(-obs_clip, obs_clip)
    history, global_step, lr, iterations = [], 0, args.learning_rate, 0
    train_start = last_log = time.perf_counter()
    for iteration in range(1, num_iterations + 1):
        elapsed = time.perf_counter() - train_start
        if iteration > 1 and args.max_train_time and rank_mean(elapsed) >= args.max_train_time:
            log(f"stopping after {iterations} of {num_iterations} iterations: --max-train-time reached")
            break
        iterations = iteration
        if args.lr_schedule == "anneal":
            lr = optimizer.param_groups[0]["lr"] = args.learning_rate * (1.0 - (iteration - 1.0) / num_iterations)

        for step in range(num_steps):  # train_ppo.py's rollout
            global_step += world * num_envs
            obs_buf[step] = next_obs
            with torch.no_grad():
                actions_buf[step], logprobs_buf[step], _, values_buf[step] = agent(next_obs)
                means_buf[step] = agent.actor_mean(next_obs)
            next_obs, reward, terminated, truncated, info = envs.step(actions_buf[step].clamp(low, high))
            next_obs, done = next_obs.clamp(-obs_clip, obs_clip), terminated | truncated
            if args.norm_reward:
                discounted_return = discounted_return * args.gamma + reward
                return_rms.update(discounted_return)
                discounted_return = discounted_return.masked_fill(done, 0.0)
                reward = reward / torch.sqrt(return_rms.var + 1e-8)
            if "final_obs" in info:
                with torch.no_grad():
                    final_value = agent.get_value(info["final_obs"].clamp(-obs_clip, obs_clip))
                reward = reward + args.gamma * torch.where(truncated & ~terminated, final_value, 0.0)
            rewards_buf[step], dones_buf[step] = reward, done

        with torch.no_grad():  # GAE
            advantages = torch.zeros_like(rewards_buf)
            last_gae, next_value = 0.0, agent.get_value(next_obs)
            for t in reversed(range(num_steps)):
                nonterminal = 1.0 - dones_buf[t]
                delta = rewards_buf[t] + args.gamma * next_value * nonterminal - values_buf[t]
                advantages[t] = last_gae = delta + args.gamma * args.gae_lambda * nonterminal * last_gae
                next_value = values_buf[t]
            returns = advantages + values_buf

        b_obs, b_actions, b_means = obs_buf.flatten(0, 1), actions_buf.flatten(0, 1), means_buf.flatten(0, 1)
        b_logprobs, b_values = logprobs_buf.flatten(), values_buf.flatten()
        b_advantages, b_returns = advantages.flatten(), returns.flatten()
        old_std = agent.actor_logstd.detach().exp()
        for _epoch in range(args.update_epochs):
            order = torch.randperm(batch_size, device=device)
            for begin in range(0, batch_size, minibatch_size):
                mb = order[begin : begin + minibatch_size]
                if args.lr_schedule == "adaptive":  # on the KL averaged over ranks: the same lr everywhere
                    with torch.no_grad():
                        new = Normal(agent.actor_mean(b_obs[mb]), agent.actor_logstd.exp())
                        kl = rank_mean(kl_divergence(Normal(b_means[mb], old_std), new).sum(-1).mean())
                    if kl > 2.0 * args.desired_kl:
                        lr = max(1e-5, lr / 1.5)
                    elif 0.0 < kl < args.desired_kl / 2.0:
                        lr = min(1e-2, lr * 1.5)
                    optimizer.param_groups[0]["lr"] = lr
                _, newlogprob, entropy, newvalue = model(b_obs[mb], b_actions[mb])  # DDP: gradients averaged
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
                nn.utils.clip_grad_norm_(model.parameters(), args.max_grad_norm)
                optimizer.step()
            if args.target_kl is not None and rank_mean(approx_kl) > args.target_kl:  # all ranks stop together
                break
        if args.fail_rank == me.rank:
            raise RuntimeError(f"injected failure on rank {me.rank}")

        now, recent = time.perf_counter(), episodes.return_queue  # every rank joins the all-reduce, rank 0 prints
        stats = all_reduce_episode_stats(recent.sum(), recent.numel())
        mean_return = stats.mean_return if stats.episodes else None
        history.append({"global_step": global_step, "time": now - train_start, "mean_return": mean_return, "lr": lr})
        if now - last_log >= args.log_every or iteration == num_iterations:
            last_log, elapsed = now, now - train_start
            log(
                f"step {global_step:>9,} | {elapsed:6.1f}s | SPS {global_step / elapsed:7.0f} (all ranks) "
                f"| return {fmt(mean_return, '7.2f')} ({stats.episodes} eps, all ranks) | v_loss {v_loss.item():.4f}"
                f" kl {approx_kl.item():.4f} std {agent.actor_logstd.exp().mean().item():.3f} lr {lr:.1e}"
            )

    train_time = time.perf_counter() - train_start
    final_return, final_episodes = mean_return, stats.episodes  # the last iteration's: no env stepped since
    summary = {"world_size": world, "iterations": iterations, "planned_iterations": num_iterations}
    summary |= {"global_step": global_step, "final_return": final_return, "final_episodes": final_episodes}
    summary["final_lr"] = lr
    report = {"rank": me.rank, "local_rank": me.local_rank, "num_envs": num_envs, "env_seed": env_seed}  # of env 0
    report |= {"main_device": str(device), "first_obs": first_obs.tolist(), "local_episodes": episodes.episode_count}
    report |= {"initial_params_sha256": initial_params, "params_sha256": digest(agent.parameters())}
    obs_rms = envs.obs_rms if args.norm_obs else None  # the statistics every rank normalized with
    report["obs_rms_sha256"] = digest([obs_rms.mean, obs_rms.var, obs_rms.count]) if args.norm_obs else None
    (out_dir / f"rank{me.rank}.json").write_text(json.dumps({**report, **summary}, indent=1, allow_nan=False))
    if me.is_main:
        network = {"hidden_sizes": args.hidden_sizes, "activation": args.activation}
        obs_stats = obs_rms.state_dict() if args.norm_obs else None
        checkpoint = {"agent": agent.state_dict(), "obs_rms": obs_stats, "obs_dim": obs_dim, "act_dim": act_dim}
        torch.save({**checkpoint, "network": network, "args": settings, "world_size": world}, out_dir / "checkpoint.pt")
        times = {"train": train_time, "wall": time.perf_counter() - start}
        metrics = {"args": settings, **summary, "sps": global_step / train_time, "times": times, "history": history}
        (out_dir / "metrics.json").write_text(json.dumps(metrics, indent=1, allow_nan=False))
        log(
            f"trained {global_step:,} steps over {world} rank(s) in {train_time:.1f}s ({global_step / train_time:.0f} "
            f"SPS); final mean return {fmt(final_return)} over {final_episodes} episodes; outputs in {out_dir}"
        )
    envs.close()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
