"""torchrl (``gs_gym.adapters.torchrl``) on the CPU backend: PPO in torchrl's own pieces (``Collector``,
``GAE``, ``ClipPPOLoss``, a ``RewardSum`` for episode returns) trains cart-pole for a few updates, and the episodes
it reports are exactly those ``TorchRecordEpisodeStatistics`` records over the same steps (replayed through
``tests.episode_replay``)."""

from __future__ import annotations

import pytest

pytest.importorskip("torchrl", reason='needs the torchrl extra: pip install "gs-gym[torchrl]"')

import torch
from tensordict.nn import NormalParamExtractor, TensorDictModule
from torchrl.collectors import Collector
from torchrl.envs import RewardSum, TransformedEnv
from torchrl.modules import ProbabilisticActor, TanhNormal, ValueOperator
from torchrl.objectives import ClipPPOLoss
from torchrl.objectives.value import GAE

from gs_gym import GenesisVectorEnv
from gs_gym.adapters.torchrl import wrap_env
from tests.conftest import NUM_ENVS, TASK_KWARGS
from tests.episode_replay import Episodes, RecordingEnv, replay_statistics

STEPS_PER_BATCH = 16
BATCHES = 4  # updates


def ppo_parts(env):
    """An actor, a critic, GAE and the clipped PPO loss, as torchrl's PPO tutorial builds them."""
    n_obs, n_act = env.observation_spec["observation"].shape[-1], env.action_spec.shape[-1]
    net = torch.nn.Sequential(torch.nn.Linear(n_obs, 32), torch.nn.Tanh(), torch.nn.Linear(32, 2 * n_act))
    actor = ProbabilisticActor(
        TensorDictModule(torch.nn.Sequential(net, NormalParamExtractor()), ["observation"], ["loc", "scale"]),
        spec=env.action_spec,
        in_keys=["loc", "scale"],
        distribution_class=TanhNormal,
        distribution_kwargs={"low": env.action_spec.space.low, "high": env.action_spec.space.high},
        return_log_prob=True,
    )
    critic = ValueOperator(
        torch.nn.Sequential(torch.nn.Linear(n_obs, 32), torch.nn.Tanh(), torch.nn.Linear(32, 1)), ["observation"]
    )
    advantage = GAE(gamma=0.99, lmbda=0.95, value_network=critic, average_gae=True)
    return actor, advantage, ClipPPOLoss(actor, critic)


@pytest.mark.parametrize(("num_workers", "mode"), [(0, "disabled"), (2, "disabled"), (0, "same_step")])
def test_ppo_episode_statistics_match_gs_gym_wrappers(num_workers, mode):
    torch.manual_seed(0)
    venv = RecordingEnv(NUM_ENVS, "cartpole", backend="cpu", num_workers=num_workers, seed=0, autoreset_mode=mode,
                        task_kwargs=TASK_KWARGS)  # fmt: skip
    try:
        env = TransformedEnv(wrap_env(venv), RewardSum())
        assert env.batch_size == (NUM_ENVS,)
        env.set_seed(0)
        actor, advantage, loss = ppo_parts(env)
        optimizer = torch.optim.Adam(loss.parameters(), lr=1e-3)
        frames = NUM_ENVS * STEPS_PER_BATCH
        collector = Collector(env, actor, frames_per_batch=frames, total_frames=frames * BATCHES,
                              auto_register_policy_transforms=False)  # fmt: skip
        logged = Episodes([], [])
        for batch in collector:
            assert batch.batch_size == (NUM_ENVS, STEPS_PER_BATCH)
            done = batch["next", "done"].squeeze(-1).T  # time first: episodes in the order they ended
            logged.returns.extend(batch["next", "episode_reward"].squeeze(-1).T[done].tolist())
            with torch.no_grad():
                advantage(batch)
            losses = loss(batch.reshape(-1))
            optimizer.zero_grad()
            (losses["loss_objective"] + losses["loss_critic"] + losses["loss_entropy"]).backward()
            optimizer.step()
            collector.update_policy_weights_()

        steps_after_seed = venv.calls[[c[0] == "reset" and c[1] == 0 for c in venv.calls].index(True) :]
        assert sum(1 for call in steps_after_seed if call[0] == "step") == STEPS_PER_BATCH * BATCHES
        replay = GenesisVectorEnv(NUM_ENVS, "cartpole", backend="cpu", num_workers=0, autoreset_mode=mode,
                                  task_kwargs=TASK_KWARGS)  # fmt: skip
        try:  # the collector closed venv when it finished
            expected = replay_statistics(venv.calls, replay)
        finally:
            replay.close()
        assert expected.count >= NUM_ENVS * STEPS_PER_BATCH * BATCHES // (TASK_KWARGS["max_episode_steps"] + 1)
        assert logged.count == expected.count
        assert logged.returns == expected.returns  # float32 sums in the same order: exact
        assert logged.mean_return == expected.mean_return
    finally:
        venv.close()
