"""PPO on ``GenesisMultiGPU-v0``: a single-file, CleanRL-style trainer that keeps everything in torch tensors.

The env returns torch tensors on ``envs.main_device`` and takes torch actions, so the rollout buffers, the running
observation/reward normalizers, GAE and the episode statistics all live on that device: no numpy round trip.

Algorithm (CleanRL ``ppo_continuous_action`` with two changes that matter for a batched simulator):

* a Gaussian policy with a state-independent log-std, tanh MLPs for the actor and the critic;
* GAE, clipped surrogate and clipped value loss, per-minibatch advantage normalization, gradient clipping;
* running observation normalization and running reward scaling (by the std of the discounted return), in torch;
* truncation is not termination: the env runs with ``autoreset_mode=SAME_STEP``, which puts the true pre-reset
  observations in ``info["final_obs"]``; an env that was truncated (and not terminated) gets
  ``gamma * V(final_obs)`` added to its reward, so time limits do not look like failures to the critic.

Before training, the script measures the mean episode return of a uniformly random policy on the same env, and the
final summary states the trained return against it. Outputs in ``--out-dir`` (default ``runs/<task>-<seed>``):
``checkpoint.pt`` (agent state dict + observation normalizer), ``learning_curve.png`` (needs matplotlib) and
``metrics.json``.

    python examples/train_ppo.py                         # cartpole, 64 envs, CPU unless CUDA is available
    python examples/train_ppo.py --seed 2 --num-envs 32 --task-kwargs '{"max_episode_steps": 200}'

``train(args)`` is importable; ``parse_args([...])`` builds its argument namespace. ``compute_gae``, ``ppo_loss`` and
``RunningMeanStd.update_from_moments`` are the pieces ``ddp_ppo.py`` reuses.
"""

from __future__ import annotations

import argparse
import json
import math
import time
from pathlib import Path
from typing import Any

import gymnasium as gym
import torch
import torch.nn as nn
from gymnasium.vector import AutoresetMode
from torch.distributions.normal import Normal

import gs_gym  # noqa: F401  (registers GenesisMultiGPU-v0)
from gs_gym.registration import ENV_ID

CHECKPOINT_NAME = "checkpoint.pt"
PLOT_NAME = "learning_curve.png"
METRICS_NAME = "metrics.json"


# -- arguments -------------------------------------------------------------------------------------------------------


def _bool(value: str) -> bool:
    if value.lower() in ("1", "true", "yes", "on"):
        return True
    if value.lower() in ("0", "false", "no", "off"):
        return False
    raise argparse.ArgumentTypeError(f"expected a boolean (true/false), got {value!r}")


