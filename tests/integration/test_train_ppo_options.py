"""``examples/train_ppo.py`` without an env: task presets and overrides, learning-rate schedules, the Gaussian KL,
the agent's shapes, the weighted task metrics, the summary line and checkpoints."""

from __future__ import annotations

import importlib.util
import json
import math
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "train_ppo.py"
MODULE = "gs_gym_example_train_ppo"


def load_example():
    if MODULE not in sys.modules:
        spec = importlib.util.spec_from_file_location(MODULE, EXAMPLE)
        sys.modules[MODULE] = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(sys.modules[MODULE])
    return sys.modules[MODULE]


tp = load_example()

GO2_COMMANDS = {"lin_vel_x_range": (0.5, 0.5), "lin_vel_y_range": (0.0, 0.0), "ang_vel_yaw_range": (0.0, 0.0)}
GO2_EXPECTED = {
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
    "anneal_lr": False,
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
    "random_steps": 100,
    "return_window": 1000,
    "eval_steps": 250,
    "task_kwargs": GO2_COMMANDS,
    "target_kl": None,
    "max_train_time": None,
    "num_workers": 1,
    "out_dir": "runs/go2-walk-1",
}
CARTPOLE_EXPECTED = {
    "task": "cartpole",
    "preset": None,
    "num_envs": 64,
    "num_steps": 32,
    "total_timesteps": 600_000,
    "hidden_size": 64,
    "hidden_sizes": [64, 64],
    "activation": "tanh",
    "init_log_std": 0.0,
    "learning_rate": 1e-3,
    "lr_schedule": "anneal",
    "anneal_lr": True,
    "update_epochs": 5,
    "num_minibatches": 4,
    "clip_coef": 0.2,
    "ent_coef": 0.0,
    "vf_coef": 0.5,
    "max_grad_norm": 0.5,
    "norm_obs": True,
    "norm_reward": True,
    "random_steps": 300,
    "return_window": 100,
    "eval_steps": 200,
    "task_kwargs": {},
    "performance_mode": False,
}


def picked(args, expected):
    return {key: getattr(args, key) for key in expected}


# -- presets and overrides -------------------------------------------------------------------------------------------


def test_go2_preset_values():
    assert picked(tp.parse_args(["--task", "go2-walk", "--backend", "cpu"]), GO2_EXPECTED) == GO2_EXPECTED
    assert picked(tp.parse_args(["--task=go2-walk", "--backend", "cpu"]), GO2_EXPECTED) == GO2_EXPECTED


def test_generic_defaults_are_unchanged():
    assert picked(tp.parse_args(["--backend", "cpu"]), CARTPOLE_EXPECTED) == CARTPOLE_EXPECTED
    args = tp.parse_args(["--task", "franka-reach", "--backend", "cpu"])
    assert args.preset is None and args.num_envs == 64 and args.lr_schedule == "anneal"


def test_command_line_flags_override_the_preset():
    args = tp.parse_args(
        [
            "--num-envs",
            "8",
            "--task",
            "go2-walk",
            "--backend",
            "cpu",
            "--ent-coef",
            "0",
            "--lr-schedule",
            "constant",
            "--hidden-sizes",
            "32",
            "16",
            "--norm-obs",
            "true",
            "--total-timesteps",
            "256",
            "--eval-steps",
            "8",
            "--task-kwargs",
            '{"lin_vel_x_range": [1.0, 1.0], "max_episode_steps": 100}',
        ]
    )
    expected = dict(
        GO2_EXPECTED,
        num_envs=8,
        ent_coef=0.0,
        lr_schedule="constant",
        hidden_sizes=[32, 16],
        norm_obs=True,
        total_timesteps=256,
        eval_steps=8,
        task_kwargs={**GO2_COMMANDS, "lin_vel_x_range": [1.0, 1.0], "max_episode_steps": 100},
    )
    assert picked(args, expected) == expected


