"""Stable-Baselines3 adapter (``gs_gym.adapters.sb3``) on the CPU backend.

Three scenes are built for the whole module (about 10-15 s each): the adapter over one worker and the in-process
reference, both cartpole with ``max_episode_steps=20`` so that truncations come quickly, and the PPO env
(``max_episode_steps=200``); the episode statistics test builds two of its own (recorded and replayed). The
index-to-worker mapping is checked on a fake vector env, with no scene at all.
"""

from __future__ import annotations

import time

import numpy as np
import pytest

pytest.importorskip("stable_baselines3", reason='needs the sb3 extra: pip install "gs-gym[sb3]"')

import gymnasium as gym
from gymnasium.vector import AutoresetMode
from stable_baselines3.common.monitor import Monitor
from stable_baselines3.common.vec_env import VecCheckNan, VecEnv, VecMonitor, VecNormalize

from gs_gym import GenesisVectorEnv
from gs_gym.adapters.sb3 import Sb3VecEnv
from gs_gym.transport.protocol import Command
from gs_gym.vector.sharding import split_envs
from tests.episode_replay import RecordingEnv, replay_statistics

NUM_ENVS = 8
MAX_STEPS = 20
SEED = 0
ENV_KWARGS = dict(task="cartpole", backend="cpu", seed=SEED, task_kwargs={"max_episode_steps": MAX_STEPS})


@pytest.fixture(scope="module")
def adapter():
    env = Sb3VecEnv.make(NUM_ENVS, num_workers=1, **ENV_KWARGS)
    yield env
    env.close()


@pytest.fixture(scope="module")
def reference():
    env = GenesisVectorEnv(NUM_ENVS, num_workers=0, output="numpy", autoreset_mode="same_step", **ENV_KWARGS)
    yield env
    env.close()


def random_actions(rng: np.random.Generator, num_envs: int = NUM_ENVS) -> np.ndarray:
    return rng.uniform(-1.0, 1.0, size=(num_envs, 1)).astype(np.float32)


# -- 1. VecEnv checks (what SB3's env_checker verifies, applied to a VecEnv) ---------------------------------------


def test_vecenv_contract(adapter):
    assert isinstance(adapter, VecEnv)
    assert adapter.num_envs == NUM_ENVS
    obs_space, act_space = adapter.observation_space, adapter.action_space
    assert isinstance(obs_space, gym.spaces.Box) and obs_space.shape == (4,) and obs_space.dtype == np.float32
    assert isinstance(act_space, gym.spaces.Box) and act_space.shape == (1,) and act_space.dtype == np.float32
    assert np.all(act_space.low == -1.0) and np.all(act_space.high == 1.0)  # SB3 warns on non-symmetric boxes
    assert adapter.render_mode is None

    checked = VecCheckNan(adapter, raise_exception=True)  # raises on NaN/inf in actions, observations, rewards
    adapter.seed(SEED)
    obs = checked.reset()
    assert isinstance(obs, np.ndarray) and obs.shape == (NUM_ENVS, 4) and obs.dtype == np.float32
    assert all(obs_space.contains(row) for row in obs)
    assert isinstance(adapter.reset_infos, list) and len(adapter.reset_infos) == NUM_ENVS
    assert all(isinstance(info, dict) for info in adapter.reset_infos)

    rng = np.random.default_rng(1)
    for _ in range(MAX_STEPS + 2):  # crosses the time limit, so done envs are covered
        result = checked.step(random_actions(rng))
        assert isinstance(result, tuple) and len(result) == 4
        obs, rewards, dones, infos = result
        assert isinstance(obs, np.ndarray) and obs.shape == (NUM_ENVS, 4) and obs.dtype == np.float32
        assert all(obs_space.contains(row) for row in obs)
        assert isinstance(rewards, np.ndarray) and rewards.shape == (NUM_ENVS,) and rewards.dtype == np.float32
        assert isinstance(dones, np.ndarray) and dones.shape == (NUM_ENVS,) and dones.dtype == np.bool_
        assert isinstance(infos, list) and len(infos) == NUM_ENVS and all(isinstance(i, dict) for i in infos)
        for done, info in zip(dones, infos, strict=True):
            assert ("terminal_observation" in info) == bool(done)
            if done:
                terminal = info["terminal_observation"]
                assert isinstance(terminal, np.ndarray) and terminal.shape == (4,) and terminal.dtype == np.float32


