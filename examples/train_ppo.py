"""PPO on ``GenesisMultiGPU-v0``: a single-file, CleanRL-style trainer that keeps everything in torch tensors.

The env returns torch tensors on ``envs.main_device`` and takes torch actions, so the rollout buffers, the running
observation/reward normalizers, GAE and the episode statistics all live on that device: no numpy round trip.

Algorithm (CleanRL ``ppo_continuous_action`` with two changes that matter for a batched simulator):

* a Gaussian policy with a state-independent log-std, MLPs (tanh by default, ``--activation elu``,
  ``--hidden-sizes``) for the actor and the critic;
* GAE, clipped surrogate and clipped value loss, per-minibatch advantage normalization, gradient clipping;
* learning rate annealed linearly to 0, constant, or adapted to the KL divergence between the rollout policy and the
  current one before every minibatch step (``--lr-schedule adaptive``: divided by 1.5 above ``2 * desired_kl``,
  multiplied by 1.5 below ``desired_kl / 2``, kept in ``[1e-5, 1e-2]``; the rsl_rl schedule);
* optional running observation normalization and running reward scaling (by the std of the discounted return);
* truncation is not termination: the env runs with ``autoreset_mode=SAME_STEP``, which puts the true pre-reset
  observations in ``info["final_obs"]``; an env that was truncated (and not terminated) gets
  ``gamma * V(final_obs)`` added to its reward, so time limits do not look like failures to the critic.

Task presets: ``--task go2-walk`` switches the defaults to legged-locomotion settings (those of Genesis' Go2
locomotion example with rsl_rl, see ``TASK_PRESETS``); flags given on the command line still win, and
``--task-kwargs`` is merged over the preset's task options.

Before training, the script measures the mean episode return of a uniformly random policy on the same env. The
task's ``metrics()`` (e.g. Go2's forward velocity against its command) are gathered after every iteration and
printed with the progress lines. After training, the deterministic policy (the action mean) runs ``--eval-steps``
steps from a fresh reset. Outputs in ``--out-dir`` (default ``runs/<task>-<seed>``): ``checkpoint.pt`` (agent state
dict + observation normalizer), ``learning_curve.png`` (needs matplotlib) and ``metrics.json`` (effective settings,
timings and env-steps/s, the learning curve with the task metrics, the evaluation).

    python examples/train_ppo.py                         # go2-walk on a GPU, else cartpole (64 envs) on the CPU
    python examples/train_ppo.py --seed 2 --num-envs 32 --task-kwargs '{"max_episode_steps": 200}'
    python examples/train_ppo.py --task go2-walk         # 4096 envs, ~15M env steps: meant for a GPU

``train(args)`` is importable; ``parse_args([...])`` builds its argument namespace. ``compute_gae``, ``ppo_loss`` and
``RunningMeanStd.update_from_moments`` are the pieces ``ddp_ppo.py`` reuses.
"""

from __future__ import annotations

import argparse
import copy
import json
import math
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import gymnasium as gym
import torch
from gymnasium.vector import AutoresetMode
from torch import nn
from torch.distributions.normal import Normal

import gs_gym  # noqa: F401  (registers GenesisMultiGPU-v0)
from gs_gym.registration import ENV_ID

CHECKPOINT_NAME = "checkpoint.pt"
PLOT_NAME = "learning_curve.png"
METRICS_NAME = "metrics.json"

LR_SCHEDULES = ("anneal", "adaptive", "constant")
ADAPTIVE_LR_FACTOR = 1.5
ADAPTIVE_LR_MIN = 1e-5
ADAPTIVE_LR_MAX = 1e-2
ACTIVATIONS: dict[str, type[nn.Module]] = {"tanh": nn.Tanh, "elu": nn.ELU}

