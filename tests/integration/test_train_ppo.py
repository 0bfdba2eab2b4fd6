"""End to end through the command line: ``examples/train_ppo.py`` learns cartpole on the CPU backend, and
``examples/play.py`` plays its checkpoint.

One run of about 200k env steps (64 envs, 1 worker, the script's defaults otherwise: observation and reward
normalization, annealed learning rate, tanh 64-64 MLPs): ~1 minute on 2 CPU cores with a warm kernel cache. Then
``play.py`` plays one episode per env (64, in-process) with the policy's action mean and, as the baseline, with
random actions: a random policy keeps the pole up for ~23 steps (return ~23); the trained policy must beat it by a
wide margin, in training and deterministically. The outputs are checked as a user reads them: the printed lines,
``metrics.json``, ``checkpoint.pt``, the plot and play.py's JSON.
"""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from tests.json_files import strict_json

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "train_ppo.py"
PLAY = ROOT / "examples" / "play.py"
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
    "final_return",
    "final_episodes",
    "final_lr",
    "times",
    "video",
    "history",
}
TIMES_KEYS = {"build", "train", "video", "rollout", "update", "wall"}
PLAY_KEYS = {"checkpoint", "task", "policy", "num_envs", "seed", "steps", "episodes", "mean_return", "min_return"}
PLAY_KEYS |= {"max_return", "terminated", "task_metrics_last_half", "video"}
CARTPOLE_METRICS = ["abs_pole_angle", "abs_cart_position"]


def load_agent_class():
    """``Agent`` of the example (importing the file defines it; the training runs only as ``__main__``)."""
    spec = importlib.util.spec_from_file_location("gs_gym_example_train_ppo", EXAMPLE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.Agent


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    out_dir = tmp_path_factory.mktemp("ppo")
    argv = ["--task", "cartpole", "--backend", "cpu", "--num-envs", str(NUM_ENVS), "--num-workers", "1"]
    argv += ["--num-steps", str(NUM_STEPS), "--total-timesteps", str(ITERATIONS * NUM_ENVS * NUM_STEPS)]
    argv += ["--return-window", str(RETURN_WINDOW), "--seed", "0", "--out-dir", str(out_dir)]
    run = subprocess.run([sys.executable, str(EXAMPLE), *argv], cwd=ROOT, capture_output=True, text=True, timeout=900)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    return run, strict_json(out_dir / "metrics.json"), out_dir


@pytest.fixture(scope="module")
def played(trained):
    """``play.py`` on the checkpoint (its 64 envs, in-process, seed 0): the action mean, then random actions."""
    _, _, out_dir = trained
    runs = {}
    for policy, extra in (("mean", []), ("random", ["--random"])):
        path = out_dir / f"play-{policy}.json"
        command = [sys.executable, str(PLAY), str(out_dir / "checkpoint.pt"), "--json", str(path), *extra]
        run = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=600)
        assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
        runs[policy] = run, strict_json(path)
    return runs


def test_beats_random_policy_by_wide_margin(trained, played):
    _, result, _ = trained
    (_, policy), (_, random) = played["mean"], played["random"]
    # the baseline is measured, not assumed: every env's first episode, all ended (a random pole falls in ~23 steps)
    assert (random["policy"], random["num_envs"], len(random["episodes"])) == ("random", NUM_ENVS, NUM_ENVS)
    assert random["mean_return"] > 0 and random["steps"] < 500
    assert (policy["policy"], policy["num_envs"], len(policy["episodes"])) == ("mean", NUM_ENVS, NUM_ENVS)
    assert result["final_episodes"] == RETURN_WINDOW
    for achieved in (result["final_return"], policy["mean_return"]):  # in training, then deterministically
        assert achieved >= 3 * random["mean_return"], (achieved, random["mean_return"])
        assert achieved >= random["mean_return"] + 50, (achieved, random["mean_return"])


def test_play_prints_each_episode_and_a_summary_matching_its_json(trained, played):
    _, _, out_dir = trained
    for run, summary in played.values():
        assert set(summary) == PLAY_KEYS and summary["task"] == "cartpole" and summary["seed"] == 0
        assert summary["checkpoint"] == str(out_dir / "checkpoint.pt") and summary["video"] is None
        assert list(summary["task_metrics_last_half"]) == CARTPOLE_METRICS
        episodes = summary["episodes"]
        assert sorted(e["env"] for e in episodes) == list(range(NUM_ENVS))  # one episode per env, none twice
        # every env starts its episode at the reset: the run stops when the longest ends (cartpole truncates at 500)
        assert summary["steps"] == max(e["length"] for e in episodes) <= 500
        assert summary["terminated"] == sum(e["ended"] == "terminated" for e in episodes)
        lines = run.stdout.splitlines()
        printed = [line for line in lines if line.startswith("episode ")]
        assert printed == [
            f"episode {n}: env {e['env']}, return {e['return']:.2f}, {e['length']} steps, {e['ended']}"
            for n, e in enumerate(episodes, 1)
        ]
        returns = [e["return"] for e in episodes]
        assert summary["mean_return"] == pytest.approx(sum(returns) / NUM_ENVS)
        assert (summary["min_return"], summary["max_return"]) == (min(returns), max(returns))
        name = "policy mean (deterministic)" if summary["policy"] == "mean" else "random actions"
        metrics = summary["task_metrics_last_half"]
        assert lines[-1] == (
            f"cartpole, {name}: {NUM_ENVS} of {NUM_ENVS} episodes finished in {summary['steps']} steps: mean return "
            f"{summary['mean_return']:.2f} (min {min(returns):.2f}, max {max(returns):.2f}), {summary['terminated']} "
            f"terminated, abs_pole_angle {metrics['abs_pole_angle']:.3f}, "
            f"abs_cart_position {metrics['abs_cart_position']:.3f}"
        )


def test_metrics_json_structure_and_accounting(trained):
    _, result, out_dir = trained
    assert set(result) == METRICS_KEYS and result["complete"]
    assert set(result["times"]) == TIMES_KEYS and result["video"] is None  # no --capture-video
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


def test_printed_lines(trained):
    run, result, out_dir = trained
    lines = run.stdout.splitlines()
    settings = json.loads(lines[0].removeprefix("settings (no preset): "))
    assert settings == result["args"]
    assert any(line.startswith(f"env: cartpole x{NUM_ENVS} on cpu (1 worker(s)), built in ") for line in lines)
    assert any(line.startswith("step ") and "| abs_pole_angle " in line for line in lines)
    assert lines[-3].endswith(f"outputs in {out_dir}")
    assert lines[-2] == f"play the policy: python examples/play.py {out_dir / 'checkpoint.pt'}"
    assert lines[-1] == result["summary"]
    metrics = result["history"][-1]["task_metrics"]  # of the last iteration
    assert result["summary"] == (
        f"cartpole: training return {result['final_return']:.2f} (mean of the last {RETURN_WINDOW} episodes), "
        f"abs_pole_angle {metrics['abs_pole_angle']:.3f}, abs_cart_position {metrics['abs_cart_position']:.3f}"
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