def test_seed_applies_to_next_reset_only(adapter):
    assert adapter.seed(123) == [123 + i for i in range(NUM_ENVS)]
    first = adapter.reset()
    adapter.step(np.zeros((NUM_ENVS, 1), np.float32))
    unseeded = adapter.reset()  # the seeds were used up: the streams go on
    adapter.seed(123)
    again = adapter.reset()
    np.testing.assert_array_equal(first, again)
    assert not np.array_equal(first, unseeded)
    # env i gets seed + i: seeding each env explicitly gives the same start
    adapter._seeds = [123 + i for i in range(NUM_ENVS)][::-1]
    reversed_obs = adapter.reset()
    np.testing.assert_array_equal(reversed_obs, first[::-1])


def test_per_env_access(adapter):
    assert adapter.get_attr("num_envs") == [NUM_ENVS] * NUM_ENVS  # the worker's task serves all 8 envs
    assert adapter.get_attr("render_mode", indices=[0, 3]) == [None, None]
    assert adapter.has_attr("config") and not adapter.has_attr("no_such_attribute")
    with pytest.raises(AttributeError, match="no_such_attribute"):
        adapter.get_attr("no_such_attribute")
    observed = adapter.env_method("observe", indices=2)
    assert len(observed) == 1 and tuple(observed[0].shape) == (NUM_ENVS, 4)
    config = adapter.get_attr("config")[0]
    adapter.set_attr("config", config)
    assert adapter.get_attr("config", indices=[5]) == [config]
    with pytest.raises(ValueError, match="can only be set for all of them"):
        adapter.set_attr("config", config, indices=[0, 1])
    assert adapter.env_is_wrapped(Monitor) == [False] * NUM_ENVS
    with pytest.raises(ValueError, match="no reset options"):
        adapter.set_options({"reset_mask": np.ones(NUM_ENVS, bool)})
    obs = adapter.reset()  # the env is still usable after the refused calls
    assert obs.shape == (NUM_ENVS, 4)


# -- 2. terminal observations equal the in-process reference's final observations ----------------------------------


def test_terminal_observation_matches_reference(adapter, reference):
    adapter.seed(SEED)
    obs = adapter.reset()
    ref_obs, _ = reference.reset(seed=SEED)
    np.testing.assert_array_equal(obs, ref_obs)

    rng = np.random.default_rng(2)
    lengths = np.zeros(NUM_ENVS, dtype=int)
    truncations = terminations = 0
    for _ in range(3 * MAX_STEPS + 5):
        actions = random_actions(rng)
        obs, rewards, dones, infos = adapter.step(actions)
        ref_obs, ref_rewards, ref_term, ref_trunc, ref_info = reference.step(actions)
        lengths += 1
        np.testing.assert_array_equal(obs, ref_obs)
        np.testing.assert_array_equal(rewards, ref_rewards)
        np.testing.assert_array_equal(dones, ref_term | ref_trunc)
        for i in range(NUM_ENVS):
            time_limit = bool(ref_trunc[i] and not ref_term[i])
            assert infos[i]["TimeLimit.truncated"] is time_limit
            if not dones[i]:
                assert "terminal_observation" not in infos[i]
                continue
            terminal = infos[i]["terminal_observation"]
            np.testing.assert_array_equal(terminal, ref_info["final_obs"][i])
            assert not np.array_equal(terminal, obs[i])  # the true last observation, not the new episode's first
            if time_limit:
                assert lengths[i] == MAX_STEPS
                truncations += 1
            else:
                assert ref_term[i] and lengths[i] <= MAX_STEPS
                terminations += 1
            lengths[i] = 0
    assert truncations >= 3 and terminations >= 3, (truncations, terminations)


# -- 3. VecMonitor and VecNormalize ----------------------------------------------------------------------------------


