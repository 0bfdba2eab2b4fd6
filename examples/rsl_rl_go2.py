"""go2-walk trained by rsl_rl's ``OnPolicyRunner`` with the runner configuration of Genesis's own Go2 example.

    python examples/rsl_rl_go2.py                           # gs_gym's go2-walk: 4096 envs, 101 iterations, GPU
    python examples/rsl_rl_go2.py --env reference           # the same runner on bench/go2_reference.py's env
    python examples/rsl_rl_go2.py --backend cpu --num-envs 16 --iterations 2 --num-steps-per-env 8

``TRAIN_CFG`` holds the algorithm, policy and runner settings of Genesis's ``examples/locomotion/go2_train.py`` in
rsl-rl-lib 5's format, and ``learn`` is called as there: 101 iterations, ``init_at_random_ep_len=True`` (gs_gym's
rsl_rl adapter sets the envs' episode step counters). ``TASK_KWARGS`` is that example's command: walk forward at
0.5 m/s (``--task-kwargs '{}'`` gives go2-walk's own command ranges); physics and reward terms are go2-walk's.

``--env gs_gym`` runs ``GenesisVectorEnv`` through ``gs_gym.adapters.rsl_rl``, in this process unless the machine
has several GPUs (then one worker per GPU): on the GPU the learner uses, a worker's context switches with the
learner's cost it 13-27% of its collection speed on two machines of three (bench/results);
``--num-workers 1`` runs it in one worker anyway. ``--env reference`` runs ``Go2ReferenceEnv``, the same Go2 written
the way Genesis's example writes its env (one scene in this process), behind a small rsl_rl ``VecEnv``. Both report
what Genesis's example reports in ``extras["episode"]``, which rsl_rl logs as ``Episode/rew_<term>``: each weighted
reward term summed over an episode and divided by the episode duration (20 s), averaged over the episodes that
ended, once per rollout.

Writes ``--out``/curve.json: per iteration the runner's mean episode reward and length (its last 100 episodes, null
before one ended), the ``rew_*`` terms, collection and learning seconds; totals (wall time, final tracking reward)
and the machine. The runner also writes TensorBoard events and checkpoints there.
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import platform
import sys
import time
from importlib.metadata import version
from pathlib import Path

import torch
from rsl_rl.env import VecEnv
from rsl_rl.runners import OnPolicyRunner
from rsl_rl.utils.log_writer import LogWriter
from tensordict import TensorDict

from gs_gym import GenesisVectorEnv
from gs_gym.adapters.rsl_rl import RslRlVecEnv
from gs_gym.tasks.go2_walk import Go2Walk, Go2WalkConfig

TRAIN_CFG = {
    "algorithm": {
        "class_name": "PPO",
        "clip_param": 0.2,
        "desired_kl": 0.01,
        "entropy_coef": 0.01,
        "gamma": 0.99,
        "lam": 0.95,
        "learning_rate": 1e-3,
        "max_grad_norm": 1.0,
        "num_learning_epochs": 5,
        "num_mini_batches": 4,
        "schedule": "adaptive",
        "use_clipped_value_loss": True,
        "value_loss_coef": 1.0,
    },
    "actor": {
        "class_name": "MLPModel",
        "hidden_dims": [512, 256, 128],
        "activation": "elu",
        "distribution_cfg": {"class_name": "GaussianDistribution", "init_std": 1.0, "std_type": "scalar"},
    },
    "critic": {"class_name": "MLPModel", "hidden_dims": [512, 256, 128], "activation": "elu"},
    "obs_groups": {"actor": ["policy"], "critic": ["policy"]},
    "num_steps_per_env": 24,
    "save_interval": 100,
}
"""Genesis's go2_train.py settings; this script adds ``run_name`` and a ``logger`` that also records the curve."""
TASK_KWARGS = {"lin_vel_x_range": [0.5, 0.5], "lin_vel_y_range": [0.0, 0.0], "ang_vel_yaw_range": [0.0, 0.0]}
REWARD_TERMS = ("tracking_lin_vel", "tracking_ang_vel", "lin_vel_z", "base_height", "action_rate", "similar_to_default")
SUMMARY_TERMS = ("rew_tracking_lin_vel", "rew_tracking_ang_vel")
CURVE_TAGS = {"Train/mean_reward": "mean_reward", "Train/mean_episode_length": "mean_episode_length",
              "Perf/collection_time": "collection_s", "Perf/learning_time": "learning_s",
              **{f"Episode/rew_{term}": f"rew_{term}" for term in REWARD_TERMS}}  # fmt: skip


