"""Config handling of the shared domain randomization, and the randomizer's mask logic against a stand-in robot
that records what it is asked (no scene is built here; Genesis-side effects are tested with go2-walk and
franka-reach)."""

from __future__ import annotations

import copy

import pytest
import torch

from gs_gym.tasks import resolve_task
from gs_gym.tasks.random import EnvRandom
from gs_gym.tasks.randomization import DomainRandomizer, RandomizationConfig

NUM_ENVS = 4


def test_randomization_is_off_by_default():
    for name in ("go2-walk", "franka-reach"):
        config = resolve_task(name).make_config()
        assert config.randomization == RandomizationConfig()
        assert not config.randomization.enabled


def test_task_kwargs_accept_a_dict_for_the_nested_config():
    config = resolve_task("go2-walk").make_config(
        randomization={"friction_range": [0.5, 1.5], "push_interval_s": 4.0}, max_episode_steps=10
    )
    assert isinstance(config.randomization, RandomizationConfig)
    assert config.randomization.friction_range == (0.5, 1.5)
    assert config.randomization.push_interval_s == 4.0
    assert config.randomization.enabled
    assert config.max_episode_steps == 10


def test_unknown_and_invalid_randomization_options_are_named():
    go2 = resolve_task("go2-walk")
    with pytest.raises(ValueError, match="frictoin_range"):
        go2.make_config(randomization={"frictoin_range": (0.5, 1.0)})
    with pytest.raises(ValueError, match="friction_range"):
        RandomizationConfig(friction_range=(1.5, 0.5))
    with pytest.raises(ValueError, match="kp_scale_range"):
        RandomizationConfig(kp_scale_range=(0.0, 1.0))
    with pytest.raises(ValueError, match="obs_noise_scale"):
        RandomizationConfig(obs_noise_scale=-1.0)
    with pytest.raises(ValueError, match="push_interval_s"):
        RandomizationConfig(push_interval_s=0.0)


def test_franka_rejects_what_it_cannot_randomize():
    franka = resolve_task("franka-reach")
    with pytest.raises(ValueError, match="friction_range"):
        franka.make_config(randomization={"friction_range": (0.5, 1.0)})
    with pytest.raises(ValueError, match="push_interval_s"):
        franka.make_config(randomization={"push_interval_s": 1.0})
    franka.make_config(randomization={"added_mass_range": (0.0, 1.0), "kp_scale_range": (0.9, 1.1)})


def randomizer(**kwargs) -> DomainRandomizer:
    random = EnvRandom(NUM_ENVS, 0, "cpu")
    random.seed_range(0)
    return DomainRandomizer(RandomizationConfig(**kwargs), random, 0.02)


def test_batched_genesis_info_is_requested_only_when_needed():
    def options(**kwargs):
        return randomizer(**kwargs).rigid_options()

    assert options() == {}
    assert options(friction_range=(0.5, 1.0), obs_noise_scale=1.0, push_interval_s=1.0) == {}
    assert options(added_mass_range=(0.0, 1.0)) == {"batch_links_info": True}
    assert options(kv_scale_range=(0.9, 1.1)) == {"batch_dofs_info": True}
    assert randomizer(push_interval_s=1.0).push_interval_steps == 50


def test_flags_say_which_features_do_any_work():
    off = randomizer()
    assert (off.has_reset_draws, off.has_pushes, off.has_obs_noise) == (False, False, False)
    for field, value in [("friction_range", (0.5, 1.0)), ("added_mass_range", (0.0, 1.0)),
                         ("kp_scale_range", (0.9, 1.1)), ("kv_scale_range", (0.9, 1.1))]:  # fmt: skip
        on = randomizer(**{field: value})
        assert (on.has_reset_draws, on.has_pushes, on.has_obs_noise) == (True, False, False), field
    assert randomizer(push_interval_s=1.0).has_pushes
    assert randomizer(obs_noise_scale=0.5).has_obs_noise


# -- the randomizer against a stand-in robot -------------------------------------------------------------------------

ALL = torch.ones(NUM_ENVS, dtype=torch.bool)
SOME = torch.tensor([False, True, False, True])
PD_DOFS = [6, 7, 8]
NOMINAL_MASS = 5.0