def test_vec_monitor_and_vec_normalize(adapter):
    monitor = VecMonitor(adapter)
    env = VecNormalize(monitor, norm_obs=True, norm_reward=True, gamma=0.99)
    adapter.seed(SEED)
    obs = env.reset()
    assert obs.shape == (NUM_ENVS, 4) and obs.dtype == np.float32
    returns = np.zeros(NUM_ENVS, dtype=np.float64)
    episodes = []
    for _ in range(2 * MAX_STEPS + 2):
        obs, rewards, dones, infos = env.step(np.zeros((NUM_ENVS, 1), np.float32))  # no push: the pole falls slowly
        assert obs.shape == (NUM_ENVS, 4) and np.all(np.isfinite(obs)) and np.all(np.isfinite(rewards))
        returns += env.get_original_reward()
        for i in np.flatnonzero(dones):
            episode = infos[i]["episode"]
            assert infos[i]["terminal_observation"].shape == (4,)
            if infos[i]["TimeLimit.truncated"]:
                assert episode["l"] == MAX_STEPS
            else:
                assert episode["l"] <= MAX_STEPS
            assert episode["r"] == pytest.approx(returns[i], rel=1e-5)
            episodes.append(episode)
            returns[i] = 0.0
    assert sum(1 for e in episodes if e["l"] == MAX_STEPS) >= NUM_ENVS  # every env reached the time limit at least once


# -- 4. PPO learns cartpole ----------------------------------------------------------------------------------------


def _mean_return(model, env: VecMonitor, episodes: int = 32) -> float:
    """Mean VecMonitor return of ``episodes`` episodes of ``model``'s stochastic policy (as it acts in training)."""
    obs = env.reset()
    returns: list[float] = []
    while len(returns) < episodes:
        actions, _ = model.predict(obs, deterministic=False)
        obs, _, dones, infos = env.step(actions)
        returns.extend(float(infos[i]["episode"]["r"]) for i in np.flatnonzero(dones))
    return float(np.mean(returns))


def test_ppo_improves_on_cartpole(tmp_path):
    """Margin: the untrained policy's mean return is ~20 (max 200); 24,576 steps (~10 s here) reach ~185."""
    import torch
    from stable_baselines3 import PPO
    from stable_baselines3.common.logger import configure

    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # the worker takes the other core
    env = VecMonitor(
        Sb3VecEnv.make(
            16, task="cartpole", backend="cpu", num_workers=1, seed=0, task_kwargs={"max_episode_steps": 200}
        )
    )
    try:
        model = PPO(
            "MlpPolicy",
            env,
            n_steps=128,
            batch_size=256,
            n_epochs=5,
            learning_rate=1e-3,
            seed=0,
            policy_kwargs={"net_arch": [64, 64]},
            verbose=0,
        )
        model.set_logger(configure(str(tmp_path), []))  # else learn() makes a directory in /tmp for its logs
        initial = _mean_return(model, env)
        start = time.perf_counter()
        model.learn(total_timesteps=24_576)
        train_seconds = time.perf_counter() - start
        final = _mean_return(model, env)
    finally:
        env.close()
        torch.set_num_threads(threads)
    print(f"PPO cartpole: mean return {initial:.1f} -> {final:.1f} after {train_seconds:.1f} s of training")
    assert final >= 2 * initial and final >= initial + 40, (initial, final)


def test_ppo_episode_statistics_match_gs_gym_wrappers(tmp_path):
    """What PPO logs of the episodes (its ``ep_info_buffer``, from ``VecMonitor``: ``rollout/ep_rew_mean`` and
    ``ep_len_mean`` are its means) over two rollouts with SB3's defaults is exactly what
    ``TorchRecordEpisodeStatistics`` records over the same steps, replayed on an in-process torch env of the same
    settings (``tests.episode_replay``)."""
    from stable_baselines3 import PPO
    from stable_baselines3.common.logger import configure

    venv = RecordingEnv(NUM_ENVS, num_workers=1, output="numpy", autoreset_mode="same_step", **ENV_KWARGS)
    replay = GenesisVectorEnv(NUM_ENVS, num_workers=0, output="torch", autoreset_mode="same_step", **ENV_KWARGS)
    try:
        model = PPO("MlpPolicy", VecMonitor(Sb3VecEnv(venv)), n_steps=16, batch_size=64, seed=SEED, verbose=0)
        model.set_logger(configure(str(tmp_path), []))  # else learn() makes a directory in /tmp for its logs
        model.learn(total_timesteps=2 * 16 * NUM_ENVS)
        assert sum(1 for call in venv.calls if call[0] == "step") == 2 * 16

        expected = replay_statistics(venv.calls, replay)
        assert expected.count >= NUM_ENVS  # each env reached the time limit at least once
        assert expected.count < model.ep_info_buffer.maxlen  # the buffer dropped none
        assert [float(info["r"]) for info in model.ep_info_buffer] == expected.returns  # float32 sums: exact
        assert [info["l"] for info in model.ep_info_buffer] == expected.lengths
    finally:
        venv.close()
        replay.close()


