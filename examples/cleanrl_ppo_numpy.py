"""PPO (continuous actions) in CleanRL's single-file style on ``GenesisVectorEnv(..., output="numpy")``.

The structure and hyperparameter names follow CleanRL's ``ppo_continuous_action.py``; the env is a Gymnasium 1.x
vector env wrapped in Gymnasium's stock vector wrappers (``gymnasium.wrappers.vector``), which accept it as it is:
Box spaces, numpy outputs, ``metadata["autoreset_mode"]``::

    RecordEpisodeStatistics -> ClipAction -> NormalizeObservation -> clip obs -> NormalizeReward -> clip rewards

Gymnasium 1.x changes two things for a CleanRL-style script, both handled here:

* Autoreset is ``NEXT_STEP`` (``NormalizeObservation`` accepts no other mode): the step that ends an episode returns
  its true last observation, and the *next* step resets the env, ignoring its action and returning reward 0. That
  reset step is not a transition of either episode, so it is masked out of the PPO loss; and because the observation
  after a truncation is the real final one, truncated episodes are bootstrapped with ``V(final obs)`` by plain GAE
  (only *terminated* steps cut the bootstrap; both cut the advantage recursion).
* Episode statistics: ``RecordEpisodeStatistics`` puts ``info["episode"]`` (``"r"``, ``"l"``, ``"t"`` arrays) and the
  mask ``info["_episode"]`` in the info of the step where an episode ends; there is no ``final_info`` list of
  per-env dicts any more. (For scripts that read ``infos["final_info"]`` the 0.29 way, see
  ``gs_gym.wrappers.LegacyFinalInfo`` and ``docs/ecosystem.md``.)

    python examples/cleanrl_ppo_numpy.py --total-timesteps 200000 --num-envs 16

``train(args)`` is importable; ``parse_args([...])`` builds ``args``.
"""

from __future__ import annotations

import argparse
import dataclasses
import random
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import gymnasium as gym
import numpy as np
import torch
import torch.nn as nn
import torch.optim as optim
from gymnasium.vector import AutoresetMode
from gymnasium.wrappers import vector as vector_wrappers
from torch.distributions.normal import Normal

from gs_gym import GenesisVectorEnv


@dataclass
class Args:
    exp_name: str = "cleanrl_ppo_numpy"
    """the name of this experiment"""
    seed: int = 1
    """seed of the experiment"""
    torch_deterministic: bool = True
    """if toggled, `torch.backends.cudnn.deterministic=True`"""
    cuda: bool = False
    """run the agent on CUDA when available (the env's numpy outputs live on the host either way)"""
    torch_threads: int = 1
    """intra-op threads of this process (the env worker needs the other cores)"""
    track_tensorboard: bool = False
    """write episode statistics and losses to runs/<run_name> (needs the tensorboard package)"""

    # Environment
    task: str = "cartpole"
    """the gs_gym task"""
    backend: str | None = None
    """Genesis backend: gpu or cpu (default: gpu if CUDA is available)"""
    num_workers: int = 1
    """env worker processes (0 runs the scene in this process)"""
    max_episode_steps: int | None = None
    """the task's time limit (default: the task's own)"""

    # Algorithm
    total_timesteps: int = 200_000
    """total timesteps of the experiments"""
    learning_rate: float = 3e-4
    """the learning rate of the optimizer"""
    num_envs: int = 16
    """the number of parallel game environments"""
    num_steps: int = 128
    """the number of steps to run in each environment per policy rollout"""
    anneal_lr: bool = True
    """Toggle learning rate annealing for policy and value networks"""
    gamma: float = 0.99
    """the discount factor gamma"""
    gae_lambda: float = 0.95
    """the lambda for the general advantage estimation"""
    num_minibatches: int = 8
    """the number of mini-batches"""
    update_epochs: int = 10
    """the K epochs to update the policy"""
    norm_adv: bool = True
    """Toggles advantages normalization"""
    clip_coef: float = 0.2
    """the surrogate clipping coefficient"""
    clip_vloss: bool = True
    """Toggles whether or not to use a clipped loss for the value function, as per the paper."""
    ent_coef: float = 0.0
    """coefficient of the entropy"""
    vf_coef: float = 0.5
    """coefficient of the value function"""
    max_grad_norm: float = 0.5
    """the maximum norm for the gradient clipping"""
    target_kl: float | None = None
    """the target KL divergence threshold"""

    # to be filled in runtime
    batch_size: int = 0
    """the batch size (computed in runtime)"""
    minibatch_size: int = 0
    """the mini-batch size (computed in runtime)"""
    num_iterations: int = 0
    """the number of iterations (computed in runtime)"""