def _json_dict(value: str) -> dict[str, Any]:
    try:
        parsed = json.loads(value)
    except json.JSONDecodeError as error:
        raise argparse.ArgumentTypeError(f"invalid JSON ({error})") from None
    if not isinstance(parsed, dict):
        raise argparse.ArgumentTypeError(f"expected a JSON object, got {value!r}")
    return parsed


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.ArgumentDefaultsHelpFormatter
    )
    env = p.add_argument_group("environment")
    env.add_argument("--task", default="cartpole", help="registered gs_gym task name")
    env.add_argument("--num-envs", type=int, default=64)
    env.add_argument("--num-workers", type=int, default=1, help="worker processes (0 runs the task in-process)")
    env.add_argument("--backend", choices=("gpu", "cpu"), default=None,
                     help="default: gpu if torch.cuda.is_available() else cpu")
    env.add_argument("--task-kwargs", type=_json_dict, default={},
                     help='task config overrides as JSON, e.g. \'{"max_episode_steps": 200}\'')
    run = p.add_argument_group("run")
    run.add_argument("--seed", type=int, default=1)
    run.add_argument("--total-timesteps", type=int, default=600_000, help="env steps summed over all envs")
    run.add_argument("--out-dir", default=None, help="default: runs/<task>-<seed>")
    run.add_argument("--torch-threads", type=int, default=1,
                     help="intra-op threads of this process (the env worker needs the other cores)")
    run.add_argument("--random-steps", type=int, default=300,
                     help="steps of uniform random actions (per env) used to measure the random-policy baseline")
    run.add_argument("--return-window", type=int, default=100,
                     help="episodes averaged for the logged and the final mean return")
    run.add_argument("--log-every", type=float, default=5.0, help="seconds between progress lines")
    ppo = p.add_argument_group("PPO")
    ppo.add_argument("--num-steps", type=int, default=32, help="rollout length per env per iteration")
    ppo.add_argument("--learning-rate", type=float, default=1e-3)
    ppo.add_argument("--anneal-lr", type=_bool, default=True, help="linearly anneal the learning rate to 0")
    ppo.add_argument("--gamma", type=float, default=0.99)
    ppo.add_argument("--gae-lambda", type=float, default=0.95)
    ppo.add_argument("--num-minibatches", type=int, default=4)
    ppo.add_argument("--update-epochs", type=int, default=5)
    ppo.add_argument("--norm-adv", type=_bool, default=True)
    ppo.add_argument("--clip-coef", type=float, default=0.2)
    ppo.add_argument("--clip-vloss", type=_bool, default=True)
    ppo.add_argument("--ent-coef", type=float, default=0.0)
    ppo.add_argument("--vf-coef", type=float, default=0.5)
    ppo.add_argument("--max-grad-norm", type=float, default=0.5)
    ppo.add_argument("--target-kl", type=float, default=None, help="stop an update's epochs early above this KL")
    ppo.add_argument("--norm-reward", type=_bool, default=True,
                     help="scale rewards by the running std of the discounted return")
    ppo.add_argument("--hidden-size", type=int, default=64)
    ppo.add_argument("--init-log-std", type=float, default=0.0)
    return p


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    args = build_parser().parse_args(argv)
    if args.backend is None:
        args.backend = "gpu" if torch.cuda.is_available() else "cpu"
    if args.out_dir is None:
        args.out_dir = str(Path("runs") / f"{args.task}-{args.seed}")
    batch = args.num_envs * args.num_steps
    if batch % args.num_minibatches:
        build_parser().error(
            f"num_envs * num_steps ({batch}) must be divisible by num_minibatches ({args.num_minibatches})"
        )
    return args


# -- normalizers -----------------------------------------------------------------------------------------------------


class RunningMeanStd:
    """Running mean and variance over batches (parallel Welford), float64 tensors on ``device``."""

    def __init__(self, shape: tuple[int, ...], device: torch.device, epsilon: float = 1e-4) -> None:
        self.mean = torch.zeros(shape, dtype=torch.float64, device=device)
        self.var = torch.ones(shape, dtype=torch.float64, device=device)
        self.count = torch.tensor(epsilon, dtype=torch.float64, device=device)

    def update(self, batch: torch.Tensor) -> None:
        batch = batch.to(torch.float64)
        self.update_from_moments(batch.mean(dim=0), batch.var(dim=0, unbiased=False), batch.shape[0])

    def update_from_moments(self, mean: torch.Tensor, var: torch.Tensor, count: int | torch.Tensor) -> None:
        """Merge in a batch given by its ``mean``, biased ``var`` (float64) and row ``count`` (int or 0-d tensor)."""
        delta = mean - self.mean
        total = self.count + count
        self.mean = self.mean + delta * (count / total)
        m2 = self.var * self.count + var * count + delta.square() * (self.count * count / total)
        self.var = m2 / total
        self.count = total

    def state_dict(self) -> dict[str, torch.Tensor]:
        return {"mean": self.mean.cpu(), "var": self.var.cpu(), "count": self.count.cpu()}

    def load_state_dict(self, state: dict[str, torch.Tensor]) -> None:
        device = self.mean.device
        self.mean, self.var, self.count = (state[k].to(device) for k in ("mean", "var", "count"))