GO2_PRESET_ITERATIONS = 150
TASK_PRESETS: dict[str, dict[str, Any]] = {
    # Genesis' Go2 locomotion example (examples/locomotion/go2_train.py with rsl_rl's PPO): 4096 envs x 24 steps per
    # iteration, 100-150 iterations (150 here), [512, 256, 128] ELU actor and critic, action noise std 1, KL-adaptive
    # lr from 1e-3, no observation or reward normalization, a fixed 0.5 m/s forward command.
    "go2-walk": {
        "num_envs": 4096,
        "num_steps": 24,
        "total_timesteps": GO2_PRESET_ITERATIONS * 24 * 4096,
        "hidden_sizes": [512, 256, 128],
        "activation": "elu",
        "init_log_std": 0.0,
        "learning_rate": 1e-3,
        "lr_schedule": "adaptive",
        "desired_kl": 0.01,
        "update_epochs": 5,
        "num_minibatches": 4,
        "clip_coef": 0.2,
        "clip_vloss": True,
        "ent_coef": 0.01,
        # rsl_rl's value_loss_coef 1.0 weighs a squared error; ppo_loss halves it, so 2.0 here is the same loss.
        "vf_coef": 2.0,
        "max_grad_norm": 1.0,
        "gamma": 0.99,
        "gae_lambda": 0.95,
        "norm_adv": True,
        "norm_obs": False,
        "norm_reward": False,
        "random_steps": 100,
        "return_window": 1000,
        "eval_steps": 250,  # 5 s at 50 Hz
        "task_kwargs": {"lin_vel_x_range": (0.5, 0.5), "lin_vel_y_range": (0.0, 0.0), "ang_vel_yaw_range": (0.0, 0.0)},
    },
}
"""Per-task defaults applied by ``parse_args``; ``task_kwargs`` is merged under the ``--task-kwargs`` given."""


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
    """The options with their generic defaults (``parse_args`` applies the task presets on top)."""
    p = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.ArgumentDefaultsHelpFormatter
    )
    env = p.add_argument_group("environment")
    env.add_argument(
        "--task",
        default="go2-walk" if torch.cuda.is_available() else "cartpole",
        help=f"registered gs_gym task name; presets change the defaults for {sorted(TASK_PRESETS)}",
    )
    env.add_argument("--num-envs", type=int, default=64)
    env.add_argument("--num-workers", type=int, default=1, help="worker processes (0 runs the task in-process)")
    env.add_argument(
        "--backend", choices=("gpu", "cpu"), default=None, help="default: gpu if torch.cuda.is_available() else cpu"
    )
    env.add_argument(
        "--task-kwargs",
        type=_json_dict,
        default={},
        help="task config overrides as JSON, e.g. '{\"max_episode_steps\": 200}' (merged over the "
        "preset's task options)",
    )
    env.add_argument(
        "--performance-mode",
        type=_bool,
        default=False,
        help="Genesis performance_mode (faster stepping, longer first build)",
    )
    run = p.add_argument_group("run")
    run.add_argument("--seed", type=int, default=1)
    run.add_argument("--total-timesteps", type=int, default=600_000, help="env steps summed over all envs")
    run.add_argument(
        "--max-train-time",
        type=float,
        default=None,
        help="seconds: start no new iteration after this much training time (the evaluation and the "
        "outputs still follow); default: no limit",
    )
    run.add_argument("--out-dir", default=None, help="default: runs/<task>-<seed>")
    run.add_argument(
        "--torch-threads",
        type=int,
        default=1,
        help="intra-op threads of this process (the env worker needs the other cores)",
    )
    run.add_argument(
        "--random-steps",
        type=int,
        default=300,
        help="steps of uniform random actions (per env) used to measure the random-policy baseline",
    )
    run.add_argument(
        "--eval-steps",
        type=int,
        default=200,
        help="steps (per env) of the deterministic policy after training, from a fresh reset (0: none)",
    )
    run.add_argument(
        "--return-window", type=int, default=100, help="episodes averaged for the logged and the final mean return"
    )
    run.add_argument("--log-every", type=float, default=5.0, help="seconds between progress lines")
    ppo = p.add_argument_group("PPO")
    ppo.add_argument("--num-steps", type=int, default=32, help="rollout length per env per iteration")
    ppo.add_argument("--learning-rate", type=float, default=1e-3, help="the (initial) learning rate")
    ppo.add_argument(
        "--lr-schedule",
        choices=LR_SCHEDULES,
        default=None,
        help="anneal: linearly to 0; adaptive: from the KL to the rollout policy (see --desired-kl); "
        "constant. Default: anneal if --anneal-lr else constant",
    )
    ppo.add_argument(
        "--anneal-lr",
        type=_bool,
        default=True,
        help="linearly anneal the learning rate to 0 (when --lr-schedule is not given)",
    )
    ppo.add_argument("--desired-kl", type=float, default=0.01, help="KL target of --lr-schedule adaptive")
    ppo.add_argument("--gamma", type=float, default=0.99)
    ppo.add_argument("--gae-lambda", type=float, default=0.95)
    ppo.add_argument("--num-minibatches", type=int, default=4)
    ppo.add_argument("--update-epochs", type=int, default=5)
    ppo.add_argument("--norm-adv", type=_bool, default=True)
    ppo.add_argument("--clip-coef", type=float, default=0.2)
    ppo.add_argument("--clip-vloss", type=_bool, default=True)
    ppo.add_argument("--ent-coef", type=float, default=0.0)
    ppo.add_argument("--vf-coef", type=float, default=0.5, help="weight of the value loss 0.5 * (V - R)^2")
    ppo.add_argument("--max-grad-norm", type=float, default=0.5)
    ppo.add_argument("--target-kl", type=float, default=None, help="stop an update's epochs early above this KL")
    ppo.add_argument("--norm-obs", type=_bool, default=True, help="normalize observations by running mean and std")
    ppo.add_argument(
        "--norm-reward", type=_bool, default=True, help="scale rewards by the running std of the discounted return"
    )
    ppo.add_argument(
        "--hidden-size", type=int, default=64, help="width of the two hidden layers when --hidden-sizes is not given"
    )
    ppo.add_argument(
        "--hidden-sizes",
        type=int,
        nargs="+",
        default=None,
        help="hidden layer widths of the actor and of the critic, e.g. 512 256 128",
    )
    ppo.add_argument("--activation", choices=tuple(ACTIVATIONS), default="tanh", help="hidden-layer activation")
    ppo.add_argument("--init-log-std", type=float, default=0.0, help="initial log-std of the action noise")
    return p


