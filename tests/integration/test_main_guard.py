"""Worker envs driven from a script with no ``if __name__ == "__main__":`` guard, from code fed through stdin, and
with a task class defined in ``__main__``: workers never import the parent's ``__main__``
(``gs_gym.transport.launch``) and get what they run by value (cloudpickle).

Each case runs a separate Python process. Its module-level code appends a line to a side-effect file (it must be
there once: a worker that re-ran ``__main__`` would add one), and it prints ``result: ...`` lines that must equal
those of the same steps in-process (``num_workers=0``).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

TIMEOUT = 900.0
"""Seconds per driver process: a cold first build compiles Genesis kernels for minutes (a bound, not a measure)."""

PRELUDE = """
import hashlib
import sys

import torch

import gs_gym
from gs_gym.tasks.cartpole import CartPole

with open(sys.argv[1], "a") as side_effect:
    side_effect.write("main ran\\n")


def rollout(num_workers, task="cartpole"):
    env = gs_gym.GenesisVectorEnv(
        7, task, backend="cpu", num_workers=num_workers, seed=0, forward_output=False,
        task_kwargs={"max_episode_steps": 8},
    )
    obs, _ = env.reset(seed=0)
    observations, rewards, ends = [obs], [], 0
    actions = torch.linspace(-0.3, 0.3, 7).reshape(7, 1)
    for _ in range(4):
        obs, reward, terminated, truncated, _ = env.step(actions)
        observations.append(obs)
        rewards.append(reward)
        ends += int((terminated | truncated).sum())
    env.close()
    print("result: obs", tuple(obs.shape), obs.dtype)
    print("result: obs sha256", hashlib.sha256(torch.stack(observations).numpy().tobytes()).hexdigest())
    print("result: rewards", torch.stack(rewards).double().sum().item())
    print("result: ends", ends)
"""

CONSTANT_REWARD = """
BONUS = 2.0


class ConstantReward(CartPole):
    \"\"\"Cartpole rewarding BONUS (a global of __main__) in every state.\"\"\"

    def compute_rewards(self):
        return torch.full((self.num_envs,), BONUS, dtype=torch.float32, device=self.device)
"""


def drive(tmp_path: Path, code: str, *, stdin: bool = False) -> tuple[list[str], list[str]]:
    """Run ``code`` in a new Python process (as a script file, or fed through ``python -``); returns its
    ``result:`` lines and the lines of its side-effect file."""
    side_effect = tmp_path / "side_effect.txt"
    if stdin:
        command, feed = [sys.executable, "-", str(side_effect)], code
    else:
        script = tmp_path / "driver.py"
        script.write_text(code)
        command, feed = [sys.executable, str(script), str(side_effect)], None
    done = subprocess.run(
        command, input=feed, cwd=tmp_path, capture_output=True, text=True, timeout=TIMEOUT, check=False
    )
    assert done.returncode == 0, f"driver exited with code {done.returncode}; stderr:\n{done.stderr[-6000:]}"
    results = [line.removeprefix("result: ") for line in done.stdout.splitlines() if line.startswith("result: ")]
    return results, side_effect.read_text().splitlines()


@pytest.fixture(scope="module")
def in_process(tmp_path_factory: pytest.TempPathFactory) -> list[str]:
    """The ``result:`` lines of the steps in-process (no worker)."""
    results, side_effect = drive(tmp_path_factory.mktemp("in_process"), PRELUDE + "rollout(0)\n")
    assert side_effect == ["main ran"]
    assert results[0] == "obs (7, 4) torch.float32"
    assert results[3] == "ends 0"  # no episode ends: every reward of the steps counts in ConstantReward's sum
    return results


def test_script_without_main_guard(tmp_path, in_process):
    results, side_effect = drive(tmp_path, PRELUDE + "rollout(2)\n")
    assert side_effect == ["main ran"]
    assert results == in_process


def test_code_from_stdin(tmp_path, in_process):
    results, side_effect = drive(tmp_path, PRELUDE + "rollout(2)\n", stdin=True)
    assert side_effect == ["main ran"]
    assert results == in_process


def test_task_class_defined_in_main(tmp_path, in_process):
    results, side_effect = drive(tmp_path, PRELUDE + CONSTANT_REWARD + "rollout(2, ConstantReward)\n")
    assert side_effect == ["main ran"]
    assert results == [in_process[0], in_process[1], "rewards 56.0", "ends 0"]  # 7 envs x 4 steps x BONUS
