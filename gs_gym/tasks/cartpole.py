"""Cart-pole: a cart on a rail (prismatic joint) carrying a free pole (hinge), pushed by a continuous force.

The robot is a URDF generated from the config (no collision geometry, so the scene compiles quickly on the CPU
backend). Observation ``[cart position, pole angle, cart velocity, pole angular velocity]``; action in ``[-1, 1]``
scaled to ``force_scale`` newtons on the cart. The pole angle is 0 when upright.
"""

from __future__ import annotations

import dataclasses
import tempfile
from pathlib import Path

import gymnasium as gym
import numpy as np
import torch

from gs_gym.tasks.base import Task, TaskConfig, require_numbers
from gs_gym.tasks.registry import register_task
from gs_gym.tasks.rendering import RGB_ARRAY, CameraSpec, FollowCamera, vis_options
from gs_gym.tasks.state_views import dofs_position_reader, dofs_velocity_reader


@dataclasses.dataclass(frozen=True)
class CartPoleConfig(TaskConfig):
    max_episode_steps: int = 500
    dt: float = 0.02
    cart_mass: float = 1.0
    pole_mass: float = 0.1
    pole_length: float = 1.0
    force_scale: float = 10.0
    track_limit: float = 2.4
    """The episode terminates when the cart leaves ``[-track_limit, track_limit]``."""
    angle_limit: float = 0.2095
    """The episode terminates when ``|pole angle|`` exceeds this (radians; 12 degrees)."""
    reset_noise: float = 0.05
    """Initial state components are drawn uniformly from ``[-reset_noise, reset_noise]``."""
    angle_cost: float = 0.5
    position_cost: float = 0.1
    armature: float = 0.001

    def __post_init__(self) -> None:
        super().__post_init__()
        require_numbers(
            self,
            positive=("dt", "cart_mass", "pole_mass", "pole_length", "track_limit", "angle_limit"),
            non_negative=("force_scale", "reset_noise", "angle_cost", "position_cost", "armature"),
        )


def cartpole_urdf(config: CartPoleConfig, visual: bool = False) -> str:
    """URDF text of the cart-pole described by ``config``; with ``visual``, boxes for the rail, cart and pole to render
    (visual geometry only: the explicit inertials, not the boxes, give the dynamics)."""
    half = config.pole_length / 2
    pole_inertia = config.pole_mass * config.pole_length**2 / 12
    rail = 2 * config.track_limit

    def inertial(mass: float, z: float, ixx: float) -> str:
        return (
            f'<inertial><origin xyz="0 0 {z}"/><mass value="{mass}"/>'
            f'<inertia ixx="{ixx}" ixy="0" ixz="0" iyy="{ixx}" iyz="0" izz="{ixx / 100 + 1e-6}"/></inertial>'
        )

    def box(size: tuple[float, float, float], z: float, rgb: str) -> str:
        if not visual:
            return ""
        sx, sy, sz = size
        return (
            f'<visual><origin xyz="0 0 {z}"/><geometry><box size="{sx} {sy} {sz}"/></geometry>'
            f'<material name="{rgb}"><color rgba="{rgb} 1"/></material></visual>'
        )

    rail_visual = box((rail + 0.4, 0.04, 0.04), 1.0, "0.6 0.6 0.6")
    cart_visual = box((0.4, 0.25, 0.2), 0.0, "0.2 0.4 0.8")
    pole_visual = box((0.05, 0.05, config.pole_length), half, "0.9 0.6 0.2")
    return f"""<?xml version="1.0"?>
<robot name="cartpole">
  <link name="rail">{inertial(1.0, 0.0, 0.01)}{rail_visual}</link>
  <joint name="slider" type="prismatic">
    <parent link="rail"/><child link="cart"/><axis xyz="1 0 0"/><origin xyz="0 0 1"/>
    <limit lower="{-rail}" upper="{rail}" effort="1000" velocity="1000"/>
  </joint>
  <link name="cart">{inertial(config.cart_mass, 0.0, 0.01)}{cart_visual}</link>
  <joint name="hinge" type="continuous">
    <parent link="cart"/><child link="pole"/><axis xyz="0 1 0"/><origin xyz="0 0 0"/>
  </joint>
  <link name="pole">{inertial(config.pole_mass, half, pole_inertia)}{pole_visual}</link>
</robot>
"""