# -- reward terms per episode, the same code in both envs ----------------------------------------------------------


class EpisodeTermSums:
    """Per env, each weighted reward term summed over its current episode; summed again over the episodes that end."""

    def __init__(self, config: Go2WalkConfig, num_envs: int, device: torch.device) -> None:
        self.weights = [getattr(config, f"reward_{term}") * config.dt for term in REWARD_TERMS]
        self.current = torch.zeros(num_envs, len(REWARD_TERMS), device=device)
        self.ended = torch.zeros(len(REWARD_TERMS), device=device)
        self.episodes = torch.zeros((), dtype=torch.int64, device=device)

    def add(self, terms: dict[str, torch.Tensor]) -> torch.Tensor:
        """Add one step's terms; returns the reward, summed in go2-walk's order (its own rounding)."""
        weighted = [terms[term] * weight for term, weight in zip(REWARD_TERMS, self.weights, strict=True)]
        self.current += torch.stack(weighted, dim=1)
        total = weighted[0]
        for term in weighted[1:]:
            total = total + term
        return total

    def end(self, mask: torch.Tensor) -> None:
        """The episodes of the envs in the bool ``mask`` ended (no host sync)."""
        ended = mask.unsqueeze(1)
        self.ended += torch.where(ended, self.current, 0.0).sum(dim=0)
        self.episodes += mask.sum()
        self.current.masked_fill_(ended, 0.0)

    def pop(self) -> tuple[list[float], int]:
        """The sums and number of the episodes that ended since the last ``pop``."""
        sums, episodes = self.ended.tolist(), int(self.episodes)
        self.ended.zero_()
        self.episodes.zero_()
        return sums, episodes


def episode_log(parts: list[tuple[list[float], int]], config: Go2WalkConfig) -> dict[str, float] | None:
    """``extras["episode"]`` from the ``pop`` of every scene: ``rew_<term>`` per second of a full episode (as Genesis's
    example divides by ``episode_length_s``); None when no episode ended."""
    episodes = sum(count for _, count in parts)
    if episodes == 0:
        return None
    seconds = config.max_episode_steps * config.dt
    totals = [sum(sums[i] for sums, _ in parts) for i in range(len(REWARD_TERMS))]
    return {f"rew_{term}": total / episodes / seconds for term, total in zip(REWARD_TERMS, totals, strict=True)}


class Go2WalkEpisodeSums(Go2Walk):
    """go2-walk (same rewards) keeping ``EpisodeTermSums`` in its worker; ``call("pop_episode_sums")`` reads them."""

    def build(self) -> None:
        super().build()
        self.episode_sums = EpisodeTermSums(self.config, self.num_envs, self.device)

    def compute_rewards(self) -> torch.Tensor:
        return self.episode_sums.add(self.reward_terms())

    def reset_envs(self, mask: torch.Tensor) -> None:
        self.episode_sums.end(mask & (self.episode_steps > 0))  # a first reset ends no episode
        super().reset_envs(mask)

    def pop_episode_sums(self) -> tuple[list[float], int]:
        return self.episode_sums.pop()


# -- the two envs as rsl_rl VecEnvs ----------------------------------------------------------------------------------


class GsGymGo2(RslRlVecEnv):
    """gs_gym's adapter, plus ``extras["episode"]`` every ``report_every`` steps (once per rollout)."""

    def __init__(self, venv: GenesisVectorEnv, *, report_every: int, seed: int | None = None) -> None:
        super().__init__(venv, seed=seed)
        self.report_every, self.steps = report_every, 0

    def step(self, actions):
        obs, rewards, dones, extras = super().step(actions)
        self.steps += 1
        if self.steps % self.report_every == 0:
            log = episode_log(list(self.venv.call("pop_episode_sums")), self.cfg)
            if log is not None:
                extras["episode"] = log
        return obs, rewards, dones, extras