def _task_of(argv: Sequence[str] | None) -> str:
    """The ``--task`` of ``argv`` (ignoring everything else), to pick the preset before the full parse."""
    pre = argparse.ArgumentParser(add_help=False)
    pre.add_argument("--task", default=build_parser().get_default("task"))
    known, _ = pre.parse_known_args(argv)
    return known.task


def resolve_derived(args: argparse.Namespace) -> argparse.Namespace:
    """Fill the settings derived from others (idempotent; for namespaces from ``build_parser()`` too): ``preset``
    (None if absent), ``lr_schedule`` (from ``anneal_lr``) and ``anneal_lr`` to match, ``hidden_sizes`` (from
    ``hidden_size``), ``backend`` and ``out_dir``."""
    if not hasattr(args, "preset"):
        args.preset = None
    if args.lr_schedule is None:
        args.lr_schedule = "anneal" if args.anneal_lr else "constant"
    args.anneal_lr = args.lr_schedule == "anneal"
    if args.hidden_sizes is None:
        args.hidden_sizes = [args.hidden_size, args.hidden_size]
    args.hidden_sizes = list(args.hidden_sizes)
    if args.backend is None:
        args.backend = "gpu" if torch.cuda.is_available() else "cpu"
    if args.out_dir is None:
        args.out_dir = str(Path("runs") / f"{args.task}-{args.seed}")
    return args


