"""``gs_gym.tasks.state_views`` against Genesis's getters, on go2-walk's robot (a free base and twelve joints): the
live views hold the getters' values after physics steps and after masked resets, without a copy; where Genesis has no
view to give, the readers are the getters themselves."""

from __future__ import annotations

import re

import genesis as gs
import pytest
import torch

from gs_gym import GenesisVectorEnv
from gs_gym.tasks.state_views import dofs_position_reader, dofs_velocity_reader, qpos_reader

NUM_ENVS = 3


@pytest.fixture(scope="module")
def env():
    env = GenesisVectorEnv(NUM_ENVS, "go2-walk", backend="cpu", num_workers=0, seed=0)
    env.reset(seed=0)
    yield env
    env.close()


def readers_and_getters(robot):
    joints = range(6, 18)
    return {
        "qpos": (qpos_reader(robot), robot.get_qpos),
        "dofs position (joints)": (dofs_position_reader(robot, joints), lambda: robot.get_dofs_position(joints)),
        "dofs position (all)": (dofs_position_reader(robot), robot.get_dofs_position),
        "dofs velocity (base)": (dofs_velocity_reader(robot, range(6)), lambda: robot.get_dofs_velocity(range(6))),
        "dofs velocity (all)": (dofs_velocity_reader(robot), robot.get_dofs_velocity),
    }


def test_views_hold_the_getters_values_through_steps_and_resets(env):
    task = env.local_task
    pairs = readers_and_getters(task.robot)
    views = {name: reader() for name, (reader, _) in pairs.items()}
    generator = torch.Generator().manual_seed(0)
    compared = 0
    for step in range(12):
        env.step(torch.rand(NUM_ENVS, 12, generator=generator) * 2 - 1)
        if step == 6:  # a masked reset between steps: new qpos and zero velocities for env 1 only
            task.reset_envs(torch.tensor([False, True, False]))
        for name, (reader, getter) in pairs.items():
            assert reader() is views[name], name  # the same view every step: nothing read, nothing copied
            assert torch.equal(views[name], getter()), f"{name} at step {step}"
            compared += 1
    assert compared == 12 * len(pairs)
    velocity = views["dofs velocity (all)"]
    assert velocity.shape == (NUM_ENVS, 18) and velocity[[0, 2]].abs().sum() > 0  # moving robots, not zeros


def test_without_zero_copy_the_readers_are_the_getters(env, monkeypatch):
    monkeypatch.setattr(gs, "use_zerocopy", False)  # as GS_ENABLE_ZEROCOPY=0 would leave it
    for name, (reader, getter) in readers_and_getters(env.local_task.robot).items():
        first, second = reader(), reader()
        assert first is not second, name  # a fresh copy each call
        assert torch.equal(first, getter()), name


def test_a_dof_selection_must_be_a_range_within_the_entity(env):
    robot = env.local_task.robot
    for dofs in (range(0, 19), range(0, 18, 2), range(-1, 3)):
        expected = f"expected a contiguous range of local dofs within 0..18, got {dofs}"
        with pytest.raises(ValueError, match=re.escape(expected)):
            dofs_velocity_reader(robot, dofs)
