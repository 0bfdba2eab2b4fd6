"""Data-parallel PPO on ``GenesisMultiGPU-v0``: ``examples/train_ppo.py`` over torchrun ranks, one vector env each.

Every rank steps its own ``GenesisVectorEnv`` (``--num-envs`` envs, seeded so that no two envs of the job share a
seed), collects its own rollout and computes its own PPO minibatch losses; ``DistributedDataParallel`` averages the
gradients, so every rank holds the same parameters after every optimizer step. The running observation normalizer
and the reward scaler's return statistics are updated from the moments of all ranks' batches together (one small
all-reduce each per env step), so they too are the same on every rank. Rank 0 logs the global SPS and the mean
episode return over all ranks, and writes ``checkpoint.pt`` (loadable by ``train_ppo.load_checkpoint``) and
``metrics.json``; every rank writes ``rank<r>.json`` (its seeds, first observations and parameter checksum).

    torchrun --standalone --nproc_per_node=8 examples/ddp_ppo.py --num-envs 4096      # one GPU per rank
    torchrun --standalone --nproc_per_node=4 examples/ddp_ppo.py --gpus-per-rank 2    # two GPU workers per rank
    python -m torch.distributed.run --standalone --nproc_per_node=2 examples/ddp_ppo.py --backend cpu --num-envs 8

``--num-envs`` is per rank and ``--total-timesteps`` counts the env steps of all ranks. The process group uses
NCCL when CUDA is available, else gloo. Multi-node launches: ``docs/distributed.md``.

The options are ``train_ppo.py``'s, task presets included (``--task go2-walk``: the same values, with the meanings
above), plus the distributed ones. Every option is honored except ``--eval-steps`` (this script does not evaluate;
the preset's value is left out), which is refused when given a non-zero value. ``--lr-schedule adaptive`` adapts the
learning rate to the KL averaged over all ranks, and ``--max-train-time`` stops on the ranks' mean training time, so
all ranks keep the same learning rate and run the same iterations.

The agent, normalizers, GAE, PPO loss, episode tracker and random baseline are imported from ``train_ppo.py`` (next
to this file).
"""

from __future__ import annotations

import argparse
import copy
import hashlib
import importlib.util
import json
import math
import os
import sys
import time
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np
import torch
import torch.distributed as dist
import torch.nn as nn
from gymnasium.vector import AutoresetMode
from torch.distributed.elastic.multiprocessing.errors import record
from torch.nn.parallel import DistributedDataParallel

from gs_gym import GenesisVectorEnv
from gs_gym.distributed import (
    RankInfo,
    all_reduce_episode_stats,
    all_reduce_moments,
    all_reduce_sum,
    default_dist_backend,
    rank_info,
    vector_env_kwargs,
)


def _load_train_ppo() -> ModuleType:
    """``examples/train_ppo.py`` as a module (examples/ is not a package)."""
    name = "gs_gym_example_train_ppo"
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, Path(__file__).resolve().with_name("train_ppo.py"))
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    return sys.modules[name]


train_ppo = _load_train_ppo()
RANK_REPORT = "rank{rank}.json"


# -- arguments -------------------------------------------------------------------------------------------------------


HONORED_OPTIONS = frozenset(
    {
        "task",
        "num_envs",
        "num_workers",
        "backend",
        "task_kwargs",
        "performance_mode",
        "seed",
        "total_timesteps",
        "max_train_time",
        "out_dir",
        "torch_threads",
        "random_steps",
        "return_window",
        "log_every",
        "num_steps",
        "learning_rate",
        "lr_schedule",
        "anneal_lr",
        "desired_kl",
        "gamma",
        "gae_lambda",
        "num_minibatches",
        "update_epochs",
        "norm_adv",
        "clip_coef",
        "clip_vloss",
        "ent_coef",
        "vf_coef",
        "max_grad_norm",
        "target_kl",
        "norm_obs",
        "norm_reward",
        "hidden_size",
        "hidden_sizes",
        "activation",
        "init_log_std",
    }
)
"""``train_ppo.py`` options (argparse dests) that this script implements."""
REFUSED_OPTIONS: dict[str, str] = {
    "eval_steps": "it does not evaluate after training; load its checkpoint.pt with train_ppo.load_checkpoint and "
    "run train_ppo.evaluate",
}
"""``train_ppo.py`` options this script does not implement, with the reason: an error unless left at the default."""