def test_presets_are_not_mutated_by_parsing():
    first = tp.parse_args(["--task", "go2-walk", "--backend", "cpu"])
    first.hidden_sizes.append(7)
    first.task_kwargs["lin_vel_x_range"] = (9.0, 9.0)
    again = tp.parse_args(["--task", "go2-walk", "--backend", "cpu"])
    assert again.hidden_sizes == [512, 256, 128] and again.task_kwargs == GO2_COMMANDS
    assert tp.TASK_PRESETS["go2-walk"]["task_kwargs"] == GO2_COMMANDS


def test_lr_schedule_follows_anneal_lr_unless_given():
    assert tp.parse_args(["--backend", "cpu", "--anneal-lr", "false"]).lr_schedule == "constant"
    args = tp.parse_args(["--backend", "cpu", "--lr-schedule", "adaptive"])
    assert (args.lr_schedule, args.anneal_lr) == ("adaptive", False)
    args = tp.parse_args(["--task", "go2-walk", "--backend", "cpu", "--lr-schedule", "anneal"])
    assert (args.lr_schedule, args.anneal_lr) == ("anneal", True)


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--activation", "relu"], "argument --activation: invalid choice: 'relu'"),
        (["--lr-schedule", "cosine"], "argument --lr-schedule: invalid choice: 'cosine'"),
        (["--desired-kl", "0"], "--desired-kl must be > 0, got 0.0"),
        (["--hidden-sizes", "64", "0"], "--hidden-sizes must be positive, got [64, 0]"),
        (["--eval-steps", "-1"], "--eval-steps must be >= 0, got -1"),
        (["--max-train-time", "0"], "--max-train-time must be > 0, got 0.0"),
        (
            ["--task", "go2-walk", "--num-envs", "5", "--num-steps", "3"],
            "num_envs * num_steps (15) must be divisible by num_minibatches (4)",
        ),
    ],
)
def test_bad_options_are_named(argv, message, capsys):
    with pytest.raises(SystemExit) as exit_info:
        tp.parse_args(["--backend", "cpu", *argv])
    assert exit_info.value.code == 2
    assert message in capsys.readouterr().err


# -- learning-rate schedules and the KL ------------------------------------------------------------------------------


def test_adaptive_lr_exact_steps():
    assert tp.adaptive_lr(1e-3, 0.03, 0.01) == 1e-3 / 1.5  # above 2 * desired
    assert tp.adaptive_lr(1e-3, 0.004, 0.01) == 1e-3 * 1.5  # below desired / 2
    assert tp.adaptive_lr(1e-3, 0.02, 0.01) == 1e-3  # the bounds themselves change nothing
    assert tp.adaptive_lr(1e-3, 0.005, 0.01) == 1e-3
    assert tp.adaptive_lr(1e-3, 0.01, 0.01) == 1e-3
    assert tp.adaptive_lr(1e-3, 0.0, 0.01) == 1e-3  # no change of policy (the first minibatch): no increase
    assert tp.adaptive_lr(1e-3, math.nan, 0.01) == 1e-3
    assert tp.adaptive_lr(1.2e-5, 1.0, 0.01) == 1e-5  # clamped to [1e-5, 1e-2]
    assert tp.adaptive_lr(8e-3, 1e-4, 0.01) == 1e-2
    lr = 1e-3
    for kl in (0.05, 0.05, 0.001, 0.01):
        lr = tp.adaptive_lr(lr, kl, 0.01)
    assert lr == 1e-3 / 1.5 / 1.5 * 1.5


def test_annealed_lr_exact_values():
    assert [tp.annealed_lr(1e-3, i, 4) for i in (1, 2, 3, 4)] == [1e-3, 1e-3 * 0.75, 1e-3 * 0.5, 1e-3 * 0.25]


def test_gaussian_kl():
    zeros = torch.zeros(3, 2)
    # old N(0, 1), new N(1, e^0.5): per dim 0.5 + (1 + 1) / (2e) - 0.5 = 1/e
    kl = tp.gaussian_kl(zeros, zeros, torch.ones(3, 2), torch.full((1, 2), 0.5))
    torch.testing.assert_close(kl, torch.full((3,), 2.0 / math.e))
    assert torch.equal(tp.gaussian_kl(zeros, zeros, zeros, zeros), torch.zeros(3))
    generator = torch.Generator().manual_seed(0)
    mean_old, mean_new = torch.randn(5, 4, generator=generator), torch.randn(5, 4, generator=generator)
    log_std_old, log_std_new = torch.randn(1, 4, generator=generator), torch.randn(1, 4, generator=generator)
    reference = torch.distributions.kl_divergence(
        torch.distributions.Normal(mean_old, log_std_old.exp()), torch.distributions.Normal(mean_new, log_std_new.exp())
    ).sum(-1)
    torch.testing.assert_close(tp.gaussian_kl(mean_old, log_std_old, mean_new, log_std_new), reference)


