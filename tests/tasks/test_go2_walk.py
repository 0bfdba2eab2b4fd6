"""go2-walk on the CPU backend: one in-process env for the module, with every randomization switched on (so that
the batched-info scene is the one compiled) and checked against constructed states; last, a two-iteration smoke run
of ``examples/train_ppo.py`` on an env of the same size and settings, in this process (same kernels, a few
seconds)."""

from __future__ import annotations

import dataclasses
import json
import math
import runpy
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from gs_gym import GenesisVectorEnv
from gs_gym.tasks.go2_walk import OBS_DIM, roll_pitch, rotate_inverse, tilted_beyond
from tests.equivalence.test_output_ownership import assert_outputs_belong_to_the_caller

NUM_ENVS = 4
RANDOMIZATION = {
    "friction_range": (0.5, 1.5),
    "added_mass_range": (-1.0, 3.0),
    "kp_scale_range": (0.8, 1.2),
    "kv_scale_range": (0.8, 1.2),
    "obs_noise_scale": 1.0,
    "push_interval_s": 0.1,  # every 5 control steps
    "push_velocity": 0.5,
}


@pytest.fixture(scope="module")
def env():
    env = GenesisVectorEnv(
        NUM_ENVS, "go2-walk", backend="cpu", num_workers=0, seed=0, task_kwargs={"randomization": RANDOMIZATION}
    )
    yield env
    env.close()


@pytest.fixture
def task(env):
    env.reset(seed=0)
    return env.local_task


def quat_about(axis: str, angle: float) -> list[float]:
    half = angle / 2
    vector = {"x": [1, 0, 0], "y": [0, 1, 0], "z": [0, 0, 1]}[axis]
    return [math.cos(half)] + [math.sin(half) * v for v in vector]


def set_state(task, *, height=None, quat=None, dof_offset=None, base_vel=None):
    """Put every env at the default stance (unless overridden), at rest, with zero commands and actions, and read
    that state back into the task (as the shard does before the output hooks)."""
    robot, n = task.robot, task.num_envs
    pos = task.base_init_pos.expand(n, -1).clone()
    pos[:, 2] = task.config.base_height_target if height is None else torch.as_tensor(height)
    robot.set_pos(pos, zero_velocity=True)
    quat = torch.tensor([1.0, 0, 0, 0]).expand(n, -1) if quat is None else torch.as_tensor(quat)
    robot.set_quat(quat, zero_velocity=True)
    dof_pos = task.default_dof_pos.expand(n, -1).clone()
    if dof_offset is not None:
        dof_pos += torch.as_tensor(dof_offset, dtype=torch.float32)
    robot.set_dofs_position(dof_pos, task.dofs, zero_velocity=True)
    robot.zero_all_dofs_velocity()
    if base_vel is not None:
        robot.set_dofs_velocity(torch.as_tensor(base_vel, dtype=torch.float32), [0, 1, 2, 3, 4, 5])
    task.commands.zero_()
    task.actions.zero_()
    task.last_actions.zero_()
    task.read_state()


def test_outputs_are_fresh_tensors_the_task_does_not_read_again(env):
    """go2-walk declares ``fresh_outputs``: in process the env hands its tensors out without a clone."""
    assert env.local_task.outputs_are_fresh()
    actions = torch.linspace(-1.0, 1.0, NUM_ENVS * 12).reshape(NUM_ENVS, 12)
    assert_outputs_belong_to_the_caller(env, actions, steps=6)


def test_the_state_the_output_hooks_read_keeps_its_storage(env, task):
    """What ``observe``, ``compute_rewards`` and ``compute_terminated`` read is written in place, never replaced, so
    that a CUDA graph of them (``Task.capturable``) reads each step's values: through steps, resets and
    ``read_reset_state``, every such tensor keeps its storage, offset and strides."""

    def layout():
        state = task.state
        tensors = {
            "actions": task.actions,
            "last_actions": task.last_actions,
            "commands": task.commands,
            "obs_noise": task.randomizer.obs_noise,
            **{field.name: getattr(state, field.name) for field in dataclasses.fields(state)},
        }
        return {name: (tensor.data_ptr(), tensor.stride(), tensor.shape) for name, tensor in tensors.items()}

    generator = torch.Generator().manual_seed(5)
    env.step(torch.rand(NUM_ENVS, 12, generator=generator) * 2 - 1)
    before = layout()
    for step in range(6):
        env.step(torch.rand(NUM_ENVS, 12, generator=generator) * 2 - 1)
        mask = torch.tensor([step % 2 == 0, True, False, step == 3])
        task.reset_envs(mask)
        task.read_reset_state(mask)
        assert layout() == before, step
    assert len(before) == 11


