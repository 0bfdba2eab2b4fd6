"""rsl_rl adapter (``gs_gym.adapters.rsl_rl``) on the CPU backend.

One scene (cartpole over one worker, ``max_episode_steps=20`` so that time limits come quickly, about 15-25 s to
build) serves most of the module; the episode statistics test builds its own (a ``RecordingEnv``, in process and
over two workers), as does the ``final_obs`` one; the missing-extra error and the argument checks need no scene.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys

import pytest
import torch
from gymnasium.vector import AutoresetMode

from tests.episode_replay import RecordingEnv, replay_statistics

HAVE_RSL_RL = importlib.util.find_spec("rsl_rl") is not None and importlib.util.find_spec("tensordict") is not None
needs_rsl_rl = pytest.mark.skipif(
    not HAVE_RSL_RL, reason='rsl_rl is not installed (the rsl-rl extra: pip install "gs-gym[rsl-rl]")'
)

NUM_ENVS = 8
MAX_STEPS = 20
SEED = 0
ENV_KWARGS = {
    "task": "cartpole",
    "backend": "cpu",
    "num_workers": 1,
    "seed": SEED,
    "task_kwargs": {"max_episode_steps": MAX_STEPS},
}


def train_cfg(num_steps_per_env: int = 16) -> dict:
    """A small PPO configuration in rsl-rl-lib 5.x's format."""
    return {
        "num_steps_per_env": num_steps_per_env,
        "save_interval": 50,
        "obs_groups": {"actor": ["policy"], "critic": ["policy"]},
        "algorithm": {
            "class_name": "PPO",
            "num_learning_epochs": 2,
            "num_mini_batches": 2,
            "learning_rate": 1e-3,
            "schedule": "adaptive",
            "gamma": 0.99,
            "lam": 0.95,
            "entropy_coef": 0.0,
            "desired_kl": 0.01,
            "max_grad_norm": 1.0,
        },
        "actor": {
            "class_name": "MLPModel",
            "hidden_dims": [32, 32],
            "activation": "elu",
            "obs_normalization": True,
            "distribution_cfg": {"class_name": "GaussianDistribution", "init_std": 1.0},
        },
        "critic": {"class_name": "MLPModel", "hidden_dims": [32, 32], "activation": "elu", "obs_normalization": True},
    }


@pytest.fixture(scope="module")
def env():
    from gs_gym.adapters.rsl_rl import RslRlVecEnv

    adapter = RslRlVecEnv.make(NUM_ENVS, **ENV_KWARGS)
    yield adapter
    adapter.close()


# -- the missing extra ---------------------------------------------------------------------------------------------


def test_missing_rsl_rl_names_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "rsl_rl", None)  # None in sys.modules makes `import rsl_rl` raise ImportError
    monkeypatch.setitem(sys.modules, "rsl_rl.env", None)
    monkeypatch.delitem(sys.modules, "gs_gym.adapters.rsl_rl", raising=False)
    with pytest.raises(ImportError, match=r'pip install "gs-gym\[rsl-rl\]"'):
        importlib.import_module("gs_gym.adapters.rsl_rl")
    monkeypatch.delitem(sys.modules, "gs_gym.adapters.rsl_rl", raising=False)


# -- the VecEnv interface ------------------------------------------------------------------------------------------