# -- agent, normalizer, checkpoint -----------------------------------------------------------------------------------


def test_agent_layers_and_activation():
    agent = tp.Agent(45, 12, [512, 256, 128], init_log_std=0.0, activation="elu")
    linear = [m for m in agent.actor_mean if isinstance(m, torch.nn.Linear)]
    assert [(m.in_features, m.out_features) for m in linear] == [(45, 512), (512, 256), (256, 128), (128, 12)]
    assert [type(m) for m in agent.critic][1::2] == [torch.nn.ELU, torch.nn.ELU, torch.nn.ELU]
    assert agent.critic[-1].out_features == 1 and agent.hidden_sizes == (512, 256, 128)
    with pytest.raises(ValueError, match=r"activation: expected one of \['elu', 'tanh'\], got 'relu'"):
        tp.Agent(4, 1, 64, activation="relu")
    with pytest.raises(ValueError, match=r"hidden: expected positive int widths, got \[\]"):
        tp.Agent(4, 1, [])


def test_int_hidden_size_builds_the_same_agent_as_before():
    torch.manual_seed(0)
    legacy = tp.Agent(4, 1, 64, 0.0)
    torch.manual_seed(0)
    explicit = tp.Agent(4, 1, [64, 64], 0.0, "tanh")
    assert list(legacy.state_dict()) == [
        "actor_logstd",
        "critic.0.weight",
        "critic.0.bias",
        "critic.2.weight",
        "critic.2.bias",
        "critic.4.weight",
        "critic.4.bias",
        "actor_mean.0.weight",
        "actor_mean.0.bias",
        "actor_mean.2.weight",
        "actor_mean.2.bias",
        "actor_mean.4.weight",
        "actor_mean.4.bias",
    ]
    assert all(
        torch.equal(a, b) for a, b in zip(legacy.state_dict().values(), explicit.state_dict().values(), strict=True)
    )
    assert isinstance(legacy.critic[1], torch.nn.Tanh)


def test_disabled_obs_normalizer_is_the_identity():
    norm = tp.ObsNormalizer((3,), torch.device("cpu"), enabled=False)
    obs = torch.tensor([[100.0, -50.0, 0.5]], dtype=torch.float64)
    norm.update(obs)
    assert norm.count.item() == pytest.approx(1e-4)
    out = norm.normalize(obs)
    assert out.dtype == torch.float32 and torch.equal(out, obs.to(torch.float32))


def test_checkpoint_round_trip_with_a_preset(tmp_path):
    args = tp.parse_args(["--task", "go2-walk", "--backend", "cpu"])
    agent = tp.Agent(45, 12, args.hidden_sizes, args.init_log_std, args.activation)
    norm = tp.ObsNormalizer((45,), torch.device("cpu"), enabled=args.norm_obs)
    path = tmp_path / tp.CHECKPOINT_NAME
    torch.save(
        {
            "agent": agent.state_dict(),
            "obs_normalizer": norm.state_dict(),
            "obs_clip": norm.clip,
            "obs_norm": norm.enabled,
            "args": vars(args),
            "obs_shape": (45,),
            "act_shape": (12,),
        },
        path,
    )
    loaded, loaded_norm = tp.load_checkpoint(path)
    assert loaded.hidden_sizes == (512, 256, 128) and isinstance(loaded.actor_mean[1], torch.nn.ELU)
    assert all(
        torch.equal(a, b) for a, b in zip(agent.state_dict().values(), loaded.state_dict().values(), strict=True)
    )
    assert not loaded_norm.enabled
    # a checkpoint without the new fields (older train_ppo, or ddp_ppo.py) loads as before
    legacy_args = {"hidden_size": 64, "hidden_sizes": None}
    legacy = tp.Agent(4, 1, 64)
    torch.save(
        {
            "agent": legacy.state_dict(),
            "obs_normalizer": tp.ObsNormalizer((4,), "cpu").state_dict(),
            "obs_clip": 10.0,
            "args": legacy_args,
            "obs_shape": (4,),
            "act_shape": (1,),
        },
        path,
    )
    loaded, loaded_norm = tp.load_checkpoint(path)
    assert loaded.hidden_sizes == (64, 64) and isinstance(loaded.critic[1], torch.nn.Tanh) and loaded_norm.enabled


