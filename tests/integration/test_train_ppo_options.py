"""``examples/train_ppo.py``'s command line: the flags the docs mention, the errors for bad ones, the go2-walk
preset, and a tiny run (8 envs in-process, 2 iterations) in which no episode ends: nothing prints nan,
``metrics.json`` stays valid JSON with nulls, and the checkpoint holds the network that the flags asked for.
(The evaluation and the random-policy baseline are ``examples/play.py``'s: ``test_play.py``.)"""

from __future__ import annotations

import importlib.util
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from tests.json_files import strict_json

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "train_ppo.py"
DOCS = [ROOT / "README.md", ROOT / "bench" / "gpu_session.sh", ROOT / "bench" / "results" / "README.md"]
DOCS += sorted((ROOT / "docs").glob("*.md"))
GO2_COMMANDS = {"lin_vel_x_range": [0.5, 0.5], "lin_vel_y_range": [0.0, 0.0], "ang_vel_yaw_range": [0.0, 0.0]}
GO2_SETTINGS = {  # Genesis' Go2 locomotion example with rsl_rl's PPO (bench/results/README.md quotes its results)
    "task": "go2-walk",
    "preset": "go2-walk",
    "num_envs": 4096,
    "num_steps": 24,
    "total_timesteps": 150 * 24 * 4096,
    "hidden_sizes": [512, 256, 128],
    "activation": "elu",
    "init_log_std": 0.0,
    "learning_rate": 1e-3,
    "lr_schedule": "adaptive",
    "desired_kl": 0.01,
    "update_epochs": 5,
    "num_minibatches": 4,
    "clip_coef": 0.2,
    "clip_vloss": True,
    "ent_coef": 0.01,
    "vf_coef": 2.0,
    "max_grad_norm": 1.0,
    "gamma": 0.99,
    "gae_lambda": 0.95,
    "norm_adv": True,
    "norm_obs": False,
    "norm_reward": False,
    "return_window": 1000,
    "capture_video": False,
    "target_kl": None,
    "max_train_time": None,
    "num_workers": 1,
    "out_dir": "runs/go2-walk-1",
}


def run_example(*argv: str, timeout: float = 600) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, str(EXAMPLE), *argv], cwd=ROOT, capture_output=True, text=True, timeout=timeout
    )


def settings_of(stdout: str) -> dict:
    """The effective settings, from the first line the script prints."""
    first = stdout.splitlines()[0]
    assert first.startswith("settings ("), stdout[-2000:]
    return json.loads(first.split(": ", 1)[1])


def test_the_flags_the_docs_mention_exist():
    help_text = run_example("--help", timeout=120).stdout
    known = set(re.findall(r"(--[a-z][a-z-]*)", help_text))
    mentioned = set()
    for path in DOCS:
        for line in path.read_text().splitlines():
            if "train_ppo.py" in line:
                mentioned |= set(re.findall(r"(?<![\w-])(--[a-z][a-z-]*)", line.split("train_ppo.py", 1)[1]))
    assert {"--task", "--max-train-time", "--log-every", "--out-dir"} <= mentioned
    assert mentioned <= known, mentioned - known


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--activation", "relu"], "argument --activation: invalid choice: 'relu'"),
        (["--lr-schedule", "cosine"], "argument --lr-schedule: invalid choice: 'cosine'"),
        (["--norm-obs", "maybe"], "argument --norm-obs: expected true or false, got 'maybe'"),
        (["--task-kwargs", "[1]"], "--task-kwargs must be a JSON object, got [1]"),
        (["--desired-kl", "0"], "--desired-kl must be > 0, got 0.0"),
        (["--hidden-sizes", "64", "0"], "--hidden-sizes must be > 0, got [64, 0]"),
        (["--video-envs", "0"], "--video-envs must be >= 1, got 0"),
        (["--eval-steps", "6"], "unrecognized arguments: --eval-steps 6"),  # moved: examples/play.py
        (["--update-epochs", "0"], "--update-epochs must be >= 1, got 0"),
        (["--max-train-time", "0"], "--max-train-time must be > 0, got 0.0"),
        (  # the preset's 4 minibatches
            ["--task", "go2-walk", "--num-envs", "5", "--num-steps", "3"],
            "num_envs * num_steps (15) must be divisible by --num-minibatches",
        ),
        (["--hidden-size", "32"], "unrecognized arguments: --hidden-size 32"),  # removed: --hidden-sizes 32 32
    ],
)
def test_bad_flags_are_named(argv, message):
    run = run_example("--backend", "cpu", *argv, timeout=120)
    assert run.returncode == 2 and run.stdout == ""
    error = run.stderr.splitlines()[-1].split(": error: ", 1)[1]
    assert error == message or error.startswith(message + " (choose from ")  # argparse's list varies by version


