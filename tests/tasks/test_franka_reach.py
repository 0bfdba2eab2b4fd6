"""franka-reach on the CPU backend: one in-process env (default config, randomization off) for the module."""

from __future__ import annotations

import copy
import dataclasses
import functools

import numpy as np
import pytest
import torch

from gs_gym import GenesisVectorEnv
from tests.equivalence.test_output_ownership import assert_outputs_belong_to_the_caller

NUM_ENVS = 3


@pytest.fixture(scope="module")
def env():
    env = GenesisVectorEnv(NUM_ENVS, "franka-reach", backend="cpu", num_workers=0, seed=0)
    yield env
    env.close()


@pytest.fixture
def task(env):
    env.reset(seed=0)
    return env.local_task


def test_outputs_are_fresh_tensors_the_task_does_not_read_again(env):
    """franka-reach declares ``fresh_outputs``: in process the env hands its tensors out without a clone."""
    assert env.local_task.outputs_are_fresh()
    actions = torch.linspace(-1.0, 1.0, NUM_ENVS * 7).reshape(NUM_ENVS, 7)
    assert_outputs_belong_to_the_caller(env, actions, steps=6)


def test_the_state_the_output_hooks_read_keeps_its_storage(env, task):
    """franka-reach declares ``capturable``: what its output hooks read keeps its storage, offset and strides through
    steps and masked resets, so that a CUDA graph of the hooks reads each step's values."""

    def layout():
        tensors = {name: getattr(task, name) for name in ("arm_pos", "arm_vel", "hand_pos", "targets")}
        return {name: (tensor.data_ptr(), tensor.stride(), tensor.shape) for name, tensor in tensors.items()}

    assert env.local_task.outputs_are_capturable()
    generator = torch.Generator().manual_seed(5)
    env.step(torch.rand(NUM_ENVS, 7, generator=generator) * 2 - 1)
    before = layout()
    for step in range(4):
        env.step(torch.rand(NUM_ENVS, 7, generator=generator) * 2 - 1)
        task.reset_envs(torch.tensor([step % 2 == 0, True, False]))
        task.read_state()
        assert layout() == before, step


def test_spaces_and_observation_layout(env, task):
    assert env.single_observation_space.shape == (20,)
    assert env.single_action_space.shape == (7,)
    assert np.all(env.single_action_space.low == -1.0) and np.all(env.single_action_space.high == 1.0)
    obs, _ = env.reset(seed=3)
    assert obs.shape == (NUM_ENVS, 20) and obs.dtype == torch.float32
    config = task.config
    home = torch.tensor(config.home_qpos)
    assert torch.all((obs[:, :7] - home).abs() <= config.reset_joint_noise + 1e-5)
    assert torch.all(obs[:, 7:14] == 0.0)
    torch.testing.assert_close(obs[:, 14:17], task.ee_pos())
    assert torch.equal(obs[:, 17:20], task.targets)
    assert torch.all(task.targets >= torch.tensor(config.target_low))
    assert torch.all(task.targets <= torch.tensor(config.target_high))
    assert len(set(map(tuple, task.targets.tolist()))) == NUM_ENVS  # one target per env


def test_reset_is_deterministic_per_seed(env, task):
    first, _ = env.reset(seed=11)
    second, _ = env.reset(seed=11)
    other, _ = env.reset(seed=12)
    assert torch.equal(first, second)
    assert not torch.equal(first[:, 17:], other[:, 17:])


def test_actions_move_the_joint_targets_and_the_arm_follows(env, task):
    task.targets[:, 2] += 10.0  # out of reach: no success (hence no autoreset) during the test
    start = task.joint_targets.clone()
    action = torch.zeros(NUM_ENVS, 7)
    action[:, 0] = 1.0
    action[1, 0] = 5.0  # clipped to 1
    for _ in range(5):
        obs, rewards, terminated, _, _ = env.step(action)
        assert obs.shape == (NUM_ENVS, 20) and rewards.shape == (NUM_ENVS,)
        assert rewards.dtype == torch.float32 and terminated.dtype == torch.bool
    expected = start.clone()
    expected[:, 0] += 5 * task.config.action_scale
    torch.testing.assert_close(task.joint_targets, expected)
    for _ in range(20):
        obs, *_ = env.step(torch.zeros(NUM_ENVS, 7))
    torch.testing.assert_close(obs[:, :7], expected, atol=0.02, rtol=0)