# -- construction errors and the env-index -> worker mapping (no scene built) -----------------------------------------


def test_make_refuses_other_modes():
    with pytest.raises(ValueError, match="output must be 'numpy'"):
        Sb3VecEnv.make(4, output="torch", backend="cpu")
    with pytest.raises(ValueError, match=r"autoreset_mode must be AutoresetMode\.SAME_STEP"):
        Sb3VecEnv.make(4, autoreset_mode=AutoresetMode.NEXT_STEP, backend="cpu")
    with pytest.raises(TypeError, match=r"expected a gs_gym\.GenesisVectorEnv"):
        Sb3VecEnv(object())


class _FakeVectorEnv(GenesisVectorEnv):
    """Just enough of GenesisVectorEnv for the adapter's per-env routing: 7 envs over 3 workers (3, 2, 2)."""

    def __init__(self, output="numpy", autoreset_mode=AutoresetMode.SAME_STEP) -> None:  # no super(): no workers
        self.num_envs, self.output, self.autoreset_mode, self.copy = 7, output, autoreset_mode, True
        self.render_mode, self.metadata = None, {"render_modes": []}
        self.single_observation_space = gym.spaces.Box(-np.inf, np.inf, (4,), np.float32)
        self.single_action_space = gym.spaces.Box(-1.0, 1.0, (1,), np.float32)
        self.env_ranges = split_envs(7, 3)
        self.requests: list[tuple[Command, dict]] = []
        self.attributes = [{"level": 10 * w} for w in range(3)]

    # the public per-worker methods the adapter routes through, recorded as the commands they would send

    def get_attr(self, name, workers=None):
        workers = [0, 1, 2] if workers is None else list(workers)
        self.requests.append((Command.GET_ATTR, {w: (name,) for w in workers}))
        return tuple(self.attributes[w][name] for w in workers)

    def set_attr(self, name, values, workers=None):
        workers = [0, 1, 2] if workers is None else list(workers)
        values = values if isinstance(values, (list, tuple)) else [values] * len(workers)
        self.requests.append((Command.SET_ATTR, {w: (name, v) for w, v in zip(workers, values, strict=True)}))
        for worker, value in zip(workers, values, strict=True):
            self.attributes[worker][name] = value

    def call_workers(self, workers, name, *args, **kwargs):
        workers = [0, 1, 2] if workers is None else list(workers)
        requests = {w: (name, args, kwargs) for w in workers}
        self.requests.append((Command.CALL, requests))
        return tuple(requests.items())

    def close(self, **kwargs):
        pass

    def __del__(self):
        pass


def test_indices_map_to_workers():
    fake = _FakeVectorEnv()
    env = Sb3VecEnv(fake)
    assert env.get_attr("level") == [0, 0, 0, 10, 10, 20, 20]
    assert env.get_attr("level", indices=[4, 0]) == [10, 0]
    assert fake.requests[-1] == (Command.GET_ATTR, {0: ("level",), 1: ("level",)})  # worker 2 not asked
    assert env.env_method("ping", 1, indices=[5], key="v") == [(2, ("ping", (1,), {"key": "v"}))]
    assert list(fake.requests[-1][1]) == [2]
    env.set_attr("level", 99, indices=[3, 4])  # exactly worker 1's envs
    assert [a["level"] for a in fake.attributes] == [0, 99, 20]
    with pytest.raises(ValueError, match=r"envs 5\.\.6 share worker 2's task"):
        env.set_attr("level", 1, indices=[5])
    with pytest.raises(IndexError):
        env.get_attr("level", indices=[7])


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"output": "torch"}, "output='numpy', got output='torch'"),
        ({"autoreset_mode": AutoresetMode.NEXT_STEP}, "autoreset_mode=AutoresetMode.SAME_STEP, got"),
    ],
)
def test_existing_env_with_wrong_mode_is_refused(kwargs, message):
    with pytest.raises(ValueError, match=message.replace("(", r"\(")):
        Sb3VecEnv(_FakeVectorEnv(**kwargs))