def check_args(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """Refuse settings that cannot run, through ``parser.error`` (usage and the reason, exit status 2)."""
    for name in ("num_envs", "num_steps", "num_minibatches", "update_epochs", "total_timesteps", "return_window"):
        if getattr(args, name) < 1:
            parser.error(f"--{name.replace('_', '-')} must be >= 1, got {getattr(args, name)}")
    for name in ("random_steps", "eval_steps"):
        if getattr(args, name) < 0:
            parser.error(f"--{name.replace('_', '-')} must be >= 0, got {getattr(args, name)}")
    if min(args.hidden_sizes) < 1:
        parser.error(f"--hidden-sizes must be positive, got {args.hidden_sizes}")
    if args.max_train_time is not None and not args.max_train_time > 0.0:
        parser.error(f"--max-train-time must be > 0, got {args.max_train_time}")
    if not args.desired_kl > 0.0:
        parser.error(f"--desired-kl must be > 0, got {args.desired_kl}")
    batch = args.num_envs * args.num_steps
    if batch % args.num_minibatches:
        parser.error(f"num_envs * num_steps ({batch}) must be divisible by num_minibatches ({args.num_minibatches})")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """Parse ``argv`` (default ``sys.argv[1:]``) over the preset of its ``--task`` and resolve derived settings.

    Adds ``args.preset`` (the preset's task name, or None) and the ``resolve_derived`` settings; the
    ``--task-kwargs`` given win over the preset's task options.
    """
    parser = build_parser()
    task = _task_of(argv)
    preset = copy.deepcopy(TASK_PRESETS.get(task, {}))
    preset_task_kwargs = preset.pop("task_kwargs", {})
    parser.set_defaults(**preset)
    args = parser.parse_args(argv)
    args.preset = task if task in TASK_PRESETS else None
    args.task_kwargs = {**preset_task_kwargs, **args.task_kwargs}
    resolve_derived(args)
    check_args(parser, args)
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
    """``(obs - mean) / std`` clipped to ``[-clip, clip]``; ``update`` with raw observations.

    With ``enabled=False`` it is the identity (``normalize`` only casts to float32, ``update`` does nothing).
    """

    def __init__(self, shape: tuple[int, ...], device: torch.device, clip: float = 10.0, enabled: bool = True) -> None:
        super().__init__(shape, device)
        self.clip = clip
        self.enabled = enabled

    def update(self, batch: torch.Tensor) -> None:
        if self.enabled:
            super().update(batch)

    def normalize(self, obs: torch.Tensor) -> torch.Tensor:
        if not self.enabled:
            return obs.to(torch.float32)
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


def mlp(in_dim: int, hidden_sizes: Sequence[int], out_dim: int, activation: str, out_std: float) -> nn.Sequential:
    """Linear layers of widths ``hidden_sizes`` with ``activation`` between them, orthogonally initialized."""
    if activation not in ACTIVATIONS:
        raise ValueError(f"activation: expected one of {sorted(ACTIVATIONS)}, got {activation!r}")
    layers: list[nn.Module] = []
    for width in hidden_sizes:
        layers += [layer_init(nn.Linear(in_dim, width)), ACTIVATIONS[activation]()]
        in_dim = width
    layers.append(layer_init(nn.Linear(in_dim, out_dim), std=out_std))
    return nn.Sequential(*layers)


class Agent(nn.Module):
    """MLP critic and Gaussian actor with a state-independent, learned log-std.

    ``hidden``: the hidden widths (an int ``h`` means ``(h, h)``); ``activation``: a key of ``ACTIVATIONS``.
    """

    def __init__(
        self,
        obs_dim: int,
        act_dim: int,
        hidden: int | Sequence[int] = 64,
        init_log_std: float = 0.0,
        activation: str = "tanh",
    ) -> None:
        super().__init__()
        sizes = (hidden, hidden) if isinstance(hidden, int) else tuple(hidden)
        if not sizes or any(not isinstance(w, int) or w < 1 for w in sizes):
            raise ValueError(f"hidden: expected positive int widths, got {hidden!r}")
        self.hidden_sizes = sizes
        self.critic = mlp(obs_dim, sizes, 1, activation, out_std=1.0)
        self.actor_mean = mlp(obs_dim, sizes, act_dim, activation, out_std=0.01)
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


def compute_gae(
    rewards: torch.Tensor,
    values: torch.Tensor,
    dones: torch.Tensor,
    next_value: torch.Tensor,
    gamma: float,
    gae_lambda: float,
) -> tuple[torch.Tensor, torch.Tensor]:
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


def gaussian_kl(
    mean_old: torch.Tensor, log_std_old: torch.Tensor, mean_new: torch.Tensor, log_std_new: torch.Tensor
) -> torch.Tensor:
    """``KL(old || new)`` of diagonal Gaussians, summed over the last dimension (inputs broadcast)."""
    var_ratio = torch.exp(2.0 * (log_std_old - log_std_new))
    mean_term = (mean_old - mean_new).square() * torch.exp(-2.0 * log_std_new)
    return (log_std_new - log_std_old + 0.5 * (var_ratio + mean_term) - 0.5).sum(-1)


def adaptive_lr(lr: float, kl: float, desired_kl: float) -> float:
    """The next learning rate of the KL-adaptive schedule (rsl_rl's): ``lr / 1.5`` when ``kl > 2 * desired_kl``,
    ``lr * 1.5`` when ``0 < kl < desired_kl / 2``, else ``lr``; a change never leaves ``[1e-5, 1e-2]``."""
    if kl > 2.0 * desired_kl:
        return max(ADAPTIVE_LR_MIN, lr / ADAPTIVE_LR_FACTOR)
    if 0.0 < kl < desired_kl / 2.0:
        return min(ADAPTIVE_LR_MAX, lr * ADAPTIVE_LR_FACTOR)
    return lr


def annealed_lr(lr: float, iteration: int, num_iterations: int) -> float:
    """The linearly annealed learning rate of ``iteration`` (1-based): ``lr`` at the first, ``lr / N`` at the last."""
    return lr * (1.0 - (iteration - 1.0) / num_iterations)


def ppo_loss(
    policy,
    args: argparse.Namespace,
    obs: torch.Tensor,
    actions: torch.Tensor,
    logprobs: torch.Tensor,
    advantages: torch.Tensor,
    returns: torch.Tensor,
    values: torch.Tensor,
):
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


def _fmt_return(value: float, spec: str = ".2f", missing: str = "n/a (no episode finished)") -> str:
    """A mean return (or length) for people: ``missing`` instead of nan when no episode has finished."""
    return missing if math.isnan(value) else format(value, spec)


def _json_ready(value: Any) -> Any:
    """``value`` with every NaN or infinite float replaced by None, so that the JSON written is valid JSON."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {key: _json_ready(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_json_ready(item) for item in value]
    return value


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


# -- task metrics and evaluation -------------------------------------------------------------------------------------


def task_metrics(envs) -> dict[str, float]:
    """The task's ``metrics()`` over all envs: each worker's dict, averaged weighted by its env count ({} if none)."""
    env = envs.unwrapped
    per_worker = env.call("metrics")
    counts = [shard.count for shard in env.env_ranges]
    if len(per_worker) != len(counts):
        raise RuntimeError(f"metrics: expected one result per worker ({len(counts)}), got {len(per_worker)}")
    if not per_worker or not per_worker[0]:
        return {}
    total = sum(counts)
    return {
        key: sum(float(m[key]) * c for m, c in zip(per_worker, counts, strict=True)) / total for key in per_worker[0]
    }


def _average(rows: list[dict[str, float]]) -> dict[str, float]:
    """Key-wise mean of metric dicts (``step`` entries left out)."""
    if not rows:
        return {}
    return {key: sum(row[key] for row in rows) / len(rows) for key in rows[0] if key != "step"}


def evaluate(
    envs, agent: Agent, obs_norm: ObsNormalizer, steps: int, seed: int, with_metrics: bool = True
) -> dict[str, Any]:
    """Run the deterministic policy (the action mean) for ``steps`` steps from ``envs.reset(seed=seed)``.

    Returns the mean reward per env step and per env over the window, the episodes that ended in it (their mean
    return; how many by termination and by truncation only), and the task metrics after each step (``trace``),
    averaged over all steps (``task_metrics``) and over the last half (``task_metrics_last_half``, after the start-up
    transient).
    """
    device = envs.main_device
    num_envs = envs.num_envs
    act_low = torch.as_tensor(envs.single_action_space.low, dtype=torch.float32, device=device)
    act_high = torch.as_tensor(envs.single_action_space.high, dtype=torch.float32, device=device)
    tracker = EpisodeTracker(num_envs, device)
    window = torch.zeros(num_envs, dtype=torch.float64, device=device)
    terminated_count = torch.zeros((), dtype=torch.int64, device=device)
    truncated_count = torch.zeros((), dtype=torch.int64, device=device)
    trace: list[dict[str, float]] = []
    raw_obs, _ = envs.reset(seed=seed)
    for step in range(1, steps + 1):
        with torch.no_grad():
            action = agent.actor_mean(obs_norm.normalize(raw_obs))
        raw_obs, rewards, terminated, truncated, info = envs.step(torch.clamp(action, act_low, act_high))
        tracker.step(rewards)
        window += rewards
        terminated_count += terminated.sum()
        truncated_count += (truncated & ~terminated).sum()
        if "final_obs" in info:
            tracker.finish(terminated | truncated)
        if with_metrics:
            metrics = task_metrics(envs)
            if metrics:
                trace.append({"step": step, **metrics})
    returns = tracker.all_returns()
    first_of_last_half = steps // 2 + 1
    return {
        "steps": steps,
        "num_envs": num_envs,
        "seed": seed,
        "mean_reward_per_step": float(window.mean()) / max(steps, 1),
        "mean_window_return": float(window.mean()),
        "episodes": int(returns.numel()),
        "mean_return": _mean(returns),
        "terminated": int(terminated_count),
        "truncated": int(truncated_count),
        "task_metrics": _average(trace),
        "last_half_from_step": first_of_last_half,
        "task_metrics_last_half": _average([row for row in trace if row["step"] >= first_of_last_half]),
        "trace": trace,
    }


METRIC_LABELS: dict[str, tuple[str, str]] = {
    "forward_vel": ("forward velocity", "m/s"),
    "lateral_vel": ("lateral velocity", "m/s"),
    "yaw_rate": ("yaw rate", "rad/s"),
    "tracking_error": ("tracking error", "m/s"),
    "base_height": ("base height", "m"),
    "distance": ("distance to target", "m"),
}


def summary_line(task: str, evaluation: dict[str, Any] | None, final_return: float, random_return: float) -> str:
    """One line: the evaluation's task metrics (last half), its terminations, and trained vs random return."""
    parts = []
    if evaluation is not None:
        metrics = dict(evaluation["task_metrics_last_half"])
        command = metrics.pop("command_forward_vel", None)
        for key, value in metrics.items():
            label, unit = METRIC_LABELS.get(key, (key, ""))
            text = f"{label} {value:.2f} {unit}" if unit else f"{label} {value:.3f}"
            if key == "forward_vel" and command is not None:
                text += f" (command {command:.2f})"
            parts.append(text)
        parts.append(
            f"{evaluation['terminated']} terminations in the {evaluation['steps']}-step deterministic "
            f"evaluation x {evaluation['num_envs']} envs (metrics: mean over its last "
            f"{evaluation['steps'] - evaluation['last_half_from_step'] + 1} steps)"
        )
    parts.append(f"training return {_fmt_return(final_return)} (random policy {_fmt_return(random_return)})")
    return f"{task}: " + ", ".join(parts)


# -- outputs ---------------------------------------------------------------------------------------------------------


def save_plot(
    history: list[dict[str, Any]],
    random_return: float,
    title: str,
    path: Path,
    evaluation: dict[str, Any] | None = None,
) -> Path | None:
    """The learning curve; with task metrics in ``history``, a second panel of them against env steps (the
    evaluation's last-half means as markers at the end)."""
    try:
        import matplotlib
    except ImportError:
        print("note: matplotlib is not installed, skipping the learning-curve plot (pip install matplotlib)")
        return None
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    metric_rows = [(h["global_step"], h["task_metrics"]) for h in history if h.get("task_metrics")]
    panels = 2 if metric_rows else 1
    fig, axes = plt.subplots(panels, 1, figsize=(7, 4 * panels), dpi=100, squeeze=False)
    ax = axes[0][0]
    points = [(h["global_step"], h["mean_return"]) for h in history if not math.isnan(h["mean_return"])]
    if points:
        ax.plot([p[0] for p in points], [p[1] for p in points], label="PPO (mean of recent episodes)")
    if math.isfinite(random_return):
        ax.axhline(random_return, color="gray", linestyle="--", label=f"random policy ({random_return:.1f})")
    ax.set_xlabel("env steps")
    ax.set_ylabel("episode return")
    ax.set_title(title)
    ax.grid(alpha=0.3)
    ax.legend(loc="lower right")
    if metric_rows:
        ax = axes[1][0]
        steps = [row[0] for row in metric_rows]
        final = evaluation["task_metrics_last_half"] if evaluation else {}
        for key in metric_rows[0][1]:
            style = "--" if key.startswith("command") else "-"
            (line,) = ax.plot(steps, [row[1][key] for row in metric_rows], linestyle=style, label=key)
            if key in final:
                ax.plot([steps[-1]], [final[key]], marker="x", markersize=9, color=line.get_color())
        ax.set_xlabel("env steps")
        ax.set_ylabel("task metrics (mean over envs)")
        ax.set_title(
            "task metrics after each iteration (x: deterministic evaluation)"
            if final
            else "task metrics after each iteration"
        )
        ax.grid(alpha=0.3)
        ax.legend(loc="best", fontsize=8)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return path


# -- training --------------------------------------------------------------------------------------------------------


def train(args: argparse.Namespace) -> dict[str, Any]:
    """Train PPO as configured by ``args`` (see ``parse_args``); returns a summary dict (see the end)."""
    start = time.perf_counter()
    resolve_derived(args)
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
        performance_mode=getattr(args, "performance_mode", False),
        verbose=True,  # start-up progress on stderr even in a log or CI (a cold build compiles for minutes)
    )
    try:
        return _train(args, envs, out_dir, start)
    finally:
        envs.close()