@register_task("cartpole")
class CartPole(Task):
    """``render_mode="rgb_array"``: per env, a side view that follows the cart along the rail."""

    config_class = CartPoleConfig
    config: CartPoleConfig
    render_modes = (RGB_ARRAY,)
    fresh_outputs = True  # observe, compute_rewards and compute_terminated compute a new tensor each call
    position: torch.Tensor
    """Cart position and pole angle of every env, ``(num_envs, 2)``, as ``read_state`` read them."""
    velocity: torch.Tensor
    """Their velocities, ``(num_envs, 2)``."""

    @classmethod
    def spaces(cls, config: TaskConfig) -> tuple[gym.spaces.Box, gym.spaces.Box]:
        observation = gym.spaces.Box(-np.inf, np.inf, shape=(4,), dtype=np.float32)
        action = gym.spaces.Box(-1.0, 1.0, shape=(1,), dtype=np.float32)
        return observation, action

    def build(self) -> None:
        import genesis as gs

        config = self.config
        rendering = self.render_mode is not None
        self.scene = gs.Scene(
            sim_options=gs.options.SimOptions(dt=config.dt, substeps=1),
            rigid_options=gs.options.RigidOptions(enable_collision=False, enable_joint_limit=True),
            vis_options=vis_options(self.render_mode),
            show_viewer=False,
        )
        # the URDF (primitive shapes only) is read by add_entity and gone before the build's minutes of compiling,
        # so that a worker killed then leaves no directory behind
        with tempfile.TemporaryDirectory(prefix="gs_gym_cartpole_") as directory:
            urdf = Path(directory) / "cartpole.urdf"
            urdf.write_text(cartpole_urdf(config, visual=rendering))
            self.robot = self.scene.add_entity(gs.morphs.URDF(file=str(urdf), fixed=True))
        # the rail is 1 m up: look at the middle of an upright pole from the side
        spec = CameraSpec(offset=(0.0, -3.0, 0.3), lookat_offset=(0.0, 0.0, 1.0 + 0.4 * config.pole_length))
        self.camera = FollowCamera(self.scene, spec) if rendering else None
        self.scene.build(n_envs=self.num_envs)
        self.robot.set_dofs_armature(torch.full((2,), config.armature))
        self._read_position, self._read_velocity = dofs_position_reader(self.robot), dofs_velocity_reader(self.robot)
        self._forces = torch.zeros(self.num_envs, 2, dtype=torch.float32, device=self.device)

    def apply_actions(self, actions: torch.Tensor) -> None:
        self._forces[:, 0] = actions[:, 0].clamp(-1.0, 1.0) * self.config.force_scale
        self.robot.control_dofs_force(self._forces)

    def reset_envs(self, mask: torch.Tensor) -> None:
        noise = self.config.reset_noise
        state = self.random.uniform(mask, (4,), -noise, noise)
        self.robot.set_qpos(state[:, :2], envs_idx=mask, zero_velocity=False)
        self.robot.set_dofs_velocity(state[:, 2:], envs_idx=mask)
        self._reset_state = state

    def read_reset_state(self, mask: torch.Tensor) -> None:
        """The masked rows from the state ``reset_envs`` drew and set: no Genesis call."""
        rows = mask.unsqueeze(1)
        self.position = torch.where(rows, self._reset_state[:, :2], self.position)
        self.velocity = torch.where(rows, self._reset_state[:, 2:], self.velocity)

    def read_state(self) -> None:
        """``position`` (cart position, pole angle) and ``velocity``, ``(num_envs, 2)`` each: live views of Genesis's
        arrays (``state_views``), no Genesis call."""
        self.position = self._read_position()
        self.velocity = self._read_velocity()

    def observe(self) -> torch.Tensor:
        return torch.cat([self.position, self.velocity], dim=1).to(torch.float32)

    def compute_rewards(self) -> torch.Tensor:
        config = self.config
        angle = self.position[:, 1] / config.angle_limit
        cart = self.position[:, 0] / config.track_limit
        return (1.0 - config.angle_cost * angle**2 - config.position_cost * cart**2).to(torch.float32)

    def metrics(self) -> dict[str, float]:
        """Means over the envs of ``|pole angle|`` (radians) and ``|cart position|`` (meters)."""
        values = self.position.abs().mean(dim=0).tolist()
        return {"abs_pole_angle": values[1], "abs_cart_position": values[0]}

    def compute_terminated(self) -> torch.Tensor:
        position = self.position
        return (position[:, 0].abs() > self.config.track_limit) | (position[:, 1].abs() > self.config.angle_limit)

    def render(self) -> np.ndarray | None:
        """Per env, the cart seen from the side (the camera moves along the rail with it): ``(num_envs, 240, 320,
        3)`` uint8; None without a render mode."""
        if self.camera is None:
            return None
        cart = torch.zeros(self.num_envs, 3, dtype=torch.float32)
        cart[:, 0] = self.robot.get_dofs_position()[:, 0].cpu()
        return self.camera.render(cart)