class ObsNormalizer(RunningMeanStd):
    """``(obs - mean) / std`` clipped to ``[-clip, clip]``; ``update`` with raw observations."""

    def __init__(self, shape: tuple[int, ...], device: torch.device, clip: float = 10.0) -> None:
        super().__init__(shape, device)
        self.clip = clip

    def normalize(self, obs: torch.Tensor) -> torch.Tensor:
        scaled = (obs.to(torch.float64) - self.mean) / torch.sqrt(self.var + 1e-8)
        return scaled.clamp(-self.clip, self.clip).to(torch.float32)


class RewardScaler:
    """Divide rewards by the running std of the discounted return (Gymnasium's ``NormalizeReward``, batched)."""

    def __init__(self, num_envs: int, gamma: float, device: torch.device) -> None:
        self.gamma = gamma
        self.returns = torch.zeros(num_envs, dtype=torch.float64, device=device)
        self.rms = RunningMeanStd((), device)

    def __call__(self, rewards: torch.Tensor, done: torch.Tensor) -> torch.Tensor:
        self.returns = self.returns * self.gamma + rewards.to(torch.float64)
        self.rms.update(self.returns)
        self.returns = self.returns.masked_fill(done, 0.0)
        return (rewards / torch.sqrt(self.rms.var + 1e-8)).to(torch.float32)

    @property
    def scale(self) -> torch.Tensor:
        return 1.0 / torch.sqrt(self.rms.var + 1e-8)


# -- agent -----------------------------------------------------------------------------------------------------------


def layer_init(layer: nn.Linear, std: float = math.sqrt(2), bias: float = 0.0) -> nn.Linear:
    nn.init.orthogonal_(layer.weight, std)
    nn.init.constant_(layer.bias, bias)
    return layer


class Agent(nn.Module):
    """Tanh MLP critic and Gaussian actor with a state-independent, learned log-std."""

    def __init__(self, obs_dim: int, act_dim: int, hidden: int = 64, init_log_std: float = 0.0) -> None:
        super().__init__()
        self.critic = nn.Sequential(
            layer_init(nn.Linear(obs_dim, hidden)), nn.Tanh(),
            layer_init(nn.Linear(hidden, hidden)), nn.Tanh(),
            layer_init(nn.Linear(hidden, 1), std=1.0),
        )
        self.actor_mean = nn.Sequential(
            layer_init(nn.Linear(obs_dim, hidden)), nn.Tanh(),
            layer_init(nn.Linear(hidden, hidden)), nn.Tanh(),
            layer_init(nn.Linear(hidden, act_dim), std=0.01),
        )
        self.actor_logstd = nn.Parameter(torch.full((1, act_dim), float(init_log_std)))

    def get_value(self, obs: torch.Tensor) -> torch.Tensor:
        return self.critic(obs).squeeze(-1)

    def get_action_and_value(self, obs: torch.Tensor, action: torch.Tensor | None = None):
        mean = self.actor_mean(obs)
        dist = Normal(mean, self.actor_logstd.expand_as(mean).exp())
        if action is None:
            action = dist.sample()
        return action, dist.log_prob(action).sum(-1), dist.entropy().sum(-1), self.get_value(obs)


# -- PPO math --------------------------------------------------------------------------------------------------------


def compute_gae(rewards: torch.Tensor, values: torch.Tensor, dones: torch.Tensor, next_value: torch.Tensor,
                gamma: float, gae_lambda: float) -> tuple[torch.Tensor, torch.Tensor]:
    """Advantages and returns of a ``(num_steps, num_envs)`` rollout; ``dones[t]``: the obs after step t is new.

    ``next_value`` is the value of the observation after the last step; call under ``torch.no_grad()``.
    """
    advantages = torch.zeros_like(rewards)
    last_gae = torch.zeros_like(next_value)
    for t in reversed(range(rewards.shape[0])):
        following = next_value if t == rewards.shape[0] - 1 else values[t + 1]
        nonterminal = 1.0 - dones[t]  # done at t: the next stored obs starts a new episode
        delta = rewards[t] + gamma * following * nonterminal - values[t]
        last_gae = delta + gamma * gae_lambda * nonterminal * last_gae
        advantages[t] = last_gae
    return advantages, advantages + values