def test_hand_at_the_target_earns_the_bonus_and_terminates(task):
    config = task.config
    ee = task.ee_pos()
    task.targets[:] = ee
    task.targets[1, 0] += 0.1  # 10 cm away: dense reward only
    task.targets[2, 2] += 0.03  # inside the success radius
    rewards = task.compute_rewards()
    torch.testing.assert_close(
        rewards, torch.tensor([config.success_bonus, -0.1, config.success_bonus - 0.03]), atol=1e-5, rtol=0
    )
    assert rewards[0] == config.success_bonus  # exactly at the target
    assert task.compute_terminated().tolist() == [True, False, True]
    assert task.compute_truncated() is None  # no truncation but the time limit
    task.config = dataclasses.replace(config, terminate_on_success=False)
    try:
        assert task.compute_terminated().tolist() == [False, False, False]
    finally:
        task.config = config


def test_success_ends_the_episode_through_the_env(env, task):
    task.targets[:] = task.ee_pos()
    task.targets[1:, 0] += 0.5
    _, rewards, terminated, _, _ = env.step(torch.zeros(NUM_ENVS, 7))
    assert terminated.tolist() == [True, False, False]
    assert rewards[0] > task.config.success_bonus - task.config.success_threshold
    obs, rewards, terminated, _, _ = env.step(torch.zeros(NUM_ENVS, 7))  # autoreset (next-step mode)
    assert rewards[0] == 0.0 and not terminated[0]
    assert torch.linalg.vector_norm(obs[0, 17:20] - obs[0, 14:17]) > 0.0


def test_metrics_average_distance_and_success(task):
    task.targets[:] = task.ee_pos()
    task.targets[1, 0] += 0.1  # 10 cm away
    task.targets[2, 2] += 0.03  # inside the success radius
    metrics = task.metrics()
    assert list(metrics) == ["distance", "success_rate"]
    assert metrics["distance"] == pytest.approx((0.0 + 0.1 + 0.03) / 3, abs=1e-6)
    assert metrics["success_rate"] == pytest.approx(2 / 3)


# -- resets by mask and the cost of a step ---------------------------------------------------------------------------


def move_the_arm(env, task, steps=3):
    """Leave every env mid-motion (nonzero velocities, targets moved), with no episode ending."""
    task.targets[:, 2] += 10.0  # out of reach: no success, hence no autoreset
    action = torch.tensor([[1.0, -1.0, 1.0, -1.0, 1.0, -1.0, 1.0]]).expand(NUM_ENVS, -1)
    for _ in range(steps):
        env.step(action)


def snapshot(task):
    """Per-env state that a reset may change: Genesis' qpos and velocities, the task's targets, the random stream."""
    return {
        "qpos": task.robot.get_qpos(),
        "velocity": task.robot.get_dofs_velocity(),
        "targets": task.targets.clone(),
        "joint_targets": task.joint_targets.clone(),
        "random": copy.deepcopy(task.random),
    }


def next_draws(random):
    """The next numbers of every env's stream (drawn from a copy: the stream itself does not advance)."""
    return copy.deepcopy(random).uniform(torch.ones(NUM_ENVS, dtype=torch.bool), (4,))


def test_a_reset_of_no_env_changes_nothing(env, task):
    move_the_arm(env, task)
    before = snapshot(task)
    assert torch.all(before["velocity"][:, :7].abs().sum(dim=1) > 0.0)
    task.reset_envs(torch.zeros(NUM_ENVS, dtype=torch.bool))
    after = snapshot(task)
    for name in ("qpos", "velocity", "targets", "joint_targets"):
        assert torch.equal(after[name], before[name]), name
    assert torch.equal(next_draws(after["random"]), next_draws(before["random"]))