def _sync(device: torch.device) -> None:
    """Wait for queued CUDA work, so that wall-clock phase timings are right."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _format_metrics(metrics: dict[str, float]) -> str:
    return " ".join(f"{key} {value:.3f}" for key, value in metrics.items())


def _train(args: argparse.Namespace, envs, out_dir: Path, start: float) -> dict[str, Any]:
    device = envs.main_device
    num_envs, num_steps = args.num_envs, args.num_steps
    obs_shape = envs.single_observation_space.shape
    act_shape = envs.single_action_space.shape
    if len(obs_shape) != 1 or len(act_shape) != 1:
        raise ValueError(f"this trainer handles flat Box spaces, got obs {obs_shape} and actions {act_shape}")
    build_time = time.perf_counter() - start
    settings = {key: value for key, value in sorted(vars(args).items())}
    print(f"settings ({'preset ' + args.preset if args.preset else 'no preset'}): {json.dumps(settings)}")
    print(
        f"env: {args.task} x{num_envs} on {args.backend} ({args.num_workers} worker(s)), main device {device}, "
        f"built in {build_time:.1f}s"
    )

    random_start = time.perf_counter()
    random_return, random_episodes = measure_random_policy(envs, args.random_steps, args.seed)
    random_time = time.perf_counter() - random_start
    print(
        f"random policy: mean return {_fmt_return(random_return)} over {random_episodes} episodes "
        f"({args.random_steps} steps x {num_envs} envs, {random_time:.1f}s)"
    )

    agent = Agent(obs_shape[0], act_shape[0], args.hidden_sizes, args.init_log_std, args.activation).to(device)
    optimizer = torch.optim.Adam(agent.parameters(), lr=args.learning_rate, eps=1e-5)
    obs_norm = ObsNormalizer(obs_shape, device, enabled=args.norm_obs)
    reward_scaler = RewardScaler(num_envs, args.gamma, device) if args.norm_reward else None
    tracker = EpisodeTracker(num_envs, device)
    act_low = torch.as_tensor(envs.single_action_space.low, dtype=torch.float32, device=device)
    act_high = torch.as_tensor(envs.single_action_space.high, dtype=torch.float32, device=device)
    adaptive = args.lr_schedule == "adaptive"

    batch_size = num_envs * num_steps
    minibatch_size = batch_size // args.num_minibatches
    num_iterations = max(1, args.total_timesteps // batch_size)

    obs_buf = torch.zeros((num_steps, num_envs, *obs_shape), device=device)
    actions_buf = torch.zeros((num_steps, num_envs, *act_shape), device=device)
    means_buf = torch.zeros((num_steps, num_envs, *act_shape), device=device) if adaptive else None
    logprobs_buf = torch.zeros((num_steps, num_envs), device=device)
    rewards_buf = torch.zeros((num_steps, num_envs), device=device)
    dones_buf = torch.zeros((num_steps, num_envs), device=device)
    values_buf = torch.zeros((num_steps, num_envs), device=device)

    raw_obs, _ = envs.reset(seed=args.seed)
    obs_norm.update(raw_obs)
    next_obs = obs_norm.normalize(raw_obs)
    has_metrics = bool(task_metrics(envs))

    history: list[dict[str, Any]] = []
    global_step = 0
    lr = args.learning_rate
    rollout_time = update_time = 0.0
    _sync(device)
    train_start = time.perf_counter()
    last_log = train_start
    stats: dict[str, float] = {}
    iterations_done = 0
    for iteration in range(1, num_iterations + 1):
        elapsed = time.perf_counter() - train_start
        if iteration > 1 and args.max_train_time is not None and elapsed >= args.max_train_time:
            print(
                f"stopping after {iterations_done} of {num_iterations} iterations: --max-train-time "
                f"{args.max_train_time:g}s reached",
                flush=True,
            )
            break
        iterations_done = iteration
        if args.lr_schedule == "anneal":
            lr = annealed_lr(args.learning_rate, iteration, num_iterations)
            optimizer.param_groups[0]["lr"] = lr

        # -- rollout ----------------------------------------------------------------------------------------------
        phase_start = time.perf_counter()
        for step in range(num_steps):
            global_step += num_envs
            obs_buf[step] = next_obs
            with torch.no_grad():
                action, logprob, _, value = agent.get_action_and_value(next_obs)
                if means_buf is not None:
                    means_buf[step] = agent.actor_mean(next_obs)
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
        _sync(device)
        now = time.perf_counter()
        rollout_time += now - phase_start
        phase_start = now

        # -- GAE --------------------------------------------------------------------------------------------------
        with torch.no_grad():
            advantages, returns = compute_gae(
                rewards_buf, values_buf, dones_buf, agent.get_value(next_obs), args.gamma, args.gae_lambda
            )

        # -- PPO update -------------------------------------------------------------------------------------------
        b_obs = obs_buf.reshape(batch_size, *obs_shape)
        b_actions = actions_buf.reshape(batch_size, *act_shape)
        b_means = means_buf.reshape(batch_size, *act_shape) if means_buf is not None else None
        old_log_std = agent.actor_logstd.detach().clone()  # the rollout policy's
        b_logprobs = logprobs_buf.reshape(-1)
        b_advantages = advantages.reshape(-1)
        b_returns = returns.reshape(-1)
        b_values = values_buf.reshape(-1)
        clipfracs = []
        for _epoch in range(args.update_epochs):
            order = torch.randperm(batch_size, device=device)
            for begin in range(0, batch_size, minibatch_size):
                mb = order[begin : begin + minibatch_size]
                if b_means is not None:  # KL between the rollout policy and the current one, before this step
                    with torch.no_grad():
                        new_mean = agent.actor_mean(b_obs[mb])
                        kl = gaussian_kl(b_means[mb], old_log_std, new_mean, agent.actor_logstd).mean()
                    lr = adaptive_lr(lr, float(kl), args.desired_kl)
                    optimizer.param_groups[0]["lr"] = lr
                loss, pg_loss, v_loss, entropy_loss, approx_kl, clipfrac = ppo_loss(
                    agent.get_action_and_value,
                    args,
                    b_obs[mb],
                    b_actions[mb],
                    b_logprobs[mb],
                    b_advantages[mb],
                    b_returns[mb],
                    b_values[mb],
                )
                clipfracs.append(clipfrac)
                optimizer.zero_grad()
                loss.backward()
                nn.utils.clip_grad_norm_(agent.parameters(), args.max_grad_norm)
                optimizer.step()
            if args.target_kl is not None and float(approx_kl) > args.target_kl:
                break
        _sync(device)
        update_time += time.perf_counter() - phase_start

        # -- logging ----------------------------------------------------------------------------------------------
        metrics = task_metrics(envs) if has_metrics else {}
        now = time.perf_counter()
        recent_returns, recent_lengths = tracker.last(args.return_window)
        mean_return = _mean(recent_returns)
        sps = global_step / (now - train_start)
        entry: dict[str, Any] = {
            "iteration": iteration,
            "global_step": global_step,
            "time": now - train_start,
            "mean_return": mean_return,
            "sps": sps,
            "lr": lr,
        }
        if metrics:
            entry["task_metrics"] = metrics
        history.append(entry)
        if now - last_log >= args.log_every or iteration == num_iterations:
            last_log = now
            partial = {
                "complete": False,
                "task": args.task,
                "preset": args.preset,
                "args": settings,
                "random_return": random_return,
                "global_step": global_step,
                "train_time": now - train_start,
                "rollout_time": rollout_time,
                "update_time": update_time,
                "history": history,
            }
            # written every iteration: survives a killed run
            (out_dir / METRICS_NAME).write_text(json.dumps(_json_ready(partial), indent=1, allow_nan=False))
            with torch.no_grad():
                y_var = b_returns.var()
                explained = float("nan") if y_var == 0 else float(1 - (b_returns - b_values).var() / y_var)
            stats = {
                "pg_loss": pg_loss.item(),
                "v_loss": v_loss.item(),
                "entropy": entropy_loss.item(),
                "approx_kl": float(approx_kl),
                "clipfrac": float(torch.stack(clipfracs).mean()),
                "explained_var": explained,
                "std": agent.actor_logstd.exp().mean().item(),
                "lr": lr,
            }
            line = (
                f"step {global_step:>9,} | {now - train_start:6.1f}s | SPS {sps:7.0f} | "
                f"return {_fmt_return(mean_return, '7.2f', '    n/a')} "
                f"(len {_fmt_return(_mean(recent_lengths), '5.1f', '  n/a')}, {tracker.count()} eps) | "
                f"v_loss {stats['v_loss']:.4f} kl {stats['approx_kl']:.4f} std {stats['std']:.3f} "
                f"ev {stats['explained_var']:.2f} lr {lr:.1e}"
            )
            print(line + (f" | {_format_metrics(metrics)}" if metrics else ""), flush=True)

    train_time = time.perf_counter() - train_start
    final_returns, final_lengths = tracker.last(args.return_window)
    final_return = _mean(final_returns)
    sps = global_step / train_time
    print(
        f"trained {global_step:,} steps in {train_time:.1f}s ({sps:.0f} SPS; rollout {rollout_time:.1f}s = "
        f"{global_step / max(rollout_time, 1e-9):.0f} SPS, updates {update_time:.1f}s), {tracker.count()} episodes",
        flush=True,
    )

    checkpoint_path = out_dir / CHECKPOINT_NAME
    save_checkpoint(checkpoint_path, agent, obs_norm, args, global_step, obs_shape, act_shape)

    evaluation = None
    eval_time = 0.0
    if args.eval_steps > 0:
        eval_start = time.perf_counter()
        evaluation = evaluate(envs, agent, obs_norm, args.eval_steps, args.seed, with_metrics=has_metrics)
        eval_time = time.perf_counter() - eval_start
        extra = _format_metrics(evaluation["task_metrics_last_half"])
        print(
            f"evaluation ({args.eval_steps} steps x {num_envs} envs, deterministic, {eval_time:.1f}s): "
            f"reward/step {evaluation['mean_reward_per_step']:.4f}, {evaluation['episodes']} episodes ended "
            f"({evaluation['terminated']} terminated), mean return {_fmt_return(evaluation['mean_return'])}"
            + (f" | last half: {extra}" if extra else ""),
            flush=True,
        )

    title = f"PPO on {args.task} ({num_envs} envs, {args.backend}, seed {args.seed})"
    plot_path = save_plot(history, random_return, title, out_dir / PLOT_NAME, evaluation)
    summary = summary_line(args.task, evaluation, final_return, random_return)

    result = {
        "complete": True,
        "task": args.task,
        "preset": args.preset,
        "args": settings,
        "summary": summary,
        "random_return": random_return,
        "random_episodes": random_episodes,
        "final_return": final_return,
        "final_episodes": int(final_returns.numel()),
        "final_length": _mean(final_lengths),
        "episodes": tracker.count(),
        "num_envs": num_envs,
        "iterations": iterations_done,
        "planned_iterations": num_iterations,
        "global_step": global_step,
        "sps": sps,
        "rollout_sps": global_step / max(rollout_time, 1e-9),
        "train_time": train_time,
        "rollout_time": rollout_time,
        "update_time": update_time,
        "build_time": build_time,
        "random_time": random_time,
        "eval_time": eval_time,
        "wall_time": time.perf_counter() - start,
        "final_lr": lr,
        "final_task_metrics": history[-1].get("task_metrics", {}),
        "eval": evaluation,
        "checkpoint": str(checkpoint_path),
        "plot": None if plot_path is None else str(plot_path),
        "last_stats": stats,
        "history": history,
    }
    (out_dir / METRICS_NAME).write_text(json.dumps(_json_ready(result), indent=1, allow_nan=False))
    print(
        f"wall time {result['wall_time']:.1f}s (build {build_time:.1f}s, random policy {random_time:.1f}s, "
        f"training {train_time:.1f}s, evaluation {eval_time:.1f}s); outputs in {out_dir}"
    )
    print(
        f"final mean return over last {result['final_episodes']} episodes: {_fmt_return(final_return)} "
        f"(random policy: {_fmt_return(random_return)})"
    )
    print(summary, flush=True)
    return result


def save_checkpoint(
    path: Path,
    agent: Agent,
    obs_norm: ObsNormalizer,
    args: argparse.Namespace,
    global_step: int,
    obs_shape: Sequence[int],
    act_shape: Sequence[int],
    **extra: Any,
) -> None:
    """Write what ``load_checkpoint`` reads (plus ``extra`` entries, e.g. ``ddp_ppo``'s world size)."""
    torch.save(
        {
            "agent": agent.state_dict(),
            "obs_normalizer": obs_norm.state_dict(),
            "obs_clip": obs_norm.clip,
            "obs_norm": obs_norm.enabled,
            "args": vars(args),
            "global_step": global_step,
            "obs_shape": tuple(obs_shape),
            "act_shape": tuple(act_shape),
            **extra,
        },
        path,
    )


def load_checkpoint(path: str | Path, device: str | torch.device = "cpu") -> tuple[Agent, ObsNormalizer]:
    """The agent and observation normalizer saved by ``train``; act with ``agent.actor_mean(norm.normalize(obs))``."""
    data = torch.load(path, map_location=device, weights_only=False)
    args = data["args"]
    hidden = args.get("hidden_sizes") or args["hidden_size"]
    agent = Agent(data["obs_shape"][0], data["act_shape"][0], hidden, activation=args.get("activation", "tanh"))
    agent = agent.to(device)
    agent.load_state_dict(data["agent"])
    norm = ObsNormalizer(data["obs_shape"], torch.device(device), data["obs_clip"], enabled=data.get("obs_norm", True))
    norm.load_state_dict(data["obs_normalizer"])
    return agent, norm


def main(argv: list[str] | None = None) -> dict[str, Any]:
    return train(parse_args(argv))


if __name__ == "__main__":
    main()