def ppo_loss(policy, args: argparse.Namespace, obs: torch.Tensor, actions: torch.Tensor, logprobs: torch.Tensor,
             advantages: torch.Tensor, returns: torch.Tensor, values: torch.Tensor):
    """Clipped PPO loss of one minibatch; ``(loss, pg_loss, v_loss, entropy, approx_kl, clipfrac)``.

    ``policy(obs, actions)`` returns ``Agent.get_action_and_value``'s tuple (the agent's method, or a DDP module
    wrapping it). ``args`` supplies ``clip_coef``, ``norm_adv``, ``clip_vloss``, ``ent_coef`` and ``vf_coef``;
    ``logprobs``, ``returns`` and ``values`` are the rollout's, ``advantages`` unnormalized.
    """
    _, newlogprob, entropy, newvalue = policy(obs, actions)
    logratio = newlogprob - logprobs
    ratio = logratio.exp()
    with torch.no_grad():
        approx_kl = ((ratio - 1) - logratio).mean()
        clipfrac = ((ratio - 1.0).abs() > args.clip_coef).float().mean()
    if args.norm_adv:
        advantages = (advantages - advantages.mean()) / (advantages.std() + 1e-8)
    pg_loss = torch.max(-advantages * ratio, -advantages * ratio.clamp(1 - args.clip_coef, 1 + args.clip_coef)).mean()
    if args.clip_vloss:
        v_clipped = values + (newvalue - values).clamp(-args.clip_coef, args.clip_coef)
        v_loss = 0.5 * torch.max((newvalue - returns).square(), (v_clipped - returns).square()).mean()
    else:
        v_loss = 0.5 * (newvalue - returns).square().mean()
    entropy = entropy.mean()
    loss = pg_loss - args.ent_coef * entropy + args.vf_coef * v_loss
    return loss, pg_loss, v_loss, entropy, approx_kl, clipfrac


# -- episode statistics ----------------------------------------------------------------------------------------------


class EpisodeTracker:
    """Per-env running return/length; finished episodes are kept as tensors (no per-step host sync needed).

    ``last(n)`` drops chunks older than the ones it needs, so memory stays bounded over long runs.
    """

    def __init__(self, num_envs: int, device: torch.device) -> None:
        self.ret = torch.zeros(num_envs, dtype=torch.float64, device=device)
        self.len = torch.zeros(num_envs, dtype=torch.int64, device=device)
        self.finished = torch.zeros((), dtype=torch.int64, device=device)
        self.returns: list[torch.Tensor] = []
        self.lengths: list[torch.Tensor] = []

    def step(self, rewards: torch.Tensor) -> None:
        self.ret += rewards
        self.len += 1

    def finish(self, done: torch.Tensor) -> None:
        self.returns.append(self.ret[done])
        self.lengths.append(self.len[done])
        self.finished += done.sum()
        self.ret.masked_fill_(done, 0.0)
        self.len.masked_fill_(done, 0)

    def all_returns(self) -> torch.Tensor:
        return torch.cat(self.returns) if self.returns else self.ret.new_zeros(0)

    def count(self) -> int:
        return int(self.finished)

    def last(self, n: int) -> tuple[torch.Tensor, torch.Tensor]:
        """Returns and lengths of the last ``n`` finished episodes (fewer if fewer finished)."""
        have, first = 0, len(self.returns)
        while first > 0 and have < n:
            first -= 1
            have += self.returns[first].numel()
        del self.returns[:first], self.lengths[:first]
        if not self.returns:
            return self.ret.new_zeros(0), self.len.new_zeros(0)
        return torch.cat(self.returns)[-n:], torch.cat(self.lengths)[-n:]


def _mean(values: torch.Tensor) -> float:
    return float(values.float().mean()) if values.numel() else float("nan")


# -- random baseline -------------------------------------------------------------------------------------------------