def _flag(dest: str) -> str:
    return "--" + dest.replace("_", "-")


def build_parser() -> argparse.ArgumentParser:
    """``train_ppo.build_parser()`` with this script's defaults and the distributed options (no task preset)."""
    p = train_ppo.build_parser()
    p.description = __doc__.split("\n\n")[0]
    p.set_defaults(num_workers=None, random_steps=0, eval_steps=0)
    d = p.add_argument_group("distributed (--num-envs is per rank, --total-timesteps over all ranks)")
    d.add_argument(
        "--gpus-per-rank", type=int, default=1, help="GPUs of each rank, stepped by that many env workers (GPU backend)"
    )
    d.add_argument(
        "--dist-backend",
        choices=("nccl", "gloo"),
        default=None,
        help="process group backend; default nccl when the env is on a GPU, else gloo",
    )
    d.add_argument(
        "--fail-rank", type=int, default=None, help="debug: this rank raises RuntimeError after its first PPO update"
    )
    return p


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """Like ``train_ppo.parse_args`` (task presets, derived settings, checks); ``num_workers`` None keeps the env's
    default (one worker per GPU). A ``train_ppo.py`` option that this script does not implement is a parser error
    unless it has the default value."""
    parser = build_parser()
    pre = argparse.ArgumentParser(add_help=False)  # the --task alone, to pick the preset before the full parse
    pre.add_argument("--task", default=parser.get_default("task"))
    task = pre.parse_known_args(argv)[0].task
    preset = copy.deepcopy(train_ppo.TASK_PRESETS.get(task, {}))
    preset_task_kwargs = preset.pop("task_kwargs", {})
    preset.pop("eval_steps", None)  # the evaluation after training is not part of this script
    for dest in preset:
        if dest not in HONORED_OPTIONS:
            parser.error(f"--task {task}: its preset sets {_flag(dest)}, which ddp_ppo.py does not support")
    parser.set_defaults(**preset)
    args = parser.parse_args(argv)

    known = HONORED_OPTIONS | REFUSED_OPTIONS.keys()
    for dest in sorted(vars(train_ppo.build_parser().parse_args([]))):
        if dest not in known and getattr(args, dest) != parser.get_default(dest):
            parser.error(f"{_flag(dest)} is not supported by ddp_ppo.py (a train_ppo.py option it does not know)")
    for dest, reason in REFUSED_OPTIONS.items():
        if getattr(args, dest) != parser.get_default(dest):
            parser.error(f"{_flag(dest)} is not supported by ddp_ppo.py ({reason})")

    args.task_kwargs = {**preset_task_kwargs, **args.task_kwargs}
    if args.out_dir is None:
        args.out_dir = str(Path("runs") / f"ddp-{args.task}-{args.seed}")
    train_ppo.resolve_derived(args)
    args.preset = task if task in train_ppo.TASK_PRESETS else None
    train_ppo.check_args(parser, args)
    if args.backend == "gpu" and args.num_workers == 0:
        parser.error("--num-workers 0 runs Genesis on its default GPU, not on this rank's; use >= 1 with --backend gpu")
    return args


def make_agent(args: argparse.Namespace, obs_dim: int, act_dim: int) -> train_ppo.Agent:
    """``train_ppo.Agent`` shaped by ``args`` (``hidden_sizes``, ``activation``, ``init_log_std``), as train_ppo
    builds it; call ``torch.manual_seed`` first for the same initial parameters on every rank."""
    return train_ppo.Agent(obs_dim, act_dim, args.hidden_sizes, args.init_log_std, args.activation)


# -- statistics shared by all ranks ----------------------------------------------------------------------------------


