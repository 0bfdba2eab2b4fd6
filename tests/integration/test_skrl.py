"""skrl (``gs_gym.adapters.skrl``) on the CPU backend: PPO with skrl's default trainer settings trains cart-pole for
a few updates, and the episodes skrl tracks are exactly those ``TorchRecordEpisodeStatistics`` records over the same
steps (replayed through ``tests.episode_replay``)."""

from __future__ import annotations

from collections.abc import Callable

import pytest

pytest.importorskip("skrl", reason='needs the skrl extra: pip install "gs-gym[skrl]"')

import torch
from skrl.agents.torch.ppo import PPO, PPO_CFG
from skrl.memories.torch import RandomMemory
from skrl.models.torch import DeterministicMixin, GaussianMixin, Model
from skrl.trainers.torch import SequentialTrainer

from gs_gym.adapters.skrl import wrap_env
from tests.conftest import NUM_ENVS, TASK_KWARGS
from tests.episode_replay import Episodes, RecordingEnv, replay_statistics

TIMESTEPS = 200  # skrl's default write_interval is timesteps / 100: below 200 it tracks no episodes at all
ROLLOUTS = 16  # PPO_CFG's default; TIMESTEPS // ROLLOUTS = 12 updates


class Policy(GaussianMixin, Model):
    def __init__(self, observation_space, action_space, device):
        Model.__init__(self, observation_space=observation_space, action_space=action_space, device=device)
        GaussianMixin.__init__(self, clip_actions=True)
        self.net = torch.nn.Sequential(
            torch.nn.Linear(self.num_observations, 32), torch.nn.Tanh(), torch.nn.Linear(32, self.num_actions)
        )
        self.log_std = torch.nn.Parameter(torch.zeros(self.num_actions))

    def compute(self, inputs, role):
        return self.net(inputs["observations"]), {"log_std": self.log_std}


class Value(DeterministicMixin, Model):
    def __init__(self, observation_space, action_space, device):
        Model.__init__(self, observation_space=observation_space, action_space=action_space, device=device)
        DeterministicMixin.__init__(self)
        self.net = torch.nn.Sequential(
            torch.nn.Linear(self.num_observations, 32), torch.nn.Tanh(), torch.nn.Linear(32, 1)
        )

    def compute(self, inputs, role):
        return self.net(inputs["observations"]), {}


def track_episodes(agent: PPO) -> tuple[Episodes, Callable[[], None]]:
    """Every episode skrl's agent tracks (``[value]`` per episode, from its ``(num_envs, 1)`` sums), and the function
    that moves the agent's pending ones in: its deques are emptied at each TensorBoard write, so they are copied
    just before; call it once more after training for the episodes since the last write."""
    episodes = Episodes([], [])
    write = agent.write_tracking_data

    def flush() -> None:
        assert len(agent._track_rewards) < agent._track_rewards.maxlen  # nothing was dropped
        episodes.returns.extend(value for (value,) in agent._track_rewards)
        episodes.lengths.extend(value for (value,) in agent._track_timesteps)
        agent._track_rewards.clear()
        agent._track_timesteps.clear()

    def flush_then_write(**kwargs) -> None:
        flush()
        write(**kwargs)

    agent.write_tracking_data = flush_then_write
    return episodes, flush


@pytest.mark.filterwarnings("ignore:To copy construct from a tensor:UserWarning")  # skrl's torch.tensor(tensor)
@pytest.mark.parametrize("num_workers", [0, 2])
def test_ppo_episode_statistics_match_gs_gym_wrappers(num_workers, tmp_path):
    torch.manual_seed(0)
    venv = RecordingEnv(NUM_ENVS, "cartpole", backend="cpu", num_workers=num_workers, seed=0,
                        autoreset_mode="same_step", task_kwargs=TASK_KWARGS)  # fmt: skip
    try:
        env = wrap_env(venv)
        assert env.num_envs == NUM_ENVS and env.device == venv.device
        cfg = PPO_CFG()
        cfg.experiment.directory = str(tmp_path)
        models = {
            "policy": Policy(env.observation_space, env.action_space, env.device),
            "value": Value(env.observation_space, env.action_space, env.device),
        }
        memory = RandomMemory(memory_size=cfg.rollouts, num_envs=env.num_envs, device=env.device)
        agent = PPO(models=models, memory=memory, cfg=cfg, observation_space=env.observation_space,
                    action_space=env.action_space, device=env.device)  # fmt: skip
        assert cfg.rollouts == ROLLOUTS
        logged, flush = track_episodes(agent)
        # skrl's defaults but the length, the progress bar and its atexit close (this test closes the env itself)
        trainer_cfg = {"timesteps": TIMESTEPS, "disable_progressbar": True, "close_environment_at_exit": False}
        trainer = SequentialTrainer(env=env, agents=agent, cfg=trainer_cfg)
        assert trainer.cfg.headless is False  # skrl's default: env.render() every step, which gives None per worker
        trainer.train()
        flush()  # episodes since the last write

        steps = sum(1 for call in venv.calls if call[0] == "step")
        assert steps == TIMESTEPS
        expected = replay_statistics(venv.calls, venv)
        assert expected.count >= TIMESTEPS * NUM_ENVS // TASK_KWARGS["max_episode_steps"]
        assert logged.count == expected.count
        assert logged.returns == expected.returns  # float32 sums in the same order: exact
        assert logged.lengths == expected.lengths
        assert logged.mean_return == expected.mean_return
    finally:
        venv.close()