@needs_rsl_rl
def test_vecenv_interface(env):
    from rsl_rl.env import VecEnv
    from tensordict import TensorDict

    assert isinstance(env, VecEnv)
    assert env.num_envs == NUM_ENVS and env.num_actions == 1 and env.max_episode_length == MAX_STEPS
    assert env.device == torch.device("cpu") and env.cfg.max_episode_steps == MAX_STEPS
    obs = env.reset(seed=SEED)
    assert isinstance(obs, TensorDict) and list(obs.keys()) == ["policy"] and tuple(obs.batch_size) == (NUM_ENVS,)
    assert obs["policy"].shape == (NUM_ENVS, 4) and obs["policy"].dtype == torch.float32
    assert env.get_observations() is obs
    assert env.episode_length_buf.dtype == torch.int64 and not env.episode_length_buf.any()

    assert env.venv.autoreset_mode is AutoresetMode.SAME_STEP
    lengths = torch.zeros(NUM_ENVS, dtype=torch.int64)
    time_outs = terminations = 0
    generator = torch.Generator().manual_seed(1)
    kept = (obs, obs["policy"].clone())
    for _ in range(3 * MAX_STEPS):
        actions = torch.randn(NUM_ENVS, 1, generator=generator) * 3  # beyond [-1, 1]: the adapter clips
        obs, rewards, dones, extras = env.step(actions)
        # PPO.act keeps a reference to the observations and copies them into its storage only after the next step:
        # a step must not change the observations an earlier one returned
        assert torch.equal(kept[0]["policy"], kept[1])
        kept = (obs, obs["policy"].clone())
        assert obs["policy"].shape == (NUM_ENVS, 4) and env.get_observations() is obs
        assert rewards.shape == (NUM_ENVS,) and rewards.dtype == torch.float32
        assert dones.shape == (NUM_ENVS,) and dones.dtype == torch.int64 and set(dones.tolist()) <= {0, 1}
        assert extras["time_outs"].dtype == torch.bool and extras["time_outs"].shape == (NUM_ENVS,)
        lengths += 1
        done = dones.bool()
        # a time-out is a done at the time limit (cartpole truncates only there)
        assert not bool((extras["time_outs"] & ~(done & (lengths == MAX_STEPS))).any())
        assert bool((lengths[done & ~extras["time_outs"]] <= MAX_STEPS).all())
        assert "final_obs" not in extras  # make's default: rsl_rl never reads them
        time_outs += int(extras["time_outs"].sum())
        terminations += int((done & ~extras["time_outs"]).sum())
        lengths[done] = 0
        assert torch.equal(env.episode_length_buf, lengths)
    assert time_outs >= 3 and terminations >= 1, (time_outs, terminations)


@pytest.fixture
def one_torch_thread():
    """The learner on one thread: the worker takes the other core."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def env_counters(env) -> list[int]:
    """The vector env's own episode step counters (one tensor per worker)."""
    return torch.cat([steps.cpu() for steps in env.venv.get_attr("episode_steps")]).tolist()


@needs_rsl_rl
def test_episode_length_buf_sets_the_env_counters(env):
    env.reset(seed=SEED)
    lengths = [MAX_STEPS - 1, 0, 5, MAX_STEPS - 1, 12, 1, MAX_STEPS - 1, 7]
    env.episode_length_buf = torch.tensor(lengths)
    assert env.episode_length_buf.dtype == torch.int64 and env.episode_length_buf.tolist() == lengths
    assert env_counters(env) == lengths

    _, _, dones, extras = env.step(torch.zeros(NUM_ENVS, 1))
    last = [length == MAX_STEPS - 1 for length in lengths]
    assert dones.tolist() == [int(x) for x in last] and extras["time_outs"].tolist() == last
    expected = [0 if at_limit else length + 1 for length, at_limit in zip(lengths, last, strict=True)]
    assert env.episode_length_buf.tolist() == expected and env_counters(env) == expected


@needs_rsl_rl
def test_bad_episode_length_buf_is_refused(env):
    env.reset(seed=SEED)
    with pytest.raises(ValueError, match=rf"^steps: expected values in \[0, max_episode_steps={MAX_STEPS}\)"):
        env.episode_length_buf = torch.full((NUM_ENVS,), MAX_STEPS)
    with pytest.raises(TypeError, match=r"^steps: expected an integer dtype, got torch.float32"):
        env.episode_length_buf = torch.zeros(NUM_ENVS)
    assert env.episode_length_buf.tolist() == [0] * NUM_ENVS and env_counters(env) == [0] * NUM_ENVS


@needs_rsl_rl
def test_on_policy_runner_two_iterations(env, tmp_path, one_torch_thread):
    from rsl_rl.runners import OnPolicyRunner

    torch.manual_seed(0)
    env.reset(seed=SEED)
    runner = OnPolicyRunner(env, train_cfg(), log_dir=str(tmp_path), device="cpu")
    runner.learn(num_learning_iterations=2)
    assert runner.current_learning_iteration == 1
    # the logger counted finished episodes from the adapter's rewards and dones (32 steps x 8 envs, episodes <= 20)
    assert len(runner.logger.rewbuffer) >= NUM_ENVS
    assert all(0 < length <= MAX_STEPS for length in runner.logger.lenbuffer)
    assert (tmp_path / "model_1.pt").is_file()
    policy = runner.get_inference_policy(device="cpu")
    with torch.no_grad():
        actions = policy(env.get_observations())
    assert actions.shape == (NUM_ENVS, 1) and bool(torch.isfinite(actions).all())