def test_quaternion_helpers():
    quat = torch.tensor([quat_about("z", math.pi / 2), quat_about("x", 0.3), quat_about("y", -0.2)])
    rotated = rotate_inverse(quat, torch.tensor([[1.0, 0, 0], [0, 0, -1.0], [0, 0, -1.0]]))
    expected = [[0, -1, 0], [0, -math.sin(0.3), -math.cos(0.3)], [-math.sin(0.2), 0, -math.cos(0.2)]]
    torch.testing.assert_close(rotated, torch.tensor(expected), atol=1e-6, rtol=0)
    roll, pitch = roll_pitch(quat)
    torch.testing.assert_close(roll, torch.tensor([0.0, 0.3, 0.0]), atol=1e-6, rtol=0)
    torch.testing.assert_close(pitch, torch.tensor([0.0, 0.0, -0.2]), atol=1e-6, rtol=0)


def quat_product(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    aw, ax, ay, az = a.unbind(-1)
    bw, bx, by, bz = b.unbind(-1)
    return torch.stack(
        [
            aw * bw - ax * bx - ay * by - az * bz,
            aw * bx + ax * bw + ay * bz - az * by,
            aw * by - ax * bz + ay * bw + az * bx,
            aw * bz + ax * by - ay * bx + az * bw,
        ],
        dim=-1,
    )


def test_tilt_limits_read_from_gravity_agree_with_roll_and_pitch():
    """``tilted_beyond`` (what ``compute_terminated`` returns) against the angles of ``roll_pitch``: on 4000 small
    tilts (z-y-x Euler angles, roll and pitch within 0.5 rad, any yaw) and 4000 orientations of every kind, for limits
    small and large, except within 1e-4 rad of a limit, where float rounding may go either way."""
    generator = torch.Generator().manual_seed(0)
    n = 4000
    roll, pitch, yaw = (torch.rand(3, n, generator=generator) * 2 - 1) * torch.tensor([[0.5], [0.5], [math.pi]])
    half = torch.stack([roll, pitch, yaw]) / 2
    zero = torch.zeros(n)
    about_x = torch.stack([half[0].cos(), half[0].sin(), zero, zero], dim=1)
    about_y = torch.stack([half[1].cos(), zero, half[1].sin(), zero], dim=1)
    about_z = torch.stack([half[2].cos(), zero, zero, half[2].sin()], dim=1)
    small_tilts = quat_product(quat_product(about_z, about_y), about_x)
    torch.testing.assert_close(torch.stack(roll_pitch(small_tilts)), torch.stack([roll, pitch]), atol=1e-5, rtol=0)
    anything = torch.randn(n, 4, generator=generator)
    quat = torch.cat([small_tilts, anything / anything.norm(dim=1, keepdim=True)])
    gravity = rotate_inverse(quat, torch.tensor([0.0, 0.0, -1.0]).expand(2 * n, 3))
    roll, pitch = (angle.abs() for angle in roll_pitch(quat))
    for max_roll, max_pitch in [(math.radians(10), math.radians(10)), (0.3, 1.2), (2.5, 0.05), (0.0, 0.0)]:
        expected = (roll > max_roll) | (pitch > max_pitch)
        clear = ((roll - max_roll).abs() > 1e-4) & ((pitch - max_pitch).abs() > 1e-4)
        assert clear.sum() > 0.99 * 2 * n
        assert expected[clear].any() and (max_roll == 0.0 or not expected[clear].all())  # both outcomes tested
        assert torch.equal(tilted_beyond(gravity, max_roll, max_pitch)[clear], expected[clear])
    # a limit that cannot be passed adds no test; none at all: None (the task returns zeros)
    pitch_only = tilted_beyond(gravity, math.pi, 0.2)
    clear = (pitch - 0.2).abs() > 1e-4
    assert torch.equal(pitch_only[clear], (pitch > 0.2)[clear])
    roll_only = tilted_beyond(gravity, 0.2, math.inf)
    clear = (roll - 0.2).abs() > 1e-4
    assert torch.equal(roll_only[clear], (roll > 0.2)[clear])
    assert tilted_beyond(gravity, math.pi, math.pi / 2) is None
    assert tilted_beyond(gravity, math.inf, math.inf) is None


def test_spaces_and_first_observation(env, task):
    config = task.config
    assert env.single_observation_space.shape == (OBS_DIM,) == (45,)
    assert env.single_action_space.shape == (12,)
    assert np.all(env.single_observation_space.low == -config.obs_clip)
    assert np.all(env.single_action_space.high == config.action_clip)
    obs, _ = env.reset(seed=5)
    assert obs.shape == (NUM_ENVS, 45) and obs.dtype == torch.float32
    clean = obs - task.randomizer.obs_noise
    zeros = torch.zeros(NUM_ENVS, 3)
    torch.testing.assert_close(clean[:, 0:3], zeros, atol=1e-5, rtol=0)  # at rest
    torch.testing.assert_close(clean[:, 3:6], torch.tensor([[0.0, 0, -1]]).expand(NUM_ENVS, -1), atol=1e-5, rtol=0)
    torch.testing.assert_close(clean[:, 6:9], task.commands * task.command_obs_scale)
    torch.testing.assert_close(clean[:, 9:33], torch.zeros(NUM_ENVS, 24), atol=1e-5, rtol=0)  # default pose, at rest
    assert torch.all(obs[:, 33:45] == 0.0)  # no action yet, and actions carry no noise
    assert torch.all(task.randomizer.obs_noise[:, 6:9] == 0.0)  # commands carry no noise
    assert torch.all(task.randomizer.obs_noise[:, 0:6] != 0.0)
    low, high = task.command_low, task.command_high
    assert torch.all((task.commands >= low) & (task.commands <= high))
    assert len(set(map(tuple, task.commands.tolist()))) == NUM_ENVS


def test_steps_stay_in_bounds_and_noise_is_fresh_each_step(env, task):
    space = env.single_action_space
    space.seed(0)
    noise = task.randomizer.obs_noise.clone()
    for _ in range(6):
        actions = torch.as_tensor(np.stack([space.sample() for _ in range(NUM_ENVS)]) * 0.1)
        obs, rewards, terminated, truncated, _ = env.step(actions)
        assert obs.shape == (NUM_ENVS, 45) and torch.isfinite(obs).all()
        assert torch.all(obs.abs() <= task.config.obs_clip)
        assert rewards.shape == (NUM_ENVS,) and rewards.dtype == torch.float32 and torch.isfinite(rewards).all()
        assert terminated.dtype == torch.bool and truncated.dtype == torch.bool
        assert not torch.equal(task.randomizer.obs_noise, noise)
        noise = task.randomizer.obs_noise.clone()
    torch.testing.assert_close(obs[:, 33:45], actions.to(torch.float32))  # last action


def test_upside_down_or_tilted_bases_terminate(task):
    quats = [
        quat_about("x", math.pi),  # upside down
        quat_about("y", math.radians(20)),  # pitched beyond 10 degrees
        quat_about("x", math.radians(5)),  # rolled within the limit
        quat_about("z", 2.0),  # yawed only
    ]
    set_state(task, height=0.5, quat=quats)
    assert task.compute_terminated().tolist() == [True, True, False, False]
    set_state(task)
    assert not task.compute_terminated().any()


def test_standing_still_at_the_default_pose_earns_the_most(task):
    config, dt = task.config, task.config.dt
    assert config.tracking_sigma == 0.25
    best = (config.reward_tracking_lin_vel + config.reward_tracking_ang_vel) * dt
    offsets = torch.zeros(NUM_ENVS, 12)
    offsets[1] = 0.3  # perturbed pose
    base_vel = torch.zeros(NUM_ENVS, 6)
    base_vel[3, 2] = 1.0  # bouncing up at 1 m/s
    set_state(task, dof_offset=offsets, base_vel=base_vel)
    task.commands[2, 0] = 1.0  # commanded forward, standing still
    rewards = task.compute_rewards()
    expected = torch.tensor(
        [
            best,
            best + config.reward_similar_to_default * 12 * 0.3 * dt,
            (config.reward_tracking_lin_vel * math.exp(-4.0) + config.reward_tracking_ang_vel) * dt,  # |1 - 0|^2 / 0.25
            best + config.reward_lin_vel_z * 1.0 * dt,
        ]
    )
    torch.testing.assert_close(rewards, expected, atol=1e-5, rtol=0)
    assert rewards[0] == pytest.approx(best, abs=1e-6)
    assert torch.all(rewards[1:] < rewards[0])


def test_height_error_and_action_rate_are_penalized(task):
    config, dt = task.config, task.config.dt
    best = (config.reward_tracking_lin_vel + config.reward_tracking_ang_vel) * dt
    set_state(task, height=[0.3, 0.2, 0.3, 0.3])
    task.actions[2] = 1.0
    task.last_actions[3] = 0.5
    rewards = task.compute_rewards()
    expected = torch.tensor(
        [
            best,
            best + config.reward_base_height * 0.01 * dt,
            best + config.reward_action_rate * 12.0 * dt,
            best + config.reward_action_rate * 12 * 0.25 * dt,
        ]
    )
    torch.testing.assert_close(rewards, expected, atol=1e-5, rtol=0)


def randomized_state(task):
    robot, base = task.robot, task.randomizer.mass_link_idx
    return {
        "friction": task.randomizer.read_friction_ratio(),
        "mass": robot.get_links_mass([base]).reshape(NUM_ENVS),
        "kp": robot.get_dofs_kp(task.dofs),
        "kv": robot.get_dofs_kv(task.dofs),
        "commands": task.commands.clone(),
    }


def test_randomization_is_applied_to_reset_envs_only(env, task):
    randomizer = task.randomizer
    before = randomized_state(task)
    # Genesis holds what the randomizer drew, env by env.
    assert torch.equal(before["friction"], randomizer.friction.unsqueeze(1).expand_as(before["friction"]))
    torch.testing.assert_close(before["mass"], randomizer.nominal_mass + randomizer.added_mass)
    torch.testing.assert_close(before["kp"], randomizer.kp)
    torch.testing.assert_close(before["kv"], randomizer.kv)
    assert torch.all((randomizer.friction >= 0.5) & (randomizer.friction <= 1.5))
    assert torch.all((randomizer.added_mass >= -1.0) & (randomizer.added_mass <= 3.0))
    scale = randomizer.kp / randomizer.nominal_kp
    assert torch.all((scale >= 0.8 - 1e-6) & (scale <= 1.2 + 1e-6))
    assert len(set(randomizer.friction.tolist())) == NUM_ENVS

    mask = np.array([False, True, False, True])
    env.reset(options={"reset_mask": mask})
    after = randomized_state(task)
    kept, redrawn = torch.from_numpy(~mask), torch.from_numpy(mask)
    for name, value in after.items():
        assert torch.equal(value[kept], before[name][kept]), name
        assert not torch.any(value[redrawn] == before[name][redrawn]), name


def test_randomization_draws_depend_on_the_seed_only(env, task):
    first = randomized_state(task)
    env.reset(seed=0)
    assert all(torch.equal(value, first[name]) for name, value in randomized_state(task).items())
    env.reset(seed=1)
    assert not torch.equal(randomized_state(task)["friction"], first["friction"])


def test_pushes_kick_due_envs_only(task):
    set_state(task)
    steps = torch.tensor([5, 3, 10, 0])
    pushed = task.randomizer.push(steps)
    assert pushed.tolist() == [True, False, True, False]
    velocity = task.robot.get_dofs_velocity([0, 1, 2])
    assert torch.all(velocity[[1, 3]] == 0.0)
    assert torch.all(velocity[[0, 2], :2] != 0.0) and torch.all(velocity[[0, 2], :2].abs() <= 0.5)
    assert torch.all(velocity[:, 2] == 0.0)


def test_reset_state_is_what_genesis_reads_back(env, task):
    """Under SAME_STEP the new episodes' observations come from ``read_reset_state``, which writes the reset envs'
    state from what ``reset_envs`` set instead of asking Genesis: it must equal ``read_state`` to the bit, joint noise
    and the randomizer's draws included, and keep the other envs' rows."""
    generator = torch.Generator().manual_seed(3)
    for _ in range(4):  # moving robots: no velocity or angle is zero by chance
        env.step(torch.rand(NUM_ENVS, 12, generator=generator) * 2 - 1)
    config = task.config
    task.config = dataclasses.replace(config, reset_joint_noise=0.1)
    try:
        mask = torch.tensor([False, True, False, True])
        task.reset_envs(mask)
        task.read_reset_state(mask)
    finally:
        task.config = config
    written, commands = dataclasses.asdict(task.state), task.commands.clone()
    task.read_state()
    read = dataclasses.asdict(task.state)
    for name, value in written.items():
        assert torch.equal(value, read[name]), name
    assert torch.equal(task.commands, commands)
    assert torch.all(read["dof_vel"][~mask].abs().sum(dim=1) > 0) and not read["dof_vel"][mask].any()
    assert not torch.equal(read["dof_pos"][mask], task.default_dof_pos.expand(2, -1))  # the noise was applied


def test_commands_are_resampled_on_schedule(task):
    set_state(task)
    task.commands[:] = 7.0  # outside every range
    task.episode_steps[:] = torch.tensor([task.resampling_steps, 1, 2 * task.resampling_steps, 0])
    task.simulate()
    assert task.commands_due.tolist() == [True, False, True, False]
    task.read_state()  # draws the due commands, before any hook reads them
    assert task.commands[[1, 3]].eq(7.0).all()
    assert not task.commands_due.any()
    redrawn = task.commands[[0, 2]]
    assert torch.all((redrawn >= task.command_low) & (redrawn <= task.command_high))


def test_metrics_average_velocities_command_error_and_height(task):
    base_vel = torch.zeros(NUM_ENVS, 6)
    base_vel[0, 0] = 0.5  # tracking the command
    base_vel[1, :2] = torch.tensor([0.3, 0.4])  # error (0.2, -0.4)
    base_vel[2, 5] = 1.0  # turning in place
    set_state(task, height=[0.3, 0.2, 0.3, 0.3], base_vel=base_vel)
    task.commands[:, 0] = 0.5
    metrics = task.metrics()
    assert list(metrics) == [
        "forward_vel",
        "lateral_vel",
        "yaw_rate",
        "command_forward_vel",
        "tracking_error",
        "base_height",
    ]
    assert all(type(value) is float for value in metrics.values())
    expected = {
        "forward_vel": (0.5 + 0.3) / 4,
        "lateral_vel": 0.4 / 4,
        "yaw_rate": 1.0 / 4,
        "command_forward_vel": 0.5,
        "tracking_error": (0.0 + math.sqrt(0.2**2 + 0.4**2) + 0.5 + 0.5) / 4,
        "base_height": (0.3 + 0.2 + 0.3 + 0.3) / 4,
    }
    for name, value in expected.items():
        assert metrics[name] == pytest.approx(value, abs=1e-5), name
    assert task.metrics() == metrics  # reading the metrics changes nothing


def test_train_ppo_smoke_run_with_the_go2_preset(tmp_path, monkeypatch, capsys):
    """Two PPO iterations of ``examples/train_ppo.py --task go2-walk`` (its preset), through its command line, on this
    module's scene (4 envs, same randomization): the plumbing of the preset and of the task metrics (the evaluation
    is ``examples/play.py``'s, tested on cart-pole). The script runs in this process (``runpy``, its arguments in
    ``sys.argv``), where the module's env has compiled go2-walk's kernels: quadrants writes them to the kernel cache
    only at exit, so a subprocess would compile them again (190 s of a cold run on 2 cores)."""
    example = Path(__file__).resolve().parents[2] / "examples" / "train_ppo.py"
    argv = ["--task", "go2-walk", "--backend", "cpu", "--num-envs", str(NUM_ENVS), "--num-workers", "0"]
    argv += ["--num-steps", "8", "--total-timesteps", str(2 * NUM_ENVS * 8)]
    argv += ["--task-kwargs", json.dumps({"randomization": RANDOMIZATION}), "--seed", "0", "--out-dir", str(tmp_path)]
    monkeypatch.setattr(sys, "argv", [str(example), *argv])
    threads = torch.get_num_threads()
    try:
        runpy.run_path(str(example), run_name="__main__")
    finally:
        torch.set_num_threads(threads)  # the script sets its own (--torch-threads)
    stdout = capsys.readouterr().out

    result = json.loads((tmp_path / "metrics.json").read_text())
    assert result["complete"] and result["args"]["preset"] == "go2-walk" and result["args"]["activation"] == "elu"
    assert result["args"]["task_kwargs"]["lin_vel_x_range"] == [0.5, 0.5]
    assert result["global_step"] == 2 * NUM_ENVS * 8 and result["iterations"] == 2
    names = ["forward_vel", "lateral_vel", "yaw_rate", "command_forward_vel", "tracking_error", "base_height"]
    assert [list(h["task_metrics"]) for h in result["history"]] == [names, names]
    assert all(h["task_metrics"]["command_forward_vel"] == pytest.approx(0.5) for h in result["history"])
    assert 1e-5 <= result["final_lr"] <= 1e-2
    assert (
        result["summary"].startswith("go2-walk: training return ")
        and ", command_forward_vel 0.500" in result["summary"]
    )
    assert stdout.splitlines()[-1] == result["summary"]
    checkpoint = torch.load(tmp_path / "checkpoint.pt", map_location="cpu", weights_only=False)
    assert checkpoint["network"] == {"hidden_sizes": [512, 256, 128], "activation": "elu"}
    assert checkpoint["obs_rms"] is None and checkpoint["obs_dim"] == OBS_DIM
