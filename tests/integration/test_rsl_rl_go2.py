"""``examples/rsl_rl_go2.py`` through its command line on the CPU backend: rsl_rl's ``OnPolicyRunner`` with Genesis's
go2 recipe, two short iterations on gs_gym's go2-walk (in process, the example's default on one device, and in one
worker) and on the reference env of ``bench/``.

4 envs, go2-walk's size in ``tests/tasks/test_go2_walk.py`` (its kernels are reused); each run takes about 30 s on 2
cores with a warm kernel cache, nearly all of it importing Genesis and building the scene. The untrained policy
makes the robots fall within about 15 steps, so episodes end in the first rollouts.
"""

from __future__ import annotations

import importlib.util
import math
import subprocess
import sys
from pathlib import Path

import pytest

from tests.json_files import strict_json

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "rsl_rl_go2.py"
NUM_ENVS = 4
ITERATIONS = 2
STEPS = 16
DT = 0.02
EPISODE_SECONDS = 1000 * DT
"""go2-walk's ``max_episode_steps * dt``: the ``rew_*`` terms are per second of a full episode, as in Genesis."""
TERMS = ("tracking_lin_vel", "tracking_ang_vel", "lin_vel_z", "base_height", "action_rate", "similar_to_default")
POSITIVE_WEIGHTS = {"tracking_lin_vel": 1.0, "tracking_ang_vel": 0.2}
CURVE_KEYS = {"iteration", "mean_reward", "mean_episode_length", "collection_s", "learning_s"} | {
    f"rew_{term}" for term in TERMS
}
TOTALS_KEYS = {"wall_s", "build_s", "learn_s", "collection_s", "learning_s", "env_steps"} | {
    f"{prefix}_{key}"
    for prefix, keys in (
        ("final", ("mean_reward", "mean_episode_length", "rew_tracking_lin_vel", "rew_tracking_ang_vel")),
        ("last10", ("mean_reward", "rew_tracking_lin_vel", "rew_tracking_ang_vel")),
    )
    for key in keys
}
GENESIS_RECIPE = {
    "algorithm": {
        "class_name": "PPO",
        "clip_param": 0.2,
        "desired_kl": 0.01,
        "entropy_coef": 0.01,
        "gamma": 0.99,
        "lam": 0.95,
        "learning_rate": 0.001,
        "max_grad_norm": 1.0,
        "num_learning_epochs": 5,
        "num_mini_batches": 4,
        "schedule": "adaptive",
        "use_clipped_value_loss": True,
        "value_loss_coef": 1.0,
    },
    "actor": {
        "class_name": "MLPModel",
        "hidden_dims": [512, 256, 128],
        "activation": "elu",
        "distribution_cfg": {"class_name": "GaussianDistribution", "init_std": 1.0, "std_type": "scalar"},
    },
    "critic": {"class_name": "MLPModel", "hidden_dims": [512, 256, 128], "activation": "elu"},
    "obs_groups": {"actor": ["policy"], "critic": ["policy"]},
    "save_interval": 100,
}
"""Genesis's examples/locomotion/go2_train.py (rsl-rl-lib 5 format), less num_steps_per_env (given here)."""
GENESIS_COMMAND = {"lin_vel_x_range": [0.5, 0.5], "lin_vel_y_range": [0.0, 0.0], "ang_vel_yaw_range": [0.0, 0.0]}

needs_rsl_rl = pytest.mark.skipif(
    importlib.util.find_spec("rsl_rl") is None or importlib.util.find_spec("tensorboard") is None,
    reason='rsl_rl or tensorboard is not installed (the rsl-rl extra: pip install "gs-gym[rsl-rl]")',
)