# -- task metrics and the summary ------------------------------------------------------------------------------------


def fake_envs(results, counts):
    calls = []

    def call(name, *args, **kwargs):
        calls.append((name, args, kwargs))
        return tuple(results)

    env = SimpleNamespace(call=call, env_ranges=[SimpleNamespace(count=c) for c in counts])
    return SimpleNamespace(unwrapped=env), calls


def test_task_metrics_are_weighted_by_worker_env_counts():
    envs, calls = fake_envs([{"a": 1.0, "b": -2.0}, {"a": 5.0, "b": 2.0}], [3, 1])
    assert tp.task_metrics(envs) == {"a": 2.0, "b": -1.0}
    assert calls == [("metrics", (), {})]
    envs, _ = fake_envs([{}, {}], [2, 2])
    assert tp.task_metrics(envs) == {}
    envs, _ = fake_envs([{"a": 1.0}], [2, 2])
    with pytest.raises(RuntimeError, match=r"metrics: expected one result per worker \(2\), got 1"):
        tp.task_metrics(envs)


def test_summary_line():
    evaluation = {
        "steps": 250,
        "num_envs": 4096,
        "last_half_from_step": 126,
        "terminated": 3,
        "task_metrics_last_half": {
            "forward_vel": 0.4912,
            "lateral_vel": -0.011,
            "yaw_rate": 0.02,
            "command_forward_vel": 0.5,
            "tracking_error": 0.061,
            "base_height": 0.297,
        },
    }
    assert tp.summary_line("go2-walk", evaluation, 18.25, -0.71) == (
        "go2-walk: forward velocity 0.49 m/s (command 0.50), lateral velocity -0.01 m/s, yaw rate 0.02 rad/s, "
        "tracking error 0.06 m/s, base height 0.30 m, 3 terminations in the 250-step deterministic evaluation x "
        "4096 envs (metrics: mean over its last 125 steps), training return 18.25 (random policy -0.71)"
    )
    assert tp.summary_line("cartpole", None, 480.0, 22.5) == "cartpole: training return 480.00 (random policy 22.50)"


def test_no_finished_episode_prints_no_nan_and_writes_valid_json():
    nan = float("nan")
    assert tp.summary_line("cartpole", None, nan, 22.5) == (
        "cartpole: training return n/a (no episode finished) (random policy 22.50)"
    )
    assert tp._fmt_return(nan, "7.2f", "    n/a") == "    n/a"
    assert tp._fmt_return(-1.005, "7.2f") == "  -1.00"
    metrics = {"final_return": nan, "history": [{"mean_return": nan, "ev": float("inf")}, {"mean_return": 1.5}], "n": 3}
    ready = tp._json_ready(metrics)
    assert ready == {"final_return": None, "history": [{"mean_return": None, "ev": None}, {"mean_return": 1.5}], "n": 3}
    assert json.loads(json.dumps(ready, allow_nan=False)) == ready


def test_resolve_derived_completes_a_plain_parser_namespace():
    args = tp.build_parser().parse_args(["--anneal-lr", "false", "--hidden-size", "32"])
    assert (args.lr_schedule, args.hidden_sizes, args.out_dir) == (None, None, None)
    tp.resolve_derived(args)
    assert (args.preset, args.lr_schedule, args.anneal_lr, args.hidden_sizes) == (None, "constant", False, [32, 32])
    assert args.out_dir == "runs/cartpole-1" and args.backend in ("cpu", "gpu")
    before = dict(vars(args))
    assert vars(tp.resolve_derived(args)) == before  # idempotent
