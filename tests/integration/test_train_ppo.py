"""End to end through the command line: ``examples/train_ppo.py`` learns cartpole on the CPU backend.

One run of about 200k env steps (64 envs, 1 worker, the script's defaults otherwise: observation and reward
normalization, annealed learning rate, tanh 64-64 MLPs): ~1 minute on 2 CPU cores with a warm kernel cache. A
random policy keeps the pole up for ~23 steps (return ~23); the trained policy must beat it by a wide margin. The
outputs are checked as a user reads them: the printed lines, ``metrics.json``, ``checkpoint.pt`` and the plot.
"""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "train_ppo.py"
NUM_ENVS = 64
NUM_STEPS = 32
ITERATIONS = 96
RETURN_WINDOW = 100
METRICS_KEYS = {
    "complete",
    "args",
    "summary",
    "iterations",
    "planned_iterations",
    "global_step",
    "episodes",
    "random_policy",
    "final_return",
    "final_episodes",
    "final_lr",
    "times",
    "eval",
    "history",
}
POLICY_RUN_KEYS = {"steps", "episodes", "mean_return", "terminated", "mean_reward_per_step", "task_metrics_last_half"}
TIMES_KEYS = {"build", "random_policy", "train", "eval", "rollout", "update", "wall"}
CARTPOLE_METRICS = ["abs_pole_angle", "abs_cart_position"]


def load_agent_class():
    """``Agent`` of the example (importing the file defines it; the training runs only as ``__main__``)."""
    spec = importlib.util.spec_from_file_location("gs_gym_example_train_ppo", EXAMPLE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.Agent


def strict_json(path: Path):
    """``path``'s JSON, refusing NaN and infinities (which Python's json would read)."""

    def refuse(constant):
        raise ValueError(f"{path.name} holds {constant}, which is not JSON")

    return json.loads(path.read_text(), parse_constant=refuse)


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    out_dir = tmp_path_factory.mktemp("ppo")
    argv = ["--task", "cartpole", "--backend", "cpu", "--num-envs", str(NUM_ENVS), "--num-workers", "1"]
    argv += ["--num-steps", str(NUM_STEPS), "--total-timesteps", str(ITERATIONS * NUM_ENVS * NUM_STEPS)]
    argv += ["--random-steps", "200", "--return-window", str(RETURN_WINDOW), "--seed", "0", "--out-dir", str(out_dir)]
    run = subprocess.run([sys.executable, str(EXAMPLE), *argv], cwd=ROOT, capture_output=True, text=True, timeout=900)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    return run, strict_json(out_dir / "metrics.json"), out_dir


def test_beats_random_policy_by_wide_margin(trained):
    _, result, _ = trained
    random_return, final_return = result["random_policy"]["mean_return"], result["final_return"]
    # the baseline is measured, not assumed: enough finished random episodes for a stable mean
    assert result["random_policy"]["episodes"] >= 200 and random_return > 0
    assert result["final_episodes"] == RETURN_WINDOW
    assert final_return >= 3 * random_return, (final_return, random_return)
    assert final_return >= random_return + 50, (final_return, random_return)


def test_metrics_json_structure_and_accounting(trained):
    _, result, out_dir = trained
    assert set(result) == METRICS_KEYS and result["complete"]
    assert set(result["random_policy"]) == set(result["eval"]) == POLICY_RUN_KEYS and set(result["times"]) == TIMES_KEYS
    assert result["args"]["task"] == "cartpole" and result["args"]["preset"] is None
    assert result["args"]["out_dir"] == str(out_dir) and result["args"]["lr_schedule"] == "anneal"
    assert result["iterations"] == result["planned_iterations"] == ITERATIONS
    assert result["global_step"] == ITERATIONS * NUM_ENVS * NUM_STEPS and result["episodes"] >= RETURN_WINDOW
    history = result["history"]
    assert [h["global_step"] for h in history] == [NUM_ENVS * NUM_STEPS * i for i in range(1, ITERATIONS + 1)]
    assert all(set(h) == {"global_step", "time", "mean_return", "lr", "task_metrics"} for h in history)
    assert all(list(h["task_metrics"]) == CARTPOLE_METRICS for h in history)
    assert [h["lr"] for h in history[:2]] == [1e-3, 1e-3 * (1 - 1 / ITERATIONS)]  # annealed linearly towards 0
    assert result["final_lr"] == history[-1]["lr"] == pytest.approx(1e-3 / ITERATIONS)
    assert all(value >= 0 for value in result["times"].values())
    evaluation = result["eval"]
    assert (evaluation["steps"], list(evaluation["task_metrics_last_half"])) == (200, CARTPOLE_METRICS)
    assert 0 <= evaluation["terminated"] <= evaluation["episodes"]


def test_printed_lines(trained):
    run, result, out_dir = trained
    lines = run.stdout.splitlines()
    settings = json.loads(lines[0].removeprefix("settings (no preset): "))
    assert settings == result["args"]
    assert any(line.startswith(f"env: cartpole x{NUM_ENVS} on cpu (1 worker(s)), built in ") for line in lines)
    assert any(line.startswith("step ") and "| abs_pole_angle " in line for line in lines)
    assert lines[-2].endswith(f"outputs in {out_dir}")
    assert lines[-1] == result["summary"]
    assert result["summary"].startswith("cartpole: abs_pole_angle ")
    evaluation = (
        " terminations in the 200-step deterministic evaluation x 64 envs (metrics: mean over its last 100 steps)"
    )
    assert evaluation in result["summary"]
    assert result["summary"].endswith(
        f"training return {result['final_return']:.2f} (random policy {result['random_policy']['mean_return']:.2f})"
    )
    assert "starting" in run.stderr  # the env's start-up progress (verbose=True)


def test_checkpoint_and_plot(trained):
    run, result, out_dir = trained
    checkpoint = torch.load(out_dir / "checkpoint.pt", map_location="cpu", weights_only=False)
    assert set(checkpoint) == {"agent", "obs_rms", "obs_dim", "act_dim", "network", "args"}
    assert (checkpoint["obs_dim"], checkpoint["act_dim"]) == (4, 1) and checkpoint["args"] == result["args"]
    assert checkpoint["network"] == {"hidden_sizes": [64, 64], "activation": "tanh"}
    agent = load_agent_class()(checkpoint["obs_dim"], checkpoint["act_dim"], **checkpoint["network"])
    agent.load_state_dict(checkpoint["agent"])  # strict: every parameter present, with its shape
    assert [tuple(p.shape) for p in agent.actor_mean.parameters()] == [(64, 4), (64,), (64, 64), (64,), (1, 64), (1,)]
    assert isinstance(agent.critic[1], torch.nn.Tanh) and agent.actor_logstd.shape == (1, 1)
    rms = checkpoint["obs_rms"]
    assert rms["mean"].shape == rms["var"].shape == (4,) and float(rms["count"]) > result["global_step"]
    with torch.no_grad():
        obs = ((torch.zeros(3, 4, dtype=torch.float64) - rms["mean"]) / (rms["var"] + 1e-8).sqrt()).clamp(-10, 10)
        action = agent.actor_mean(obs.float())
    assert action.shape == (3, 1) and bool(torch.isfinite(action).all())
    if importlib.util.find_spec("matplotlib") is None:
        assert "note: matplotlib is not installed" in run.stdout and not (out_dir / "learning_curve.png").exists()
    else:
        assert (out_dir / "learning_curve.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
