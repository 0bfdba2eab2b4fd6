"""``gs_gym.wrappers``: the torch-native statistics wrappers against Gymnasium's numpy ones, and ``LegacyFinalInfo``.

Genesis scenes: the session's shared torch envs (in-process, ``next_step``/``same_step``/``disabled``) plus two
in-process numpy envs built here with the same settings (about 10-20 s each). Scripted fake envs (no scene) cover
the corner cases: every autoreset mode, partial resets, more finished episodes than the queues hold, and the
no-host-sync guarantee of ``step``.
"""

from __future__ import annotations

import contextlib

import gymnasium as gym
import numpy as np
import pytest
import torch
from gymnasium.spaces import Box
from gymnasium.vector import AutoresetMode, VectorEnv, VectorWrapper
from gymnasium.vector.utils import batch_space
from gymnasium.wrappers.vector import NormalizeObservation, RecordEpisodeStatistics

from gs_gym import GenesisVectorEnv
from gs_gym.wrappers import LegacyFinalInfo, TorchNormalizeObservation, TorchRecordEpisodeStatistics
from tests.conftest import MAX_EPISODE_STEPS, NUM_ENVS, TASK_KWARGS

STEPS = 40


# -- helpers ---------------------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def numpy_env():
    """``numpy_env(mode)``: in-process cartpole with numpy outputs, settings as the shared torch envs."""
    built: dict[str, GenesisVectorEnv] = {}

    def get(mode: str) -> GenesisVectorEnv:
        if mode not in built:
            built[mode] = GenesisVectorEnv(
                NUM_ENVS,
                "cartpole",
                backend="cpu",
                num_workers=0,
                seed=0,
                output="numpy",
                autoreset_mode=mode,
                task_kwargs=TASK_KWARGS,
            )
        return built[mode]

    yield get
    for env in built.values():
        env.close()