def measure_random_policy(envs, steps: int, seed: int) -> tuple[float, int]:
    """Mean return of the episodes that finish within ``steps`` steps of uniform random actions (and their count).

    The env runs in SAME_STEP mode, so every step of every env counts. Episodes still running at the end are not
    counted (a slight bias towards short episodes when ``steps`` is not much longer than a random episode).
    """
    device = envs.main_device
    low = torch.as_tensor(envs.single_action_space.low, device=device)
    high = torch.as_tensor(envs.single_action_space.high, device=device)
    generator = torch.Generator(device=device).manual_seed(seed)
    tracker = EpisodeTracker(envs.num_envs, device)
    envs.reset(seed=seed)
    shape = (envs.num_envs, *envs.single_action_space.shape)
    for _ in range(steps):
        actions = low + (high - low) * torch.rand(shape, generator=generator, device=device)
        _, rewards, terminated, truncated, info = envs.step(actions)
        tracker.step(rewards)
        if "final_obs" in info:
            tracker.finish(terminated | truncated)
    returns = tracker.all_returns()
    return _mean(returns), int(returns.numel())


# -- outputs ---------------------------------------------------------------------------------------------------------


def save_plot(history: list[dict[str, float]], random_return: float, title: str, path: Path) -> Path | None:
    try:
        import matplotlib
    except ImportError:
        print("note: matplotlib is not installed, skipping the learning-curve plot (pip install matplotlib)")
        return None
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    points = [(h["global_step"], h["mean_return"]) for h in history if not math.isnan(h["mean_return"])]
    fig, ax = plt.subplots(figsize=(7, 4), dpi=100)
    if points:
        ax.plot([p[0] for p in points], [p[1] for p in points], label="PPO (mean of recent episodes)")
    ax.axhline(random_return, color="gray", linestyle="--", label=f"random policy ({random_return:.1f})")
    ax.set_xlabel("env steps")
    ax.set_ylabel("episode return")
    ax.set_title(title)
    ax.grid(alpha=0.3)
    ax.legend(loc="lower right")
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return path


# -- training --------------------------------------------------------------------------------------------------------


def train(args: argparse.Namespace) -> dict[str, Any]:
    """Train PPO as configured by ``args`` (see ``parse_args``); returns a summary dict (see the end)."""
    start = time.perf_counter()
    torch.manual_seed(args.seed)
    if args.torch_threads:
        torch.set_num_threads(args.torch_threads)
    out_dir = Path(args.out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)

    envs = gym.make_vec(
        ENV_ID,
        num_envs=args.num_envs,
        task=args.task,
        backend=args.backend,
        num_workers=args.num_workers,
        seed=args.seed,
        autoreset_mode=AutoresetMode.SAME_STEP,
        task_kwargs=args.task_kwargs,
    )
    try:
        return _train(args, envs, out_dir, start)
    finally:
        envs.close()