def _bool(value: str) -> bool:
    if value.lower() in ("1", "true", "yes", "on"):
        return True
    if value.lower() in ("0", "false", "no", "off"):
        return False
    raise argparse.ArgumentTypeError(f"expected true or false, got {value!r}")


def parse_args(argv: list[str] | None = None) -> Args:
    """``--flag value`` for every field of :class:`Args` (CleanRL uses tyro; argparse keeps this dependency-free)."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    hints = {"bool": _bool, "int": int, "float": float, "str": str}
    for field in dataclasses.fields(Args):
        if field.name in ("batch_size", "minibatch_size", "num_iterations"):
            continue
        type_name = str(field.type).split(" | ")[0]
        parser.add_argument(
            f"--{field.name.replace('_', '-')}", dest=field.name, type=hints[type_name], default=field.default
        )
    args = Args(**vars(parser.parse_args(argv)))
    args.batch_size = args.num_envs * args.num_steps
    args.minibatch_size = args.batch_size // args.num_minibatches
    args.num_iterations = max(1, args.total_timesteps // args.batch_size)
    if args.backend is None:
        args.backend = "gpu" if torch.cuda.is_available() else "cpu"
    return args


def make_env(args: Args, raw_wrapper: Callable[[gym.vector.VectorEnv], gym.vector.VectorEnv] | None = None):
    """The GenesisVectorEnv (numpy outputs, NEXT_STEP autoreset) in Gymnasium's stock vector wrappers.

    ``raw_wrapper`` (optional) wraps the raw env before the Gymnasium wrappers (the tests record raw rewards there).
    """
    task_kwargs = {} if args.max_episode_steps is None else {"max_episode_steps": args.max_episode_steps}
    envs = GenesisVectorEnv(
        args.num_envs,
        args.task,
        backend=args.backend,
        num_workers=args.num_workers,
        seed=args.seed,
        output="numpy",
        autoreset_mode=AutoresetMode.NEXT_STEP,
        task_kwargs=task_kwargs,
        verbose=True,  # start-up progress on stderr even in a log or CI (a cold build compiles for minutes)
    )
    if raw_wrapper is not None:
        envs = raw_wrapper(envs)
    envs = vector_wrappers.RecordEpisodeStatistics(envs)  # innermost: it sees the raw rewards
    envs = vector_wrappers.ClipAction(envs)
    envs = vector_wrappers.NormalizeObservation(envs)
    envs = vector_wrappers.TransformObservation(envs, lambda obs: np.clip(obs, -10, 10))
    envs = vector_wrappers.NormalizeReward(envs, gamma=args.gamma)
    envs = vector_wrappers.TransformReward(envs, lambda reward: np.clip(reward, -10, 10))
    return envs


def layer_init(layer, std=2**0.5, bias_const=0.0):
    torch.nn.init.orthogonal_(layer.weight, std)
    torch.nn.init.constant_(layer.bias, bias_const)
    return layer


class Agent(nn.Module):
    def __init__(self, envs):
        super().__init__()
        obs_dim = int(np.array(envs.single_observation_space.shape).prod())
        act_dim = int(np.prod(envs.single_action_space.shape))
        self.critic = nn.Sequential(
            layer_init(nn.Linear(obs_dim, 64)),
            nn.Tanh(),
            layer_init(nn.Linear(64, 64)),
            nn.Tanh(),
            layer_init(nn.Linear(64, 1), std=1.0),
        )
        self.actor_mean = nn.Sequential(
            layer_init(nn.Linear(obs_dim, 64)),
            nn.Tanh(),
            layer_init(nn.Linear(64, 64)),
            nn.Tanh(),
            layer_init(nn.Linear(64, act_dim), std=0.01),
        )
        self.actor_logstd = nn.Parameter(torch.zeros(1, act_dim))

    def get_value(self, x):
        return self.critic(x)

    def get_action_and_value(self, x, action=None):
        action_mean = self.actor_mean(x)
        action_logstd = self.actor_logstd.expand_as(action_mean)
        action_std = torch.exp(action_logstd)
        probs = Normal(action_mean, action_std)
        if action is None:
            action = probs.sample()
        return action, probs.log_prob(action).sum(1), probs.entropy().sum(1), self.critic(x)


def _summary_writer(args: Args, run_name: str):
    if not args.track_tensorboard:
        return None
    try:
        from torch.utils.tensorboard import SummaryWriter
    except ImportError:
        print("note: tensorboard is not installed; logging to stdout only (pip install tensorboard)")
        return None
    writer = SummaryWriter(f"runs/{run_name}")
    writer.add_text(
        "hyperparameters", "|param|value|\n|-|-|\n" + "\n".join(f"|{key}|{value}|" for key, value in vars(args).items())
    )
    return writer


def train(args: Args, raw_wrapper: Callable | None = None, envs: gym.vector.VectorEnv | None = None) -> dict[str, Any]:
    """Train; returns the logged episodes (``global_step``, ``env``, ``r``, ``l`` from ``RecordEpisodeStatistics``),
    ``global_step``, ``sps``, the mean return of the last 20 logged episodes and the agent.

    ``envs``: an env stack from :func:`make_env` to train on (the caller keeps it and closes it); by default one is
    built (with ``raw_wrapper``) and closed at the end.
    """
    run_name = f"{args.task}__{args.exp_name}__{args.seed}__{int(time.time())}"
    writer = _summary_writer(args, run_name)

    # TRY NOT TO MODIFY: seeding
    random.seed(args.seed)
    np.random.seed(args.seed)
    torch.manual_seed(args.seed)
    torch.backends.cudnn.deterministic = args.torch_deterministic
    threads = torch.get_num_threads()
    torch.set_num_threads(args.torch_threads)
    device = torch.device("cuda" if torch.cuda.is_available() and args.cuda else "cpu")

    # env setup
    owns_envs = envs is None
    if envs is None:
        envs = make_env(args, raw_wrapper)
    assert isinstance(envs.single_action_space, gym.spaces.Box), "only continuous action space is supported"
    episodes: list[dict[str, float]] = []
    try:
        agent = Agent(envs).to(device)
        optimizer = optim.Adam(agent.parameters(), lr=args.learning_rate, eps=1e-5)

        # ALGO Logic: Storage setup
        obs = torch.zeros((args.num_steps, args.num_envs, *envs.single_observation_space.shape)).to(device)
        actions = torch.zeros((args.num_steps, args.num_envs, *envs.single_action_space.shape)).to(device)
        logprobs = torch.zeros((args.num_steps, args.num_envs)).to(device)
        rewards = torch.zeros((args.num_steps, args.num_envs)).to(device)
        terminations = torch.zeros((args.num_steps, args.num_envs)).to(device)
        dones = torch.zeros((args.num_steps, args.num_envs)).to(device)
        valids = torch.zeros((args.num_steps, args.num_envs)).to(device)
        values = torch.zeros((args.num_steps, args.num_envs)).to(device)

        # TRY NOT TO MODIFY: start the game
        global_step = 0
        start_time = time.time()
        next_obs, _ = envs.reset(seed=args.seed)
        next_obs = torch.Tensor(next_obs).to(device)
        # NEXT_STEP: an env whose last step ended an episode is reset by the next step, which ignores its action
        next_valid = torch.ones(args.num_envs).to(device)

        for iteration in range(1, args.num_iterations + 1):
            # Annealing the rate if instructed to do so.
            if args.anneal_lr:
                frac = 1.0 - (iteration - 1.0) / args.num_iterations
                optimizer.param_groups[0]["lr"] = frac * args.learning_rate

            for step in range(args.num_steps):
                global_step += args.num_envs
                obs[step] = next_obs
                valids[step] = next_valid

                # ALGO LOGIC: action logic
                with torch.no_grad():
                    action, logprob, _, value = agent.get_action_and_value(next_obs)
                    values[step] = value.flatten()
                actions[step] = action
                logprobs[step] = logprob

                # TRY NOT TO MODIFY: execute the game and log data.
                next_obs, reward, termination, truncation, infos = envs.step(action.cpu().numpy())
                done = np.logical_or(termination, truncation)
                rewards[step] = torch.as_tensor(reward, dtype=torch.float32).to(device)
                terminations[step] = torch.as_tensor(termination, dtype=torch.float32).to(device)
                dones[step] = torch.as_tensor(done, dtype=torch.float32).to(device)
                next_valid = torch.as_tensor(~done, dtype=torch.float32).to(device)
                next_obs = torch.Tensor(next_obs).to(device)

                if "episode" in infos:  # Gymnasium 1.x: the step that ends an episode carries its statistics
                    for index in np.flatnonzero(infos["_episode"]):
                        episodic_return = float(infos["episode"]["r"][index])
                        episodic_length = int(infos["episode"]["l"][index])
                        episodes.append(
                            {"global_step": global_step, "env": int(index), "r": episodic_return, "l": episodic_length}
                        )
                        if writer is not None:
                            writer.add_scalar("charts/episodic_return", episodic_return, global_step)
                            writer.add_scalar("charts/episodic_length", episodic_length, global_step)

            # bootstrap value; done at t cuts the advantage recursion, only a termination cuts the value bootstrap
            # (after a truncation, the next stored observation is the true final one: NEXT_STEP)
            with torch.no_grad():
                next_value = agent.get_value(next_obs).reshape(1, -1)
                advantages = torch.zeros_like(rewards).to(device)
                lastgaelam = 0
                for t in reversed(range(args.num_steps)):
                    nextvalues = next_value if t == args.num_steps - 1 else values[t + 1]
                    delta = rewards[t] + args.gamma * nextvalues * (1.0 - terminations[t]) - values[t]
                    advantages[t] = lastgaelam = delta + args.gamma * args.gae_lambda * (1.0 - dones[t]) * lastgaelam
                returns = advantages + values

            # flatten the batch; reset steps (valid == 0) are not transitions and stay out of the loss
            b_obs = obs.reshape((-1, *envs.single_observation_space.shape))
            b_logprobs = logprobs.reshape(-1)
            b_actions = actions.reshape((-1, *envs.single_action_space.shape))
            b_advantages = advantages.reshape(-1)
            b_returns = returns.reshape(-1)
            b_values = values.reshape(-1)
            b_valid_inds = np.flatnonzero(valids.reshape(-1).cpu().numpy())

            # Optimizing the policy and value network
            clipfracs = []
            for _epoch in range(args.update_epochs):
                np.random.shuffle(b_valid_inds)
                for mb_inds in np.array_split(b_valid_inds, args.num_minibatches):
                    if len(mb_inds) == 0:
                        continue
                    _, newlogprob, entropy, newvalue = agent.get_action_and_value(b_obs[mb_inds], b_actions[mb_inds])
                    logratio = newlogprob - b_logprobs[mb_inds]
                    ratio = logratio.exp()

                    with torch.no_grad():
                        # calculate approx_kl http://joschu.net/blog/kl-approx.html
                        old_approx_kl = (-logratio).mean()
                        approx_kl = ((ratio - 1) - logratio).mean()
                        clipfracs += [((ratio - 1.0).abs() > args.clip_coef).float().mean().item()]

                    mb_advantages = b_advantages[mb_inds]
                    if args.norm_adv:
                        mb_advantages = (mb_advantages - mb_advantages.mean()) / (mb_advantages.std() + 1e-8)

                    # Policy loss
                    pg_loss1 = -mb_advantages * ratio
                    pg_loss2 = -mb_advantages * torch.clamp(ratio, 1 - args.clip_coef, 1 + args.clip_coef)
                    pg_loss = torch.max(pg_loss1, pg_loss2).mean()

                    # Value loss
                    newvalue = newvalue.view(-1)
                    if args.clip_vloss:
                        v_loss_unclipped = (newvalue - b_returns[mb_inds]) ** 2
                        v_clipped = b_values[mb_inds] + torch.clamp(
                            newvalue - b_values[mb_inds],
                            -args.clip_coef,
                            args.clip_coef,
                        )
                        v_loss_clipped = (v_clipped - b_returns[mb_inds]) ** 2
                        v_loss_max = torch.max(v_loss_unclipped, v_loss_clipped)
                        v_loss = 0.5 * v_loss_max.mean()
                    else:
                        v_loss = 0.5 * ((newvalue - b_returns[mb_inds]) ** 2).mean()

                    entropy_loss = entropy.mean()
                    loss = pg_loss - args.ent_coef * entropy_loss + v_loss * args.vf_coef

                    optimizer.zero_grad()
                    loss.backward()
                    nn.utils.clip_grad_norm_(agent.parameters(), args.max_grad_norm)
                    optimizer.step()

                if args.target_kl is not None and approx_kl > args.target_kl:
                    break

            y_pred, y_true = b_values[b_valid_inds].cpu().numpy(), b_returns[b_valid_inds].cpu().numpy()
            var_y = np.var(y_true)
            explained_var = np.nan if var_y == 0 else 1 - np.var(y_true - y_pred) / var_y
            sps = int(global_step / (time.time() - start_time))
            recent = [episode["r"] for episode in episodes[-20:]]
            print(
                f"iteration {iteration}/{args.num_iterations} global_step={global_step} SPS={sps} "
                f"episodes={len(episodes)} mean_return(last 20)={np.mean(recent) if recent else float('nan'):.2f}",
                flush=True,
            )

            # TRY NOT TO MODIFY: record rewards for plotting purposes
            if writer is not None:
                writer.add_scalar("charts/learning_rate", optimizer.param_groups[0]["lr"], global_step)
                writer.add_scalar("losses/value_loss", v_loss.item(), global_step)
                writer.add_scalar("losses/policy_loss", pg_loss.item(), global_step)
                writer.add_scalar("losses/entropy", entropy_loss.item(), global_step)
                writer.add_scalar("losses/old_approx_kl", old_approx_kl.item(), global_step)
                writer.add_scalar("losses/approx_kl", approx_kl.item(), global_step)
                writer.add_scalar("losses/clipfrac", np.mean(clipfracs), global_step)
                writer.add_scalar("losses/explained_variance", explained_var, global_step)
                writer.add_scalar("charts/SPS", sps, global_step)
    finally:
        if owns_envs:
            envs.close()
        if writer is not None:
            writer.close()
        torch.set_num_threads(threads)

    recent = [episode["r"] for episode in episodes[-20:]]
    return {
        "episodes": episodes,
        "global_step": global_step,
        "sps": global_step / (time.time() - start_time),
        "mean_return": float(np.mean(recent)) if recent else float("nan"),
        "agent": agent,
    }


if __name__ == "__main__":
    train(parse_args())