class ReferenceGo2(VecEnv):
    """rsl_rl's ``VecEnv`` over ``Go2ReferenceEnv`` (bench/go2_reference.py), which already resets ended envs in the
    step and keeps torch buffers: ``episode_length`` is ``episode_length_buf``, ``truncated & ~terminated`` the
    time-outs."""

    def __init__(self, num_envs: int, config: Go2WalkConfig, report_every: int) -> None:
        sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))
        from go2_reference import Go2ReferenceEnv

        class Go2ReferenceEpisodeSums(Go2ReferenceEnv):
            def __init__(self, num_envs: int, config: Go2WalkConfig) -> None:
                super().__init__(num_envs, config)
                self.episode_sums = EpisodeTermSums(self.cfg, num_envs, self.device)

            def _rewards(self, base_pos, lin_vel, ang_vel, dof_pos):
                return self.episode_sums.add(self.reward_terms(base_pos, lin_vel, ang_vel, dof_pos))

            def _start_episodes(self, mask):
                self.episode_sums.end(mask & (self.episode_length > 0))
                super()._start_episodes(mask)

        self.env = env = Go2ReferenceEpisodeSums(num_envs, config)
        self.num_envs, self.num_actions, self.device, self.cfg = num_envs, env.num_actions, env.device, env.cfg
        self.max_episode_length = env.cfg.max_episode_steps
        self.report_every, self.steps = report_every, 0
        self.observations = self._wrap(env.reset())

    @property
    def episode_length_buf(self) -> torch.Tensor:
        return self.env.episode_length

    @episode_length_buf.setter
    def episode_length_buf(self, value: torch.Tensor) -> None:
        self.env.episode_length = value.to(self.device, torch.int64)

    def get_observations(self) -> TensorDict:
        return self.observations

    def step(self, actions):
        obs, rewards, dones = self.env.step(actions)
        extras = {"time_outs": self.env.truncated & ~self.env.terminated}
        self.steps += 1
        if self.steps % self.report_every == 0:
            log = episode_log([self.env.episode_sums.pop()], self.cfg)
            if log is not None:
                extras["episode"] = log
        self.observations = self._wrap(obs)
        return self.observations, rewards, dones.to(torch.int64), extras

    def _wrap(self, obs: torch.Tensor) -> TensorDict:
        return TensorDict({"policy": obs}, batch_size=[self.num_envs], device=self.device)

    def close(self) -> None:
        self.env.close()


# -- what the runner logs, per iteration ---------------------------------------------------------------------------


class CurveWriter(LogWriter):
    """rsl_rl log writer: TensorBoard (the writer of Genesis's example), and each scalar kept by iteration."""

    def __init__(self, log_dir: str) -> None:
        from torch.utils.tensorboard import SummaryWriter

        self.tensorboard = SummaryWriter(log_dir=log_dir, flush_secs=10)
        self.iterations: dict[int, dict[str, float]] = {}

    def add_scalar(self, tag: str, scalar_value: float, global_step: int) -> None:
        self.tensorboard.add_scalar(tag, scalar_value, global_step)
        if not tag.endswith("/time"):  # those are indexed by whole seconds, not by iteration
            self.iterations.setdefault(global_step, {})[tag] = float(scalar_value)

    def stop(self) -> None:
        self.tensorboard.close()


def machine(backend: str) -> dict[str, object]:
    info: dict[str, object] = {
        "python": platform.python_version(),
        **{name: version(name) for name in ("torch", "genesis-world", "rsl-rl-lib")},
        "backend": backend,
        "cpu_count": os.cpu_count(),
        "processor": platform.processor() or platform.machine(),
    }
    if backend == "gpu" and torch.cuda.is_available():
        info.update(gpu=torch.cuda.get_device_name(0), cuda=torch.version.cuda)
    return info


def mean(values: list[float | None]) -> float | None:
    present = [v for v in values if v is not None]
    return sum(present) / len(present) if present else None


def make_env(args: argparse.Namespace) -> VecEnv:
    """The rsl_rl ``VecEnv`` that ``args`` name (``--env``, ``--num-envs``, ``--backend``, ...)."""
    if args.env == "gs_gym":
        venv = GenesisVectorEnv(args.num_envs, Go2WalkEpisodeSums, backend=args.backend, num_workers=args.num_workers,
                                seed=args.seed, output="torch", autoreset_mode="same_step", final_obs=False,
                                performance_mode=args.performance_mode, task_kwargs=args.task_kwargs)  # fmt: skip
        return GsGymGo2(venv, report_every=args.num_steps_per_env, seed=args.seed)
    from gs_gym.tasks.runtime import init_genesis

    init_genesis(args.backend, performance_mode=args.performance_mode)
    return ReferenceGo2(args.num_envs, Go2Walk.make_config(**args.task_kwargs), args.num_steps_per_env)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--env", choices=("gs_gym", "reference"), default="gs_gym")
    p.add_argument("--num-envs", type=int, default=4096)
    p.add_argument("--iterations", type=int, default=101)
    p.add_argument("--num-steps-per-env", type=int, default=TRAIN_CFG["num_steps_per_env"])
    p.add_argument("--backend", choices=("cpu", "gpu"), default="gpu" if torch.cuda.is_available() else "cpu")
    p.add_argument("--seed", type=int, default=1)
    workers = "gs_gym's worker processes (0: in this process); default 0 on one device (the CPU or a single GPU: the"
    workers += " learner shares it, and in process collects faster), else one per GPU"
    p.add_argument("--num-workers", type=int, default=None, help=workers)
    p.add_argument("--performance-mode", action="store_true", help="Genesis's performance_mode, in either env")
    p.add_argument("--task-kwargs", type=json.loads, default=TASK_KWARGS, help="go2-walk config overrides (JSON)")
    p.add_argument("--out", type=Path, default=None, help="default runs/rsl_rl_go2-<env>")
    args = p.parse_args(argv)
    if args.num_workers is None:
        gpus = torch.cuda.device_count() if args.backend == "gpu" else 0
        args.num_workers = gpus if gpus > 1 else 0
    return args