def _train(args: argparse.Namespace, envs, out_dir: Path, start: float) -> dict[str, Any]:
    device = envs.main_device
    num_envs, num_steps = args.num_envs, args.num_steps
    obs_shape = envs.single_observation_space.shape
    act_shape = envs.single_action_space.shape
    if len(obs_shape) != 1 or len(act_shape) != 1:
        raise ValueError(f"this trainer handles flat Box spaces, got obs {obs_shape} and actions {act_shape}")
    build_time = time.perf_counter() - start
    print(f"env: {args.task} x{num_envs} on {args.backend} ({args.num_workers} worker(s)), main device {device}, "
          f"built in {build_time:.1f}s")

    random_return, random_episodes = measure_random_policy(envs, args.random_steps, args.seed)
    print(f"random policy: mean return {random_return:.2f} over {random_episodes} episodes "
          f"({args.random_steps} steps x {num_envs} envs)")

    agent = Agent(obs_shape[0], act_shape[0], args.hidden_size, args.init_log_std).to(device)
    optimizer = torch.optim.Adam(agent.parameters(), lr=args.learning_rate, eps=1e-5)
    obs_norm = ObsNormalizer(obs_shape, device)
    reward_scaler = RewardScaler(num_envs, args.gamma, device) if args.norm_reward else None
    tracker = EpisodeTracker(num_envs, device)
    act_low = torch.as_tensor(envs.single_action_space.low, dtype=torch.float32, device=device)
    act_high = torch.as_tensor(envs.single_action_space.high, dtype=torch.float32, device=device)

    batch_size = num_envs * num_steps
    minibatch_size = batch_size // args.num_minibatches
    num_iterations = max(1, args.total_timesteps // batch_size)

    obs_buf = torch.zeros((num_steps, num_envs, *obs_shape), device=device)
    actions_buf = torch.zeros((num_steps, num_envs, *act_shape), device=device)
    logprobs_buf = torch.zeros((num_steps, num_envs), device=device)
    rewards_buf = torch.zeros((num_steps, num_envs), device=device)
    dones_buf = torch.zeros((num_steps, num_envs), device=device)
    values_buf = torch.zeros((num_steps, num_envs), device=device)

    raw_obs, _ = envs.reset(seed=args.seed)
    obs_norm.update(raw_obs)
    next_obs = obs_norm.normalize(raw_obs)

    history: list[dict[str, float]] = []
    global_step = 0
    train_start = time.perf_counter()
    last_log = train_start
    stats: dict[str, float] = {}
    for iteration in range(1, num_iterations + 1):
        if args.anneal_lr:
            optimizer.param_groups[0]["lr"] = args.learning_rate * (1.0 - (iteration - 1.0) / num_iterations)

        # -- rollout ----------------------------------------------------------------------------------------------
        for step in range(num_steps):
            global_step += num_envs
            obs_buf[step] = next_obs
            with torch.no_grad():
                action, logprob, _, value = agent.get_action_and_value(next_obs)
            actions_buf[step] = action
            logprobs_buf[step] = logprob
            values_buf[step] = value

            raw_obs, rewards, terminated, truncated, info = envs.step(torch.clamp(action, act_low, act_high))
            done = terminated | truncated
            tracker.step(rewards)
            scaled = reward_scaler(rewards, done) if reward_scaler is not None else rewards.to(torch.float32).clone()
            if "final_obs" in info:  # some env finished; in SAME_STEP mode raw_obs already holds their reset obs
                tracker.finish(done)
                bootstrap = truncated & ~terminated
                if bool(bootstrap.any()):
                    final_obs = obs_norm.normalize(info["final_obs"][bootstrap])
                    with torch.no_grad():
                        scaled[bootstrap] += args.gamma * agent.get_value(final_obs)
            rewards_buf[step] = scaled
            dones_buf[step] = done.to(torch.float32)
            obs_norm.update(raw_obs)
            next_obs = obs_norm.normalize(raw_obs)

        # -- GAE --------------------------------------------------------------------------------------------------
        with torch.no_grad():
            advantages, returns = compute_gae(rewards_buf, values_buf, dones_buf, agent.get_value(next_obs),
                                              args.gamma, args.gae_lambda)

        # -- PPO update -------------------------------------------------------------------------------------------
        b_obs = obs_buf.reshape(batch_size, *obs_shape)
        b_actions = actions_buf.reshape(batch_size, *act_shape)
        b_logprobs = logprobs_buf.reshape(-1)
        b_advantages = advantages.reshape(-1)
        b_returns = returns.reshape(-1)
        b_values = values_buf.reshape(-1)
        clipfracs = []
        for _epoch in range(args.update_epochs):
            order = torch.randperm(batch_size, device=device)
            for begin in range(0, batch_size, minibatch_size):
                mb = order[begin : begin + minibatch_size]
                loss, pg_loss, v_loss, entropy_loss, approx_kl, clipfrac = ppo_loss(
                    agent.get_action_and_value, args, b_obs[mb], b_actions[mb], b_logprobs[mb], b_advantages[mb],
                    b_returns[mb], b_values[mb],
                )
                clipfracs.append(clipfrac)
                optimizer.zero_grad()
                loss.backward()
                nn.utils.clip_grad_norm_(agent.parameters(), args.max_grad_norm)
                optimizer.step()
            if args.target_kl is not None and float(approx_kl) > args.target_kl:
                break

        # -- logging ----------------------------------------------------------------------------------------------
        now = time.perf_counter()
        recent_returns, recent_lengths = tracker.last(args.return_window)
        mean_return = _mean(recent_returns)
        sps = global_step / (now - train_start)
        history.append({"iteration": iteration, "global_step": global_step, "time": now - train_start,
                        "mean_return": mean_return, "sps": sps})
        if now - last_log >= args.log_every or iteration == num_iterations:
            last_log = now
            with torch.no_grad():
                y_var = b_returns.var()
                explained = float("nan") if y_var == 0 else float(1 - (b_returns - b_values).var() / y_var)
            stats = {"pg_loss": pg_loss.item(), "v_loss": v_loss.item(), "entropy": entropy_loss.item(),
                     "approx_kl": float(approx_kl), "clipfrac": float(torch.stack(clipfracs).mean()),
                     "explained_var": explained, "std": agent.actor_logstd.exp().mean().item()}
            print(f"step {global_step:>9,} | {now - train_start:6.1f}s | SPS {sps:7.0f} | "
                  f"return {mean_return:7.2f} (len {_mean(recent_lengths):5.1f}, {tracker.count()} eps) | "
                  f"v_loss {stats['v_loss']:.4f} kl {stats['approx_kl']:.4f} std {stats['std']:.3f} "
                  f"ev {stats['explained_var']:.2f}", flush=True)

    train_time = time.perf_counter() - train_start
    final_returns, final_lengths = tracker.last(args.return_window)
    final_return = _mean(final_returns)
    sps = global_step / train_time

    checkpoint_path = out_dir / CHECKPOINT_NAME
    torch.save({
        "agent": agent.state_dict(),
        "obs_normalizer": obs_norm.state_dict(),
        "obs_clip": obs_norm.clip,
        "args": vars(args),
        "global_step": global_step,
        "obs_shape": tuple(obs_shape),
        "act_shape": tuple(act_shape),
    }, checkpoint_path)
    title = f"PPO on {args.task} ({num_envs} envs, {args.backend}, seed {args.seed})"
    plot_path = save_plot(history, random_return, title, out_dir / PLOT_NAME)

    result = {
        "random_return": random_return,
        "random_episodes": random_episodes,
        "final_return": final_return,
        "final_episodes": int(final_returns.numel()),
        "final_length": _mean(final_lengths),
        "episodes": tracker.count(),
        "sps": sps,
        "global_step": global_step,
        "train_time": train_time,
        "wall_time": time.perf_counter() - start,
        "checkpoint": str(checkpoint_path),
        "plot": None if plot_path is None else str(plot_path),
        "last_stats": stats,
        "history": history,
    }
    (out_dir / METRICS_NAME).write_text(json.dumps({k: v for k, v in result.items()}, indent=1))
    print(f"trained {global_step:,} steps in {train_time:.1f}s ({sps:.0f} SPS), {tracker.count()} episodes; "
          f"wall time {result['wall_time']:.1f}s; outputs in {out_dir}")
    print(f"final mean return over last {result['final_episodes']} episodes: {final_return:.2f} "
          f"(random policy: {random_return:.2f})")
    return result


def load_checkpoint(path: str | Path, device: str | torch.device = "cpu") -> tuple[Agent, ObsNormalizer]:
    """The agent and observation normalizer saved by ``train``; act with ``agent.actor_mean(norm.normalize(obs))``."""
    data = torch.load(path, map_location=device, weights_only=False)
    args = data["args"]
    agent = Agent(data["obs_shape"][0], data["act_shape"][0], args["hidden_size"]).to(device)
    agent.load_state_dict(data["agent"])
    norm = ObsNormalizer(data["obs_shape"], torch.device(device), data["obs_clip"])
    norm.load_state_dict(data["obs_normalizer"])
    return agent, norm


def main(argv: list[str] | None = None) -> dict[str, Any]:
    return train(parse_args(argv))


if __name__ == "__main__":
    main()