class _AllRanksUpdate:
    """``update(batch)`` from the moments of every rank's batch together: the same statistics on every rank.

    The merge is ``train_ppo.RunningMeanStd.update_from_moments``, applied to all-reduced moments.
    """

    mean: torch.Tensor

    def update(self, batch: torch.Tensor) -> None:
        n, batch_mean, batch_var = all_reduce_moments(batch, shift=self.mean)
        self.update_from_moments(batch_mean, batch_var, n)


class SyncedRunningMeanStd(_AllRanksUpdate, train_ppo.RunningMeanStd):
    """``RunningMeanStd`` over all ranks' batches."""


class SyncedObsNormalizer(_AllRanksUpdate, train_ppo.ObsNormalizer):
    """``ObsNormalizer`` over all ranks' observations; disabled (the same on every rank), it skips the all-reduce."""

    def update(self, batch: torch.Tensor) -> None:
        if self.enabled:
            super().update(batch)


# -- DDP pieces (the PPO math is train_ppo.compute_gae and train_ppo.ppo_loss) ---------------------------------------


class PolicyForward(nn.Module):
    """``forward(obs, actions) = agent.get_action_and_value(obs, actions)``: DDP synchronizes gradients of what runs
    through ``forward``, and ``Agent`` has no ``forward`` of its own."""

    def __init__(self, agent: nn.Module) -> None:
        super().__init__()
        self.agent = agent

    def forward(self, obs: torch.Tensor, actions: torch.Tensor):
        return self.agent.get_action_and_value(obs, actions)


def synced_adaptive_lr(lr: float, kl: torch.Tensor, desired_kl: float, world_size: int) -> float:
    """``train_ppo.adaptive_lr`` on the mean of this rank's ``kl`` over all ranks: the same next lr on every rank.
    Every rank must call it (a collective)."""
    return train_ppo.adaptive_lr(lr, float(all_reduce_sum(kl.detach().reshape(1))) / world_size, desired_kl)


def time_is_up(elapsed: float, limit: float, world_size: int) -> bool:
    """Whether the ranks' mean ``elapsed`` reached ``limit``: the same answer on every rank (a collective)."""
    return float(all_reduce_sum(torch.tensor([elapsed], dtype=torch.float64))) / world_size >= limit


def tensor_digest(tensors) -> str:
    """SHA-256 of the bytes of ``tensors`` (moved to the CPU), in order: equal digests mean equal bits."""
    digest = hashlib.sha256()
    for tensor in tensors:
        digest.update(tensor.detach().cpu().contiguous().numpy().tobytes())
    return digest.hexdigest()


# -- training --------------------------------------------------------------------------------------------------------