def action_sequence(seed: int, steps: int = STEPS) -> list[np.ndarray]:
    """Random actions, with runs of full pushes so that some poles fall (terminations, not only time limits)."""
    rng = np.random.default_rng(seed)
    actions = []
    for step in range(steps):
        if (step // 6) % 2:
            actions.append(np.ones((NUM_ENVS, 1), np.float32))
        else:
            actions.append(rng.uniform(-1, 1, (NUM_ENVS, 1)).astype(np.float32))
    return actions


class Recorder(VectorWrapper):
    """Keeps host copies of what the wrapped env returns from ``step``."""

    def __init__(self, env: VectorEnv) -> None:
        super().__init__(env)
        self.steps: list[dict] = []

    def step(self, actions):
        obs, rewards, terminated, truncated, info = self.env.step(actions)

        def host(x):
            return x.detach().cpu().numpy().copy() if isinstance(x, torch.Tensor) else np.array(x)

        self.steps.append(
            {
                "obs": host(obs),
                "rewards": host(rewards),
                "terminated": host(terminated),
                "truncated": host(truncated),
                "final_obs": host(info["final_obs"]) if "final_obs" in info else None,
            }
        )
        return obs, rewards, terminated, truncated, info


class ScriptedEnv(VectorEnv):
    """Replays scripted rewards and dones, as numpy arrays or torch tensors; obs ``[step, env]``."""

    def __init__(self, rewards, terminated, truncated, mode: AutoresetMode, kind: str) -> None:
        self.rewards, self.terminated, self.truncated = rewards, terminated, truncated
        self.num_envs = rewards.shape[1]
        self.kind = kind
        self.metadata = {"autoreset_mode": mode}
        self.single_observation_space = Box(-np.inf, np.inf, (2,), np.float32)
        self.single_action_space = Box(-1.0, 1.0, (1,), np.float32)
        self.observation_space = batch_space(self.single_observation_space, self.num_envs)
        self.action_space = batch_space(self.single_action_space, self.num_envs)
        self.t = 0

    def _out(self, array):
        return torch.as_tensor(array) if self.kind == "torch" else array

    def _obs(self):
        obs = np.stack([np.full(self.num_envs, self.t), np.arange(self.num_envs)], axis=1).astype(np.float32)
        return self._out(obs)

    def reset(self, *, seed=None, options=None):
        return self._obs(), {}

    def step(self, actions):
        t, self.t = self.t, self.t + 1
        return (
            self._obs(),
            self._out(self.rewards[t]),
            self._out(self.terminated[t]),
            self._out(self.truncated[t]),
            {},
        )


def scripted_data(steps: int = 60, num_envs: int = 5, seed: int = 0):
    rng = np.random.default_rng(seed)
    rewards = rng.normal(size=(steps, num_envs)).astype(np.float32)
    terminated = rng.random((steps, num_envs)) < 0.15
    truncated = rng.random((steps, num_envs)) < 0.1
    terminated[10] = True  # a step where every env ends: more episodes than a small queue holds
    return rewards, terminated, truncated


def assert_same_stats(torch_info: dict, numpy_info: dict, num_envs: int) -> None:
    """The torch wrapper's info (always present) carries exactly the numpy wrapper's statistics."""
    mask = torch_info["_episode"].cpu().numpy()
    expected = numpy_info.get("_episode", np.zeros(num_envs, dtype=bool))
    np.testing.assert_array_equal(mask, expected)
    if mask.any():
        for key in ("r", "l"):
            got = torch_info["episode"][key].cpu().numpy()
            np.testing.assert_array_equal(got[mask], numpy_info["episode"][key][mask])  # exact
            assert not got[~mask].any()
    assert torch_info["episode"]["r"].dtype == torch.float64 and torch_info["episode"]["l"].dtype == torch.int64


# -- TorchRecordEpisodeStatistics ----------------------------------------------------------------------------------


@pytest.mark.parametrize("mode", ["next_step", "same_step"])
def test_torch_episode_statistics_match_gymnasium(shared_env, numpy_env, mode):
    """Same seed and actions on a torch and a numpy env: identical returns, lengths and queues."""
    torch_stats = TorchRecordEpisodeStatistics(shared_env(0, mode), buffer_length=10)
    numpy_stats = RecordEpisodeStatistics(numpy_env(mode), buffer_length=10)
    obs_t, _ = torch_stats.reset(seed=3)
    obs_n, _ = numpy_stats.reset(seed=3)
    np.testing.assert_array_equal(obs_t.numpy(), obs_n)
    ended = 0
    for actions in action_sequence(1):
        obs_t, rew_t, *_, info_t = torch_stats.step(torch.from_numpy(actions))
        obs_n, rew_n, *_, info_n = numpy_stats.step(actions)
        np.testing.assert_array_equal(obs_t.numpy(), obs_n)  # the two envs are the same simulation
        np.testing.assert_array_equal(rew_t.numpy(), rew_n)
        assert_same_stats(info_t, info_n, NUM_ENVS)
        ended += int(info_t["_episode"].sum())
    assert ended >= 2 * NUM_ENVS
    assert torch_stats.episode_count == numpy_stats.episode_count == ended
    np.testing.assert_array_equal(torch_stats.return_queue.numpy(), np.array(numpy_stats.return_queue))
    np.testing.assert_array_equal(torch_stats.length_queue.numpy(), np.array(numpy_stats.length_queue))
    assert len(torch_stats.time_queue) == 10
    # NEXT_STEP: the reset step's reward (0) never starts an episode, so lengths stay within the time limit
    assert int(torch_stats.length_queue.max()) == MAX_EPISODE_STEPS


@pytest.mark.parametrize("mode", list(AutoresetMode))
def test_torch_episode_statistics_scripted(mode):
    """Every mode, partial resets (DISABLED) and more finished episodes in one step than the queue holds."""
    data = scripted_data()
    torch_stats = TorchRecordEpisodeStatistics(ScriptedEnv(*data, mode, "torch"), buffer_length=3)
    numpy_stats = RecordEpisodeStatistics(ScriptedEnv(*data, mode, "numpy"), buffer_length=3)
    torch_stats.reset()
    numpy_stats.reset()
    for step in range(len(data[0])):
        info_t = torch_stats.step(torch.zeros(5, 1))[4]
        info_n = numpy_stats.step(np.zeros((5, 1)))[4]
        assert_same_stats(info_t, info_n, 5)
        if mode == AutoresetMode.DISABLED and step % 7 == 6:
            mask = np.array([True, False, True, False, False])
            torch_stats.reset(options={"reset_mask": torch.from_numpy(mask)})
            numpy_stats.reset(options={"reset_mask": mask.copy()})  # Gymnasium's wrapper pops it from the dict
        assert torch_stats.episode_count == numpy_stats.episode_count
        np.testing.assert_array_equal(torch_stats.return_queue.numpy(), np.array(numpy_stats.return_queue))
        np.testing.assert_array_equal(torch_stats.length_queue.numpy(), np.array(numpy_stats.length_queue))


@contextlib.contextmanager
def no_host_sync():
    """Make every tensor-to-host conversion, and boolean mask indexing, raise (each needs a device sync on a GPU)."""
    names = ("__bool__", "item", "tolist", "numpy", "cpu", "__int__", "__float__", "__index__", "nonzero")
    saved = {name: getattr(torch.Tensor, name) for name in names}

    def refuse(name):
        def method(*args, **kwargs):
            raise AssertionError(f"host sync: Tensor.{name} called")

        return method

    for name in names:
        setattr(torch.Tensor, name, refuse(name))
    getitem, setitem = saved["__getitem__"], saved["__setitem__"] = torch.Tensor.__getitem__, torch.Tensor.__setitem__

    def boolean_index(index):
        if isinstance(index, torch.Tensor) and index.dtype == torch.bool:
            raise AssertionError("host sync: boolean mask indexing")

    def checked_getitem(self, index):
        boolean_index(index)
        return getitem(self, index)

    def checked_setitem(self, index, value):
        boolean_index(index)
        return setitem(self, index, value)

    torch.Tensor.__getitem__, torch.Tensor.__setitem__ = checked_getitem, checked_setitem
    try:
        yield
    finally:
        for name, method in saved.items():
            setattr(torch.Tensor, name, method)


@pytest.mark.parametrize("mode", list(AutoresetMode))
def test_torch_wrappers_step_without_host_sync(mode):
    env = ScriptedEnv(*scripted_data(), mode, "torch")
    wrapped = TorchNormalizeObservation(TorchRecordEpisodeStatistics(env))
    wrapped.reset()
    actions = torch.zeros(5, 1)
    with no_host_sync():
        for _ in range(20):
            obs, *_, info = wrapped.step(actions)
            assert "episode" in info and "_episode" in info  # dict lookups, not tensor truth values
    assert obs.dtype == torch.float32 and info["_episode"].dtype == torch.bool


def test_torch_wrappers_refuse_numpy_outputs():
    env = ScriptedEnv(*scripted_data(), AutoresetMode.NEXT_STEP, "numpy")
    with pytest.raises(TypeError, match=r"gymnasium\.wrappers\.vector\.RecordEpisodeStatistics"):
        TorchRecordEpisodeStatistics(env).step(np.zeros((5, 1)))
    with pytest.raises(TypeError, match=r"gymnasium\.wrappers\.vector\.NormalizeObservation"):
        TorchNormalizeObservation(env).reset()


# -- TorchNormalizeObservation -------------------------------------------------------------------------------------


def test_torch_normalize_observation_matches_gymnasium(shared_env, numpy_env):
    torch_norm = TorchNormalizeObservation(shared_env(0, "next_step"))
    numpy_norm = NormalizeObservation(numpy_env("next_step"))
    assert torch_norm.single_observation_space == numpy_norm.single_observation_space
    assert torch_norm.observation_space == numpy_norm.observation_space
    obs_t, _ = torch_norm.reset(seed=4)
    obs_n, _ = numpy_norm.reset(seed=4)
    np.testing.assert_allclose(obs_t.numpy(), obs_n, rtol=1e-4, atol=1e-4)
    for actions in action_sequence(2, 25):
        obs_t = torch_norm.step(torch.from_numpy(actions))[0]
        obs_n = numpy_norm.step(actions)[0]
        assert obs_t.dtype == torch.float32
        # Gymnasium keeps float32 statistics, these are float64: equal up to float32 rounding
        np.testing.assert_allclose(obs_t.numpy(), obs_n, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(torch_norm.obs_rms.mean.numpy(), numpy_norm.obs_rms.mean, rtol=1e-4, atol=1e-6)
    np.testing.assert_allclose(torch_norm.obs_rms.var.numpy(), numpy_norm.obs_rms.var, rtol=1e-4, atol=1e-8)
    assert float(torch_norm.obs_rms.count) == pytest.approx(numpy_norm.obs_rms.count)

    # frozen statistics: used, not updated
    torch_norm.update_running_mean = False
    assert not torch_norm.update_running_mean
    frozen = torch_norm.obs_rms.state_dict()
    recorder = torch_norm.env = Recorder(torch_norm.env)
    obs_t = torch_norm.step(torch.zeros(NUM_ENVS, 1))[0]
    for key, value in frozen.items():
        assert torch.equal(getattr(torch_norm.obs_rms, key), value)
    expected = (torch.from_numpy(recorder.steps[-1]["obs"]).double() - frozen["mean"]) / torch.sqrt(
        frozen["var"] + torch_norm.epsilon
    )
    assert torch.equal(obs_t, expected.float())


def test_torch_normalize_observation_same_step_final_obs(shared_env):
    recorder = Recorder(shared_env(0, "same_step"))
    norm = TorchNormalizeObservation(recorder)
    norm.reset(seed=5)
    seen = 0
    for actions in action_sequence(3, 20):
        obs, *_, info = norm.step(torch.from_numpy(actions))
        raw = recorder.steps[-1]
        assert torch.equal(obs, norm.normalize(torch.from_numpy(raw["obs"])))
        if "final_obs" in info:
            seen += 1
            assert torch.equal(info["final_obs"], norm.normalize(torch.from_numpy(raw["final_obs"])))
            assert info["final_obs"].dtype == torch.float32
    assert seen >= 2


def test_torch_normalize_observation_partial_reset(shared_env):
    norm = TorchNormalizeObservation(shared_env(0, "disabled"))
    norm.reset(seed=6)
    count = float(norm.obs_rms.count)
    assert count == pytest.approx(1e-4 + NUM_ENVS)
    mask = np.zeros(NUM_ENVS, dtype=bool)
    mask[[1, 4]] = True
    obs, _ = norm.reset(options={"reset_mask": mask})
    assert obs.shape == (NUM_ENVS, 4)
    assert float(norm.obs_rms.count) == pytest.approx(count + 2)  # only the reset envs' observations are new


# -- LegacyFinalInfo -----------------------------------------------------------------------------------------------


def legacy_rollout(envs, recorder: Recorder, actions_list, to_actions=lambda a: a):
    """A Gymnasium 0.29-style loop: episodes from ``final_info``, bootstrap observations from ``final_observation``."""
    episodes, final_observations = [], []
    for step, actions in enumerate(actions_list):
        *_, infos = envs.step(to_actions(actions))
        raw = recorder.steps[-1]
        done = np.asarray(raw["terminated"]) | np.asarray(raw["truncated"])
        assert "final_obs" not in infos and "_final_obs" not in infos
        if not done.any():
            assert "final_info" not in infos and "final_observation" not in infos
            continue
        assert infos["final_observation"].dtype == object and infos["final_info"].dtype == object
        np.testing.assert_array_equal(infos["_final_observation"], done)
        np.testing.assert_array_equal(infos["_final_info"], done)
        for index, info in enumerate(infos["final_info"]):
            if not done[index]:
                assert info is None and infos["final_observation"][index] is None
                continue
            final = infos["final_observation"][index]
            final = final.numpy() if isinstance(final, torch.Tensor) else final
            np.testing.assert_array_equal(final, raw["final_obs"][index])
            final_observations.append(final)
            if info and "episode" in info:
                r, length = info["episode"]["r"], info["episode"]["l"]
                episodes.append((step, index, float(r), int(length)))
    return episodes, final_observations


def recompute_episodes(recorder: Recorder) -> list[tuple[int, int, float, int]]:
    """Episode returns summed from the raw rewards (SAME_STEP: every step counts), in float64 like the wrappers."""
    returns = np.zeros(NUM_ENVS)
    lengths = np.zeros(NUM_ENVS, dtype=int)
    episodes = []
    for step, raw in enumerate(recorder.steps):
        returns += raw["rewards"]
        lengths += 1
        done = raw["terminated"] | raw["truncated"]
        for index in np.flatnonzero(done):
            episodes.append((step, int(index), float(returns[index]), int(lengths[index])))
        returns[done], lengths[done] = 0.0, 0
    return episodes


def test_legacy_final_info_numpy_genesis(numpy_env):
    recorder = Recorder(numpy_env("same_step"))
    envs = LegacyFinalInfo(RecordEpisodeStatistics(recorder))
    envs.reset(seed=7)
    episodes, finals = legacy_rollout(envs, recorder, action_sequence(4))
    assert len(episodes) >= 2 * NUM_ENVS and len(finals) == len(episodes)
    assert episodes == recompute_episodes(recorder)  # exact returns and lengths
    assert all(length <= MAX_EPISODE_STEPS for *_, length in episodes)


def test_legacy_final_info_torch_genesis(shared_env):
    recorder = Recorder(shared_env(0, "same_step"))
    envs = LegacyFinalInfo(TorchRecordEpisodeStatistics(recorder))
    envs.reset(seed=8)
    episodes, _ = legacy_rollout(envs, recorder, action_sequence(5), to_actions=torch.from_numpy)
    assert len(episodes) >= 2 * NUM_ENVS
    assert episodes == recompute_episodes(recorder)


def test_legacy_final_info_gymnasium_sync_env():
    """Gymnasium's SyncVectorEnv reports final_obs as an object array (None where not done): same result."""
    recorder = Recorder(
        gym.make_vec(
            "CartPole-v1",
            num_envs=NUM_ENVS,
            vectorization_mode="sync",
            vector_kwargs={"autoreset_mode": AutoresetMode.SAME_STEP},
        )
    )
    # the recorder's host copy of an object array keeps the per-env rows
    envs = LegacyFinalInfo(RecordEpisodeStatistics(recorder))
    envs.reset(seed=9)
    envs.action_space.seed(9)
    actions = [envs.action_space.sample() for _ in range(60)]
    episodes, _ = legacy_rollout(envs, recorder, actions)
    assert len(episodes) >= NUM_ENVS
    assert episodes == recompute_episodes(recorder)
    envs.close()


def test_legacy_final_info_refuses_next_step():
    env = ScriptedEnv(*scripted_data(), AutoresetMode.NEXT_STEP, "numpy")
    with pytest.raises(ValueError, match=r"must use AutoresetMode\.SAME_STEP"):
        LegacyFinalInfo(env)