@needs_rsl_rl
@pytest.mark.parametrize(("env", "num_workers"), [("gs_gym", None), ("gs_gym", 1), ("reference", None)])
def test_two_iterations_write_the_curve(env, num_workers, tmp_path):
    out = tmp_path / "out"
    argv = ["--env", env, "--backend", "cpu", "--num-envs", str(NUM_ENVS), "--iterations", str(ITERATIONS)]
    argv += ["--num-steps-per-env", str(STEPS), "--seed", "0", "--out", str(out)]
    argv += [] if num_workers is None else ["--num-workers", str(num_workers)]
    run = subprocess.run(
        [sys.executable, str(EXAMPLE), *argv], capture_output=True, text=True, timeout=900, cwd=tmp_path
    )
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]

    result = strict_json(out / "curve.json")
    assert set(result) == {"env", "settings", "train_cfg", "machine", "totals", "curve"}
    assert result["env"] == env
    assert result["settings"] == {
        "env": env,
        "num_envs": NUM_ENVS,
        "iterations": ITERATIONS,
        "num_steps_per_env": STEPS,
        "backend": "cpu",
        "seed": 0,
        "num_workers": (num_workers or 0) if env == "gs_gym" else None,  # in process by default on one device
        "performance_mode": False,
        "task_kwargs": GENESIS_COMMAND,
    }
    cfg = result["train_cfg"]
    assert {key: cfg[key] for key in GENESIS_RECIPE} == GENESIS_RECIPE
    assert cfg["num_steps_per_env"] == STEPS and cfg["run_name"] == f"go2-walk-{env}"
    assert result["machine"]["backend"] == "cpu" and result["machine"]["cpu_count"] >= 1

    curve = result["curve"]
    assert [row["iteration"] for row in curve] == list(range(ITERATIONS))
    for row in curve:
        assert set(row) == CURVE_KEYS
        assert all(value is None or math.isfinite(value) for value in row.values())
        assert row["collection_s"] > 0 and row["learning_s"] > 0
        steps = STEPS * (row["iteration"] + 1)  # no episode counted so far is longer
        if row["mean_reward"] is None:  # no episode ended yet
            assert all(row[key] is None for key in CURVE_KEYS - {"iteration", "collection_s", "learning_s"})
            continue
        assert 0 < row["mean_episode_length"] <= steps
        if row["rew_tracking_lin_vel"] is None:  # none ended in this rollout
            assert all(row[f"rew_{term}"] is None for term in TERMS)
            continue
        for term in TERMS:
            bound = POSITIVE_WEIGHTS.get(term, 0.0) * steps * DT / EPISODE_SECONDS
            assert (0 < row[f"rew_{term}"] <= bound) if bound else row[f"rew_{term}"] <= 0, (term, row)
    last = curve[-1]
    assert last["mean_reward"] is not None and last["rew_tracking_lin_vel"] is not None, curve

    # In the first rollout where episodes end, the runner's mean return is over exactly those episodes: the sum of
    # the env's own per-term episode sums (rsl_rl's Episode/rew_*) must give it back.
    first = next(row for row in curve if row["mean_reward"] is not None)
    assert sum(first[f"rew_{term}"] for term in TERMS) * EPISODE_SECONDS == pytest.approx(
        first["mean_reward"], rel=1e-4, abs=1e-6
    )

    totals = result["totals"]
    assert set(totals) == TOTALS_KEYS
    assert totals["env_steps"] == ITERATIONS * NUM_ENVS * STEPS
    assert totals["collection_s"] == pytest.approx(sum(row["collection_s"] for row in curve))
    assert totals["learning_s"] == pytest.approx(sum(row["learning_s"] for row in curve))
    assert totals["wall_s"] >= totals["build_s"] + totals["learn_s"] > totals["collection_s"] + totals["learning_s"]
    for key in ("mean_reward", "mean_episode_length", "rew_tracking_lin_vel", "rew_tracking_ang_vel"):
        assert totals[f"final_{key}"] == last[key]
    present = [row["rew_tracking_lin_vel"] for row in curve if row["rew_tracking_lin_vel"] is not None]
    assert totals["last10_rew_tracking_lin_vel"] == pytest.approx(sum(present) / len(present))

    assert (out / f"model_{ITERATIONS - 1}.pt").is_file() and list(out.glob("events.out.tfevents.*"))
    lines = run.stdout.splitlines()
    header = next(i for i, line in enumerate(lines) if line.split()[:2] == ["iter", "reward"])
    assert [line.split()[0] for line in lines[header + 1 : header + 1 + ITERATIONS]] == ["0", "1"]
    assert lines[-1].startswith("wall ") and "final tracking_lin_vel " in lines[-1]