class Recorder:
    """Stands in for a Genesis entity (and its solver): answers the few reads ``attach`` makes, records every call
    (name, value, keyword arguments) and fails on anything else."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, torch.Tensor | None, dict]] = []
        self.solver = self
        self.geoms = [type("Geom", (), {"idx": i})() for i in (3, 4)]

    def get_link(self, name):
        return type("Link", (), {"idx_local": 1})()

    def get_links_mass(self, links):
        return torch.full((NUM_ENVS, len(links)), NOMINAL_MASS)

    def get_dofs_velocity(self, dofs):
        self.calls.append(("get_dofs_velocity", None, {"dofs": dofs}))
        return torch.zeros(NUM_ENVS, len(dofs))

    def __getattr__(self, name):
        if not name.startswith(("set_", "control_", "zero_")):
            raise AttributeError(name)

        def record(value, *args, **kwargs):
            self.calls.append((name, value.clone(), {"args": args, **kwargs}))

        return record


def attached(**kwargs) -> tuple[DomainRandomizer, Recorder]:
    robot, ground = Recorder(), Recorder()
    r = randomizer(**kwargs)
    r.attach(
        robot,
        pd_dofs=PD_DOFS,
        kp=torch.tensor(20.0),
        kv=torch.tensor(0.5),
        mass_link="base",
        friction_entities=(robot, ground),
        push_dofs=[0, 1],
        obs_noise_std=torch.tensor([0.1, 0.0, 0.2]),
    )
    return r, robot


def next_draws(random: EnvRandom) -> torch.Tensor:
    return copy.deepcopy(random).uniform(ALL, (4,))


def test_everything_off_costs_no_call_and_no_draw():
    r, robot = attached()
    before = next_draws(r.random)
    r.reset(ALL)
    r.draw_obs_noise(ALL)
    assert r.push(torch.full((NUM_ENVS,), 50)) is None
    observations = torch.ones(NUM_ENVS, 3)
    assert r.add_obs_noise(observations) is observations
    assert robot.calls == []
    assert torch.equal(next_draws(r.random), before)


RESET_DRAWS = {
    "friction_range": (0.5, 1.5),
    "added_mass_range": (-1.0, 3.0),
    "kp_scale_range": (0.8, 1.2),
    "kv_scale_range": (0.5, 2.0),
}


def test_a_masked_reset_redraws_the_masked_envs_in_a_fixed_order():
    r, robot = attached(**RESET_DRAWS)
    r.reset(ALL)
    robot.calls.clear()
    values = {name: getattr(r, name).clone() for name in ("friction", "added_mass", "kp", "kv")}
    reference = copy.deepcopy(r.random)
    r.reset(SOME)

    # One Genesis call per property, each writing every env (no mask to turn into indices): the redrawn values in the
    # masked rows, what was already there in the others.
    assert [name for name, _, _ in robot.calls] == [
        "set_geoms_friction_ratio", "set_links_mass", "set_dofs_kp", "set_dofs_kv"
    ]  # fmt: skip
    assert all(kwargs.get("envs_idx") is None for _, _, kwargs in robot.calls)
    friction, mass, kp, kv = (value for _, value, _ in robot.calls)
    assert torch.equal(friction, r.friction.unsqueeze(1).expand(-1, 4))  # every geom of the robot and the ground
    assert torch.equal(mass, (NOMINAL_MASS + r.added_mass).unsqueeze(1))
    assert torch.equal(kp, r.kp) and torch.equal(kv, r.kv)
    for name, before in values.items():
        after = getattr(r, name)
        assert torch.equal(after[~SOME], before[~SOME]), name
        assert torch.all(after[SOME] != before[SOME]), name

    # Drawn with the mask, friction first, then mass, then the gains.
    assert torch.equal(r.friction[SOME], reference.uniform(SOME, (), 0.5, 1.5)[SOME])
    assert torch.equal(r.added_mass[SOME], reference.uniform(SOME, (), -1.0, 3.0)[SOME])
    scale = r.kp / 20.0
    assert torch.all((scale >= 0.8 - 1e-6) & (scale <= 1.2 + 1e-6))
    scale = r.kv / 0.5
    assert torch.all((scale >= 0.5 - 1e-6) & (scale <= 2.0 + 1e-6))
    assert torch.equal(next_draws(r.random)[~SOME], next_draws(reference)[~SOME])  # other streams did not advance


def test_pushes_kick_the_due_envs_by_mask():
    r, robot = attached(push_interval_s=0.1, push_velocity=0.5)  # every 5 control steps
    due = r.push(torch.tensor([5, 3, 10, 0]))
    assert due.tolist() == [True, False, True, False]
    (read, _, read_kwargs), (write, velocity, write_kwargs) = robot.calls
    assert (read, write) == ("get_dofs_velocity", "set_dofs_velocity")
    # A contiguous range of dofs and a bool envs_idx: Genesis writes the masked rows of a full value, no sync.
    assert read_kwargs["dofs"] == range(2) and write_kwargs["args"] == (range(2),)
    assert torch.equal(write_kwargs["envs_idx"], due)
    assert velocity.shape == (NUM_ENVS, 2)
    assert torch.all(velocity[due] != 0.0) and torch.all(velocity[due].abs() <= 0.5)


def test_observation_noise_is_redrawn_for_the_masked_envs():
    r, _ = attached(obs_noise_scale=2.0)
    r.draw_obs_noise(ALL)
    first = r.obs_noise.clone()
    assert torch.all(first[:, 1] == 0.0) and torch.all(first[:, [0, 2]] != 0.0)
    r.draw_obs_noise(SOME)
    assert torch.equal(r.obs_noise[~SOME], first[~SOME])
    assert torch.all(r.obs_noise[SOME][:, [0, 2]] != first[SOME][:, [0, 2]])
    observations = torch.ones(NUM_ENVS, 3)
    assert torch.equal(r.add_obs_noise(observations), observations + r.obs_noise)