@needs_rsl_rl
def test_runner_with_random_initial_lengths(env, tmp_path, monkeypatch, one_torch_thread):
    """``learn(init_at_random_ep_len=True)`` assigns ``randint_like(episode_length_buf, high=max_episode_length)``:
    the env's counters hold exactly those values when the first rollout step starts."""
    from rsl_rl.runners import OnPolicyRunner

    torch.manual_seed(0)
    env.reset(seed=SEED)
    runner = OnPolicyRunner(env, train_cfg(), log_dir=str(tmp_path), device="cpu")
    torch.manual_seed(1)
    drawn = torch.randint_like(env.episode_length_buf, high=MAX_STEPS).tolist()
    assert len(set(drawn)) > 1
    seen: list[list[int]] = []
    step = env.step

    def first_counters_then_step(actions):
        if not seen:
            seen.append(env_counters(env))
        return step(actions)

    monkeypatch.setattr(env, "step", first_counters_then_step)
    torch.manual_seed(1)
    runner.learn(num_learning_iterations=2, init_at_random_ep_len=True)
    assert seen == [drawn]
    assert runner.current_learning_iteration == 1
    assert len(runner.logger.rewbuffer) >= NUM_ENVS
    # the logger counts lengths from the learn() call, so a first episode started at n ends by MAX_STEPS - n
    assert all(0 < length <= MAX_STEPS for length in runner.logger.lenbuffer)
    assert (tmp_path / "model_1.pt").is_file()


@needs_rsl_rl
@pytest.mark.parametrize("num_workers", [0, 2])
def test_runner_episode_statistics_match_gs_gym_wrappers(num_workers, tmp_path, one_torch_thread):
    """What ``OnPolicyRunner`` logs of the episodes (its ``rewbuffer``/``lenbuffer``: ``Train/mean_reward`` and
    ``Train/mean_episode_length`` are their means) over two iterations with rsl_rl's defaults is exactly what
    ``TorchRecordEpisodeStatistics`` records over the same steps (replayed through ``tests.episode_replay``)."""
    from rsl_rl.runners import OnPolicyRunner

    from gs_gym.adapters.rsl_rl import RslRlVecEnv

    kwargs = {**ENV_KWARGS, "num_workers": num_workers}
    venv = RecordingEnv(NUM_ENVS, output="torch", autoreset_mode=AutoresetMode.SAME_STEP, final_obs=False, **kwargs)
    try:
        torch.manual_seed(0)
        runner = OnPolicyRunner(RslRlVecEnv(venv, seed=SEED), train_cfg(), log_dir=str(tmp_path), device="cpu")
        runner.learn(num_learning_iterations=2)
        steps = [call for call in venv.calls if call[0] == "step"]
        assert len(steps) == 2 * train_cfg()["num_steps_per_env"]

        expected = replay_statistics(venv.calls, venv)
        assert expected.count >= NUM_ENVS  # each env reached the time limit at least once
        assert expected.count < runner.logger.rewbuffer.maxlen  # the runner's buffers dropped none
        assert list(runner.logger.rewbuffer) == expected.returns  # float32 sums in the same order: exact
        assert [int(length) for length in runner.logger.lenbuffer] == expected.lengths
    finally:
        venv.close()


@needs_rsl_rl
def test_final_obs_on_request():
    """``make(..., final_obs=True)``: the steps in which envs finish carry their pre-reset observations."""
    from gs_gym.adapters.rsl_rl import RslRlVecEnv

    adapter = RslRlVecEnv.make(NUM_ENVS, final_obs=True, **{**ENV_KWARGS, "num_workers": 0})
    try:
        obs = adapter.reset(seed=SEED)
        finished = 0
        for _ in range(MAX_STEPS):
            obs, _, dones, extras = adapter.step(torch.ones(NUM_ENVS, 1))
            done = dones.bool()
            assert ("final_obs" in extras) == bool(done.any())
            if done.any():
                final = extras["final_obs"]
                assert final.shape == (NUM_ENVS, 4) and not torch.equal(final[done], obs["policy"][done])
                finished += int(done.sum())
        assert finished >= 1
    finally:
        adapter.close()


# -- construction errors (no scene built) --------------------------------------------------------------------------


@needs_rsl_rl
def test_make_refuses_other_modes():
    from gs_gym.adapters.rsl_rl import RslRlVecEnv

    with pytest.raises(ValueError, match="output must be 'torch'"):
        RslRlVecEnv.make(4, output="numpy", backend="cpu")
    with pytest.raises(ValueError, match=r"autoreset_mode must be AutoresetMode\.SAME_STEP"):
        RslRlVecEnv.make(4, autoreset_mode="next_step", backend="cpu")
    with pytest.raises(TypeError, match=r"expected a gs_gym\.GenesisVectorEnv"):
        RslRlVecEnv(object())
