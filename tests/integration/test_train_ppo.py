"""End to end: ``examples/train_ppo.py`` learns cartpole on the CPU backend within a CI-sized budget.

One run of about 200k env steps (64 envs, 1 worker): about 20-35 s of training on 2 CPU cores plus ~25 s to build
the env and measure the random-policy baseline. A random policy keeps the pole up for ~23 steps (return ~23); the
trained policy must beat it by a wide margin.
"""

from __future__ import annotations

import importlib.util
import json
import math
import sys
from pathlib import Path

import pytest
import torch

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "train_ppo.py"
NUM_ENVS = 64
NUM_STEPS = 32
ITERATIONS = 96
RETURN_WINDOW = 100


def load_example():
    spec = importlib.util.spec_from_file_location("gs_gym_example_train_ppo", EXAMPLE)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    train_ppo = load_example()
    out_dir = tmp_path_factory.mktemp("ppo")
    args = train_ppo.parse_args(
        [
            "--task",
            "cartpole",
            "--backend",
            "cpu",
            "--num-envs",
            str(NUM_ENVS),
            "--num-workers",
            "1",
            "--num-steps",
            str(NUM_STEPS),
            "--total-timesteps",
            str(ITERATIONS * NUM_ENVS * NUM_STEPS),
            "--random-steps",
            "200",
            "--return-window",
            str(RETURN_WINDOW),
            "--seed",
            "0",
            "--out-dir",
            str(out_dir),
        ]
    )
    return train_ppo, train_ppo.train(args), out_dir


def test_beats_random_policy_by_wide_margin(trained):
    _, result, _ = trained
    random_return, final_return = result["random_return"], result["final_return"]
    # the baseline is measured, not assumed: enough finished random episodes for a stable mean
    assert result["random_episodes"] >= 200
    assert math.isfinite(random_return) and random_return > 0
    assert result["final_episodes"] == RETURN_WINDOW
    assert final_return >= 3 * random_return, (final_return, random_return)
    assert final_return >= random_return + 50, (final_return, random_return)


def test_run_accounting(trained):
    _, result, _ = trained
    assert result["global_step"] == ITERATIONS * NUM_ENVS * NUM_STEPS
    assert result["episodes"] >= RETURN_WINDOW
    assert result["sps"] > 0
    assert len(result["history"]) == ITERATIONS
    assert result["history"][-1]["global_step"] == result["global_step"]


def test_task_metrics_evaluation_and_timings(trained):
    train_ppo, result, out_dir = trained
    assert result["complete"] and result["preset"] is None and result["args"]["lr_schedule"] == "anneal"
    assert result["iterations"] == result["planned_iterations"] == ITERATIONS
    assert all(list(h["task_metrics"]) == ["abs_pole_angle", "abs_cart_position"] for h in result["history"])
    assert [h["lr"] for h in result["history"][:2]] == [1e-3, 1e-3 * (1 - 1 / ITERATIONS)]
    for key in ("wall_time", "train_time", "rollout_time", "update_time", "build_time", "eval_time", "rollout_sps"):
        assert result[key] > 0, key
    assert result["rollout_time"] + result["update_time"] < result["train_time"] < result["wall_time"]
    evaluation = result["eval"]
    assert (evaluation["steps"], evaluation["num_envs"], evaluation["last_half_from_step"]) == (200, NUM_ENVS, 101)
    assert [row["step"] for row in evaluation["trace"]] == list(range(1, 201))
    assert evaluation["episodes"] == evaluation["terminated"] + evaluation["truncated"]
    assert list(evaluation["task_metrics_last_half"]) == ["abs_pole_angle", "abs_cart_position"]
    assert result["summary"].startswith("cartpole: abs_pole_angle ")
    saved = json.loads((out_dir / train_ppo.METRICS_NAME).read_text())
    assert saved["summary"] == result["summary"] and saved["eval"]["steps"] == 200 and saved["complete"]


def test_outputs_written(trained):
    train_ppo, result, out_dir = trained
    checkpoint = out_dir / train_ppo.CHECKPOINT_NAME
    plot = out_dir / train_ppo.PLOT_NAME
    assert Path(result["checkpoint"]) == checkpoint and checkpoint.is_file()
    assert Path(result["plot"]) == plot and plot.is_file()
    assert plot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"

    data = torch.load(checkpoint, map_location="cpu", weights_only=False)
    assert {"agent", "obs_normalizer"} <= set(data)
    agent, norm = train_ppo.load_checkpoint(checkpoint)
    assert norm.mean.shape == (4,) and norm.count.item() > result["global_step"]
    with torch.no_grad():
        action = agent.actor_mean(norm.normalize(torch.zeros(3, 4)))
    assert action.shape == (3, 1) and bool(torch.isfinite(action).all())