def test_a_reset_by_mask_changes_only_the_masked_envs(env, task):
    config = task.config
    move_the_arm(env, task)
    before = snapshot(task)
    mask = torch.tensor([False, True, False])
    task.reset_envs(mask)
    after = snapshot(task)
    kept, redrawn = ~mask, mask
    for name in ("qpos", "velocity", "targets", "joint_targets"):
        assert torch.equal(after[name][kept], before[name][kept]), name
        assert not torch.equal(after[name][redrawn], before[name][redrawn]), name
    draws_before, draws_after = next_draws(before["random"]), next_draws(after["random"])
    assert torch.equal(draws_after[kept], draws_before[kept])  # the kept envs' streams did not advance
    assert not torch.any(draws_after[redrawn] == draws_before[redrawn])

    qpos = after["qpos"][redrawn]
    home = torch.tensor(config.home_qpos)
    assert torch.all((qpos[:, :7] - home).abs() <= config.reset_joint_noise + 1e-5)
    assert torch.all(qpos[:, 7:] == config.finger_opening)
    assert torch.all(after["velocity"][redrawn] == 0.0)
    assert torch.equal(after["joint_targets"][redrawn], qpos[:, :7])
    targets = after["targets"][redrawn]
    assert torch.all((targets >= torch.tensor(config.target_low)) & (targets <= torch.tensor(config.target_high)))
    # The cached state follows once read_state runs, as the shard does after every reset.
    task.read_state()
    obs = task.observe()
    torch.testing.assert_close(obs[redrawn, :7], qpos[:, :7], atol=1e-6, rtol=0)
    assert torch.all(obs[redrawn, 7:14] == 0.0)
    assert torch.equal(obs[redrawn, 17:20], targets)


class GenesisCalls:
    """Counts the calls made into Genesis objects (methods named set_*, get_*, control_*, zero_*, step) from outside
    Genesis: calls that Genesis makes into its own objects while serving one are not counted again."""

    PREFIXES = ("set_", "get_", "control_", "zero_", "step")

    def __init__(self, *objects):
        self.calls: list[str] = []
        self._depth = 0
        self._patched = []
        for obj in objects:
            for name in dir(type(obj)):
                if name.startswith(self.PREFIXES) and callable(getattr(type(obj), name, None)):
                    setattr(obj, name, self._counted(f"{type(obj).__name__}.{name}", getattr(obj, name)))
                    self._patched.append((obj, name))

    def _counted(self, label, method):
        @functools.wraps(method)
        def counted(*args, **kwargs):
            if self._depth == 0:
                self.calls.append(label)
            self._depth += 1
            try:
                return method(*args, **kwargs)
            finally:
                self._depth -= 1

        return counted

    def take(self) -> list[str]:
        calls, self.calls = self.calls, []
        return calls

    def restore(self) -> None:
        for obj, name in self._patched:
            delattr(obj, name)


@pytest.fixture
def genesis_calls(task):
    calls = GenesisCalls(task.robot, task.ee, task.scene, task.robot.solver)
    yield calls
    calls.restore()


def test_a_step_makes_one_genesis_call_per_hook_and_no_draw(task, genesis_calls):
    random = copy.deepcopy(task.random)
    task.apply_actions(torch.zeros(NUM_ENVS, 7))
    assert genesis_calls.take() == ["RigidEntity.control_dofs_position"]  # all nine dofs at once
    task.simulate()
    assert genesis_calls.take() == ["Scene.step"]
    task.reset_envs(torch.tensor([True, False, False]))
    assert genesis_calls.take() == ["RigidEntity.set_qpos"]  # qpos and velocities of the whole robot
    task.read_state()
    assert genesis_calls.take() == ["RigidLink.get_pos"]  # the joints come through live views (state_views)
    for hook in (task.observe, task.compute_rewards, task.compute_terminated, task.compute_truncated):
        hook()
    assert genesis_calls.take() == []  # they share what read_state read
    # Only the reset env drew (its joint noise and target); noise and randomization are off.
    draws_expected, draws = next_draws(random), next_draws(task.random)
    assert torch.equal(draws[1:], draws_expected[1:]) and not torch.equal(draws[0], draws_expected[0])


def test_randomization_off_costs_no_genesis_call_and_no_draw(task, genesis_calls):
    randomizer, everyone = task.randomizer, torch.ones(NUM_ENVS, dtype=torch.bool)
    assert not (randomizer.has_reset_draws or randomizer.has_pushes or randomizer.has_obs_noise)
    random = copy.deepcopy(task.random)
    randomizer.reset(everyone)
    randomizer.draw_obs_noise(everyone)
    assert randomizer.push(torch.full((NUM_ENVS,), 50)) is None
    obs = torch.zeros(NUM_ENVS, 20)
    assert randomizer.add_obs_noise(obs) is obs
    assert genesis_calls.take() == []
    assert torch.equal(next_draws(task.random), next_draws(random))