def test_go2_preset_and_flags_that_override_it():
    """The preset's settings are printed before the env is built; an unknown task option then stops the run."""
    run = run_example("--task", "go2-walk", "--backend", "cpu", "--task-kwargs", '{"no_such_option": 1}')
    assert run.returncode != 0 and "no_such_option" in run.stderr
    settings = settings_of(run.stdout)
    assert run.stdout.startswith("settings (preset go2-walk): ")
    assert {key: settings[key] for key in GO2_SETTINGS} == GO2_SETTINGS
    assert settings["task_kwargs"] == {**GO2_COMMANDS, "no_such_option": 1}

    argv = ["--num-envs", "8", "--task=go2-walk", "--ent-coef", "0", "--lr-schedule", "constant"]
    argv += ["--hidden-sizes", "32", "16", "--norm-obs", "true", "--capture-video"]
    run = run_example(*argv, "--backend", "cpu", "--task-kwargs", '{"lin_vel_x_range": [1, 1], "no_such_option": 1}')
    overridden = dict(GO2_SETTINGS, num_envs=8, ent_coef=0.0, lr_schedule="constant", hidden_sizes=[32, 16])
    overridden.update(norm_obs=True, capture_video=True)
    assert {key: settings_of(run.stdout)[key] for key in GO2_SETTINGS} == overridden
    assert settings_of(run.stdout)["task_kwargs"] == {**GO2_COMMANDS, "lin_vel_x_range": [1, 1], "no_such_option": 1}


@pytest.fixture(scope="module")
def no_episode_ends(tmp_path_factory):
    """8 cartpole envs for 2 x 3 training steps: too few for a pole to fall."""
    out_dir = tmp_path_factory.mktemp("tiny")
    argv = ["--task", "cartpole", "--backend", "cpu", "--num-envs", "8", "--num-workers", "0", "--num-steps", "3"]
    argv += ["--num-minibatches", "2", "--total-timesteps", "48"]
    argv += ["--task-kwargs", '{"max_episode_steps": 1000}', "--lr-schedule", "adaptive", "--hidden-sizes", "32", "16"]
    argv += ["--activation", "elu", "--init-log-std", "-0.5", "--norm-obs", "false", "--out-dir", str(out_dir)]
    run = run_example(*argv)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    return run, out_dir


def test_no_finished_episode_prints_no_nan_and_writes_valid_json(no_episode_ends):
    run, out_dir = no_episode_ends
    assert "nan" not in run.stdout.lower()
    assert "| return n/a (no episode finished) (0 eps) |" in run.stdout
    summary = run.stdout.splitlines()[-1]
    assert summary.startswith("cartpole: training return n/a (no episode finished), abs_pole_angle ")

    result = strict_json(out_dir / "metrics.json")
    assert result["summary"] == summary
    assert (result["final_return"], result["final_episodes"], result["episodes"]) == (None, 0, 0)
    assert [h["mean_return"] for h in result["history"]] == [None, None]
    assert result["iterations"] == 2 and result["global_step"] == 48
    assert all(1e-5 <= h["lr"] <= 1e-2 for h in result["history"]) and result["final_lr"] == result["history"][-1]["lr"]


def test_checkpoint_holds_the_network_the_flags_asked_for(no_episode_ends):
    _, out_dir = no_episode_ends
    checkpoint = torch.load(out_dir / "checkpoint.pt", map_location="cpu", weights_only=False)
    assert checkpoint["network"] == {"hidden_sizes": [32, 16], "activation": "elu"}
    assert checkpoint["obs_rms"] is None  # --norm-obs false: the policy reads raw observations
    spec = importlib.util.spec_from_file_location("gs_gym_example_train_ppo", EXAMPLE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    agent = module.Agent(checkpoint["obs_dim"], checkpoint["act_dim"], **checkpoint["network"])
    agent.load_state_dict(checkpoint["agent"])
    layers = [(type(m).__name__, getattr(m, "out_features", 0)) for m in agent.actor_mean]
    assert layers == [("Linear", 32), ("ELU", 0), ("Linear", 16), ("ELU", 0), ("Linear", 1)]
    assert agent.actor_mean[0].in_features == agent.critic[0].in_features == 4 and agent.critic[-1].out_features == 1
    assert agent.actor_logstd.shape == (1, 1)
    with torch.no_grad():
        assert agent.actor_mean(torch.zeros(2, 4)).shape == (2, 1)