def train(args: argparse.Namespace, info: RankInfo, env_kwargs: dict[str, Any]) -> dict[str, Any]:
    """Run this rank's share of the training (the process group must be initialized); returns its report."""
    start = time.perf_counter()
    if args.torch_threads:
        torch.set_num_threads(args.torch_threads)
    out_dir = Path(args.out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    workers = {} if args.num_workers is None else {"num_workers": args.num_workers}
    envs = GenesisVectorEnv(
        task=args.task,
        autoreset_mode=AutoresetMode.SAME_STEP,
        task_kwargs=args.task_kwargs,
        performance_mode=args.performance_mode,
        verbose=True,  # start-up progress on stderr even in a log or CI (a cold build compiles for minutes)
        **workers,
        **env_kwargs,
    )
    try:
        return _train(args, info, env_kwargs["seed"], envs, out_dir, start)
    finally:
        envs.close()


def _train(
    args: argparse.Namespace, info: RankInfo, env_seed: int, envs: GenesisVectorEnv, out_dir: Path, start: float
) -> dict[str, Any]:
    device = envs.main_device
    num_envs, num_steps, world = envs.num_envs, args.num_steps, info.world_size
    obs_shape = envs.single_observation_space.shape
    act_shape = envs.single_action_space.shape
    if len(obs_shape) != 1 or len(act_shape) != 1:
        raise ValueError(f"this trainer handles flat Box spaces, got obs {obs_shape} and actions {act_shape}")
    log = print if info.is_main else (lambda *a, **k: None)
    batch_size = num_envs * num_steps
    minibatch_size = batch_size // args.num_minibatches
    num_iterations = max(1, args.total_timesteps // (world * batch_size))
    settings = {key: value for key, value in sorted(vars(args).items())}
    log(f"settings ({'preset ' + args.preset if args.preset else 'no preset'}): {json.dumps(settings)}")
    log(
        f"{world} rank(s) x {args.task} x{num_envs} on {args.backend} ({envs.num_workers} worker(s) each), "
        f"rank 0 main device {device}, built in {time.perf_counter() - start:.1f}s; {num_iterations} iterations "
        f"of {world * batch_size} env steps planned",
        flush=True,
    )

    random_return = math.nan
    if args.random_steps > 0:
        mean, count = train_ppo.measure_random_policy(envs, args.random_steps, env_seed)
        random_return = all_reduce_episode_stats(mean * count if count else 0.0, count).mean_return
        log(f"random policy: mean return {random_return:.2f} over all ranks", flush=True)

    torch.manual_seed(args.seed)  # the same initial agent on every rank (DDP also broadcasts rank 0's)
    agent = make_agent(args, obs_shape[0], act_shape[0]).to(device)
    model = DistributedDataParallel(PolicyForward(agent), device_ids=[device] if device.type == "cuda" else None)
    initial_params = tensor_digest(agent.parameters())
    # action noise and minibatch order: a stream of this rank's own
    torch.manual_seed(int(np.random.SeedSequence([args.seed, info.rank]).generate_state(1)[0]))
    optimizer = torch.optim.Adam(model.parameters(), lr=args.learning_rate, eps=1e-5)
    obs_norm = SyncedObsNormalizer(obs_shape, device, enabled=args.norm_obs)
    reward_scaler = None
    if args.norm_reward:
        reward_scaler = train_ppo.RewardScaler(num_envs, args.gamma, device)
        reward_scaler.rms = SyncedRunningMeanStd((), device)
    tracker = train_ppo.EpisodeTracker(num_envs, device)
    act_low = torch.as_tensor(envs.single_action_space.low, dtype=torch.float32, device=device)
    act_high = torch.as_tensor(envs.single_action_space.high, dtype=torch.float32, device=device)

    obs_buf = torch.zeros((num_steps, num_envs, *obs_shape), device=device)
    actions_buf = torch.zeros((num_steps, num_envs, *act_shape), device=device)
    adaptive = args.lr_schedule == "adaptive"
    means_buf = torch.zeros((num_steps, num_envs, *act_shape), device=device) if adaptive else None
    logprobs_buf = torch.zeros((num_steps, num_envs), device=device)
    rewards_buf = torch.zeros((num_steps, num_envs), device=device)
    dones_buf = torch.zeros((num_steps, num_envs), device=device)
    values_buf = torch.zeros((num_steps, num_envs), device=device)

    raw_obs, _ = envs.reset(seed=env_seed)
    first_obs = raw_obs.detach().cpu().clone()
    obs_norm.update(raw_obs)
    next_obs = obs_norm.normalize(raw_obs)

    history: list[dict[str, float]] = []
    global_step = 0
    lr = args.learning_rate
    train_start = time.perf_counter()
    last_log = train_start
    stats: dict[str, float] = {}
    iterations_done = 0
    for iteration in range(1, num_iterations + 1):
        if (
            iteration > 1
            and args.max_train_time is not None
            and time_is_up(time.perf_counter() - train_start, args.max_train_time, world)
        ):
            log(
                f"stopping after {iterations_done} of {num_iterations} iterations: --max-train-time "
                f"{args.max_train_time:g}s reached",
                flush=True,
            )
            break
        iterations_done = iteration
        if args.lr_schedule == "anneal":
            lr = train_ppo.annealed_lr(args.learning_rate, iteration, num_iterations)
            optimizer.param_groups[0]["lr"] = lr

        # -- rollout (train_ppo's, with the normalizers synchronized over ranks) ------------------------------------
        for step in range(num_steps):
            global_step += world * num_envs
            obs_buf[step] = next_obs
            with torch.no_grad():
                action, logprob, _, value = agent.get_action_and_value(next_obs)
                if means_buf is not None:
                    means_buf[step] = agent.actor_mean(next_obs)
            actions_buf[step] = action
            logprobs_buf[step] = logprob
            values_buf[step] = value
            raw_obs, rewards, terminated, truncated, step_info = envs.step(torch.clamp(action, act_low, act_high))
            done = terminated | truncated
            tracker.step(rewards)
            scaled = reward_scaler(rewards, done) if reward_scaler is not None else rewards.to(torch.float32).clone()
            if "final_obs" in step_info:
                tracker.finish(done)
                bootstrap = truncated & ~terminated
                if bool(bootstrap.any()):
                    final_obs = obs_norm.normalize(step_info["final_obs"][bootstrap])
                    with torch.no_grad():
                        scaled[bootstrap] += args.gamma * agent.get_value(final_obs)
            rewards_buf[step] = scaled
            dones_buf[step] = done.to(torch.float32)
            obs_norm.update(raw_obs)
            next_obs = obs_norm.normalize(raw_obs)

        with torch.no_grad():
            advantages, returns = train_ppo.compute_gae(
                rewards_buf, values_buf, dones_buf, agent.get_value(next_obs), args.gamma, args.gae_lambda
            )

        # -- PPO update: DDP averages the gradients of all ranks in backward() --------------------------------------
        batch = (
            obs_buf.reshape(batch_size, *obs_shape),
            actions_buf.reshape(batch_size, *act_shape),
            logprobs_buf.reshape(-1),
            advantages.reshape(-1),
            returns.reshape(-1),
            values_buf.reshape(-1),
        )
        b_means = means_buf.reshape(batch_size, *act_shape) if means_buf is not None else None
        old_log_std = agent.actor_logstd.detach().clone()  # the rollout policy's
        clipfracs = []
        for _epoch in range(args.update_epochs):
            order = torch.randperm(batch_size, device=device)
            for begin in range(0, batch_size, minibatch_size):
                mb = order[begin : begin + minibatch_size]
                if b_means is not None:  # train_ppo's KL-adaptive step, on the KL averaged over all ranks
                    with torch.no_grad():
                        kl = train_ppo.gaussian_kl(
                            b_means[mb], old_log_std, agent.actor_mean(batch[0][mb]), agent.actor_logstd
                        ).mean()
                    lr = synced_adaptive_lr(lr, kl, args.desired_kl, world)
                    optimizer.param_groups[0]["lr"] = lr
                loss, pg_loss, v_loss, entropy, approx_kl, clipfrac = train_ppo.ppo_loss(
                    model, args, *(b[mb] for b in batch)
                )
                clipfracs.append(clipfrac)
                optimizer.zero_grad()
                loss.backward()
                nn.utils.clip_grad_norm_(model.parameters(), args.max_grad_norm)
                optimizer.step()
            # every rank must stop at the same epoch: decide on the mean KL
            if (
                args.target_kl is not None
                and float(all_reduce_sum(approx_kl.detach().reshape(1))) / world > args.target_kl
            ):
                break

        if args.fail_rank == info.rank:
            raise RuntimeError(f"injected failure on rank {info.rank}")

        # -- logging: every rank takes part in the all-reduce, rank 0 prints ------------------------------------------
        now = time.perf_counter()
        recent_returns, _recent_lengths = tracker.last(args.return_window)
        episodes = all_reduce_episode_stats(recent_returns.sum(), recent_returns.numel())
        sps = global_step / (now - train_start)
        history.append(
            {
                "iteration": iteration,
                "global_step": global_step,
                "time": now - train_start,
                "mean_return": episodes.mean_return,
                "sps": sps,
                "lr": lr,
            }
        )
        if info.is_main and (now - last_log >= args.log_every or iteration == num_iterations):
            last_log = now
            stats = {
                "pg_loss": pg_loss.item(),
                "v_loss": v_loss.item(),
                "entropy": entropy.item(),
                "approx_kl": float(approx_kl),
                "clipfrac": float(torch.stack(clipfracs).mean()),
                "std": agent.actor_logstd.exp().mean().item(),
                "lr": lr,
            }
            log(
                f"step {global_step:>9,} | {now - train_start:6.1f}s | SPS {sps:7.0f} (all ranks) | "
                f"return {episodes.mean_return:7.2f} ({episodes.episodes} recent eps, all ranks) | "
                f"v_loss {stats['v_loss']:.4f} kl {stats['approx_kl']:.4f} std {stats['std']:.3f} lr {lr:.1e}",
                flush=True,
            )

    train_time = time.perf_counter() - train_start
    final_returns, _ = tracker.last(args.return_window)
    final = all_reduce_episode_stats(final_returns.sum(), final_returns.numel())
    sps = global_step / train_time
    report = {
        "rank": info.rank,
        "local_rank": info.local_rank,
        "world_size": world,
        "num_envs": num_envs,
        "env_seed": env_seed,  # env i of this rank starts with env_seed + i
        "main_device": str(device),
        "first_obs": first_obs.tolist(),
        "first_obs_sha256": tensor_digest([first_obs]),
        "iterations": iterations_done,
        "planned_iterations": num_iterations,
        "global_step": global_step,
        "final_lr": lr,
        "initial_params_sha256": initial_params,
        "params_sha256": tensor_digest(agent.parameters()),
        "obs_norm_sha256": tensor_digest([obs_norm.mean, obs_norm.var, obs_norm.count]),
        "final_return": final.mean_return,
        "final_episodes": final.episodes,
        "local_episodes": tracker.count(),
    }
    (out_dir / RANK_REPORT.format(rank=info.rank)).write_text(json.dumps(report, indent=1))
    if info.is_main:
        checkpoint_path = out_dir / train_ppo.CHECKPOINT_NAME
        train_ppo.save_checkpoint(
            checkpoint_path, agent, obs_norm, args, global_step, obs_shape, act_shape, world_size=world
        )
        metrics = {
            "task": args.task,
            "preset": args.preset,
            "args": settings,
            "iterations": iterations_done,
            "planned_iterations": num_iterations,
            "final_lr": lr,
            "random_return": random_return,
            "final_return": final.mean_return,
            "final_episodes": final.episodes,
            "sps": sps,
            "global_step": global_step,
            "world_size": world,
            "train_time": train_time,
            "wall_time": time.perf_counter() - start,
            "checkpoint": str(checkpoint_path),
            "last_stats": stats,
            "history": history,
        }
        (out_dir / train_ppo.METRICS_NAME).write_text(json.dumps(metrics, indent=1))
        log(
            f"trained {global_step:,} steps over {world} rank(s) in {train_time:.1f}s ({sps:.0f} SPS); final mean "
            f"return {final.mean_return:.2f} over {final.episodes} episodes; outputs in {out_dir}",
            flush=True,
        )
    return report


def init_process_group(info: RankInfo, backend: str) -> None:
    """Join torchrun's rendezvous (``env://``); a process started without torchrun forms a group of one."""
    if info.world_size == 1 and "MASTER_ADDR" not in os.environ:
        dist.init_process_group(backend, store=dist.HashStore(), rank=0, world_size=1)
    else:
        dist.init_process_group(backend)


@record  # torchrun reports the failing rank's traceback
def main(argv: list[str] | None = None) -> dict[str, Any]:
    args = parse_args(argv)
    info = rank_info()
    if args.fail_rank is not None and not 0 <= args.fail_rank < info.world_size:
        raise ValueError(f"--fail-rank: expected a rank in [0, {info.world_size}), got {args.fail_rank}")
    env_kwargs = vector_env_kwargs(
        info, args.num_envs, args.seed, backend=args.backend, gpus_per_rank=args.gpus_per_rank
    )
    if env_kwargs["backend"] == "gpu":
        torch.cuda.set_device(torch.device(env_kwargs["main_device"]))
    init_process_group(info, args.dist_backend or default_dist_backend(env_kwargs["main_device"]))
    report = train(args, info, env_kwargs)
    dist.destroy_process_group()
    return report


if __name__ == "__main__":
    main()
