"""``examples/cleanrl_ppo_numpy.py``: the episode returns it logs (Gymnasium's ``RecordEpisodeStatistics`` under
NEXT_STEP autoreset) are the env's true episode returns.

One short training run (8 envs x 64 steps x 6 iterations = 3,072 env steps on one worker, ``max_episode_steps=30``
so that both terminations and time limits occur) records the raw env traffic under the Gymnasium wrappers. The
test then (1) recomputes every episode's return and length from the raw rewards, independently of Gymnasium, and
(2) replays the recorded actions on the raw env after ``reset(seed=SEED)``, which must give the same raw rewards
and dones. Exact equality throughout. One scene build (10-20 s on idle cores) plus ~10 s of training.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import numpy as np
import pytest
from gymnasium.vector import AutoresetMode, VectorWrapper

from gs_gym import GenesisVectorEnv

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "cleanrl_ppo_numpy.py"
NUM_ENVS = 8
NUM_STEPS = 64
ITERATIONS = 6
MAX_STEPS = 30
SEED = 3


def load_example():
    spec = importlib.util.spec_from_file_location("gs_gym_example_cleanrl_ppo_numpy", EXAMPLE)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


class RawRecorder(VectorWrapper):
    """Sits between the GenesisVectorEnv and the Gymnasium wrappers; keeps what crosses it."""

    def __init__(self, env) -> None:
        super().__init__(env)
        self.resets: list[dict] = []
        self.actions: list[np.ndarray] = []
        self.rewards: list[np.ndarray] = []
        self.terminated: list[np.ndarray] = []
        self.truncated: list[np.ndarray] = []

    def reset(self, *, seed=None, options=None):
        self.resets.append({"seed": seed, "options": options, "at_step": len(self.actions)})
        return self.env.reset(seed=seed, options=options)

    def step(self, actions):
        self.actions.append(np.array(actions, dtype=np.float32, copy=True))
        obs, rewards, terminated, truncated, info = self.env.step(actions)
        self.rewards.append(rewards.copy())
        self.terminated.append(terminated.copy())
        self.truncated.append(truncated.copy())
        return obs, rewards, terminated, truncated, info


@pytest.fixture(scope="module")
def run():
    example = load_example()
    args = example.parse_args(
        [
            "--backend",
            "cpu",
            "--num-workers",
            "1",
            "--seed",
            str(SEED),
            "--num-envs",
            str(NUM_ENVS),
            "--num-steps",
            str(NUM_STEPS),
            "--num-minibatches",
            "4",
            "--update-epochs",
            "4",
            "--total-timesteps",
            str(NUM_ENVS * NUM_STEPS * ITERATIONS),
            "--max-episode-steps",
            str(MAX_STEPS),
        ]
    )
    recorders: list[RawRecorder] = []

    def record(env):
        recorders.append(RawRecorder(env))
        return recorders[-1]

    envs = example.make_env(args, raw_wrapper=record)
    try:
        result = example.train(args, envs=envs)
        yield args, result, recorders[0]
    finally:
        envs.close()


def recompute_episodes(recorder: RawRecorder) -> list[dict]:
    """Episodes from the raw NEXT_STEP stream: the step after a done is a reset step (reward 0, not counted)."""
    returns = np.zeros(NUM_ENVS)  # float64, summed in step order like RecordEpisodeStatistics
    lengths = np.zeros(NUM_ENVS, dtype=int)
    prev_done = np.zeros(NUM_ENVS, dtype=bool)
    episodes = []
    for step, (rewards, terminated, truncated) in enumerate(
        zip(recorder.rewards, recorder.terminated, recorder.truncated, strict=True)
    ):
        done = terminated | truncated
        assert not rewards[prev_done].any(), f"step {step}: the reset step must give reward 0"
        assert not done[prev_done].any(), f"step {step}: the reset step must not end an episode"
        counted = ~prev_done
        returns[prev_done], lengths[prev_done] = 0.0, 0
        returns[counted] += rewards[counted]
        lengths[counted] += 1
        for index in np.flatnonzero(done):
            episodes.append(
                {
                    "global_step": (step + 1) * NUM_ENVS,
                    "env": int(index),
                    "r": float(returns[index]),
                    "l": int(lengths[index]),
                    "terminated": bool(terminated[index]),
                }
            )
        prev_done = done
    return episodes


def test_logged_returns_are_the_raw_episode_returns(run):
    _, result, recorder = run
    assert len(recorder.resets) == 1 and recorder.resets[0]["seed"] == SEED  # one reset, then autoreset only
    logged = result["episodes"]
    expected = recompute_episodes(recorder)
    assert len(logged) >= 3 * NUM_ENVS
    assert [{k: e[k] for k in ("global_step", "env", "r", "l")} for e in expected] == logged  # exact
    # both kinds of episode end happened, and time limits are exactly MAX_STEPS long
    assert any(e["terminated"] for e in expected) and any(e["l"] == MAX_STEPS for e in expected)
    assert all(e["l"] == MAX_STEPS for e in expected if not e["terminated"])
    assert all(1 <= e["l"] <= MAX_STEPS for e in expected)


def test_raw_rewards_replay(run):
    """The recorded actions, replayed on the raw env after ``reset(seed=SEED)``, give the same raw rewards and
    dones: the logged returns are the env's returns for the actions the policy took, not an artifact of the
    wrappers."""
    _, _, recorder = run
    env = recorder.env
    assert isinstance(env, GenesisVectorEnv) and env.autoreset_mode is AutoresetMode.NEXT_STEP
    env.reset(seed=SEED)
    for step, actions in enumerate(recorder.actions):
        assert actions.min() >= -1.0 and actions.max() <= 1.0  # ClipAction clipped the Gaussian samples
        _, rewards, terminated, truncated, _ = env.step(actions)
        np.testing.assert_array_equal(rewards, recorder.rewards[step], err_msg=f"step {step}")
        np.testing.assert_array_equal(terminated, recorder.terminated[step], err_msg=f"step {step}")
        np.testing.assert_array_equal(truncated, recorder.truncated[step], err_msg=f"step {step}")


def test_run_accounting(run):
    args, result, recorder = run
    assert args.num_iterations == ITERATIONS
    assert result["global_step"] == ITERATIONS * NUM_STEPS * NUM_ENVS
    assert len(recorder.actions) == ITERATIONS * NUM_STEPS
    assert np.isfinite(result["mean_return"]) and result["sps"] > 0