def main() -> None:
    start = time.perf_counter()
    args = parse_args()
    out = args.out or Path("runs") / f"rsl_rl_go2-{args.env}"
    out.mkdir(parents=True, exist_ok=True)
    torch.manual_seed(args.seed)
    env = make_env(args)
    built = time.perf_counter()

    train_cfg = copy.deepcopy(TRAIN_CFG)
    train_cfg.update(num_steps_per_env=args.num_steps_per_env, run_name=f"go2-walk-{args.env}",
                     logger={"class_name": CurveWriter})  # fmt: skip
    runner = OnPolicyRunner(env, train_cfg, log_dir=str(out), device=str(env.device))
    learn_start = time.perf_counter()
    runner.learn(num_learning_iterations=args.iterations, init_at_random_ep_len=True)
    learned = time.perf_counter()
    env.close()

    logged = runner.logger.writer.iterations
    curve = [
        {"iteration": it, **{key: logged[it].get(tag) for tag, key in CURVE_TAGS.items()}} for it in sorted(logged)
    ]
    final, last = curve[-1], curve[-10:]
    totals = {
        "wall_s": learned - start,
        "build_s": built - start,
        "learn_s": learned - learn_start,
        "collection_s": sum(row["collection_s"] for row in curve),
        "learning_s": sum(row["learning_s"] for row in curve),
        "env_steps": len(curve) * args.num_envs * args.num_steps_per_env,
        **{f"final_{key}": final[key] for key in ("mean_reward", "mean_episode_length", *SUMMARY_TERMS)},
        **{f"last10_{key}": mean([row[key] for row in last]) for key in ("mean_reward", *SUMMARY_TERMS)},
    }
    settings = {key: value for key, value in vars(args).items() if key != "out"}
    settings["num_workers"] = args.num_workers if args.env == "gs_gym" else None
    result = {
        "env": args.env,
        "settings": settings,
        "train_cfg": {**train_cfg, "logger": CurveWriter.__name__},
        "machine": machine(args.backend),
        "totals": totals,
        "curve": curve,
    }
    (out / "curve.json").write_text(json.dumps(result, indent=1, allow_nan=False))

    def cell(value: float | None, digits: int) -> str:
        return "-" if value is None else f"{value:.{digits}f}"

    print(
        f"\n{args.env}: {args.num_envs} envs x {args.num_steps_per_env} steps on {args.backend}, {out / 'curve.json'}"
    )
    print(f"{'iter':>5} {'reward':>9} {'length':>7} {'track_lin':>9} {'track_ang':>9} {'collect_s':>9} {'learn_s':>8}")
    every = max(1, len(curve) // 10)
    for row in [row for row in curve if row["iteration"] % every == 0 or row is final]:
        print(f"{row['iteration']:>5} {cell(row['mean_reward'], 3):>9} {cell(row['mean_episode_length'], 1):>7} "
              f"{cell(row['rew_tracking_lin_vel'], 4):>9} {cell(row['rew_tracking_ang_vel'], 4):>9} "
              f"{row['collection_s']:>9.3f} {row['learning_s']:>8.3f}")  # fmt: skip
    print(f"wall {totals['wall_s']:.1f} s (build {totals['build_s']:.1f} s, learn {totals['learn_s']:.1f} s: "
          f"collection {totals['collection_s']:.1f} s, learning {totals['learning_s']:.1f} s), final tracking_lin_vel "
          f"{cell(final['rew_tracking_lin_vel'], 4)} (mean of the last {len(last)} iterations "
          f"{cell(totals['last10_rew_tracking_lin_vel'], 4)})")  # fmt: skip


if __name__ == "__main__":
    main()
