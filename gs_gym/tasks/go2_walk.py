"""Go2 walk: a Unitree Go2 tracking a commanded base velocity (forward, lateral, yaw rate) on flat ground.

Scene: a plane and the Go2 URDF shipped with Genesis, stepped at ``dt`` (50 Hz) with ``substeps`` physics substeps.
The 12 joints are PD-controlled by Genesis towards ``default_joint_angles + action_scale * action`` (actions clipped
to ``[-action_clip, action_clip]``); with ``action_latency`` the target of a step comes from the previous step's
action. Each env gets a command drawn uniformly from the configured ranges at reset and every
``resampling_time_s`` of its episode.

Observation (45 floats, clipped to ``[-obs_clip, obs_clip]``), in the base frame:
``[ang_vel * s_ang (3), projected gravity (3), commands * (s_lin, s_lin, s_ang) (3),
(q - q_default) * s_pos (12), qd * s_vel (12), last action (12)]``.

Reward (weights per second, multiplied by ``dt``), with ``v``/``w`` the base-frame linear/angular velocity:
``w_lin * exp(-|cmd_xy - v_xy|^2 / sigma) + w_ang * exp(-(cmd_yaw - w_z)^2 / sigma) + w_z * v_z^2
+ w_height * (h - h_target)^2 + w_rate * |a - a_prev|^2 + w_pose * sum|q - q_default|`` (the last four weights are
negative). Terminated when ``|roll|`` or ``|pitch|`` exceeds its limit; truncated at ``max_episode_steps``.
"""

from __future__ import annotations

import dataclasses
import functools
import math

import gymnasium as gym
import numpy as np
import torch

from gs_gym.tasks.base import Task, TaskConfig, require_numbers
from gs_gym.tasks.randomization import DomainRandomizer, RandomizedTaskConfig
from gs_gym.tasks.registry import register_task
from gs_gym.tasks.rendering import RGB_ARRAY, CameraSpec, FollowCamera, vis_options
from gs_gym.tasks.state_views import dofs_velocity_reader, qpos_reader

GO2_JOINT_NAMES = (
    "FR_hip_joint", "FR_thigh_joint", "FR_calf_joint",
    "FL_hip_joint", "FL_thigh_joint", "FL_calf_joint",
    "RR_hip_joint", "RR_thigh_joint", "RR_calf_joint",
    "RL_hip_joint", "RL_thigh_joint", "RL_calf_joint",
)  # fmt: skip
GO2_DEFAULT_JOINT_ANGLES = (
    0.0, 0.8, -1.5,
    0.0, 0.8, -1.5,
    0.0, 1.0, -1.5,
    0.0, 1.0, -1.5,
)  # fmt: skip
NUM_JOINTS = len(GO2_JOINT_NAMES)
OBS_DIM = 3 + 3 + 3 + NUM_JOINTS * 3


@dataclasses.dataclass(frozen=True)
class Go2WalkConfig(RandomizedTaskConfig):
    max_episode_steps: int = 1000
    """20 s at 50 Hz."""
    dt: float = 0.02
    """Control period (one ``scene.step``)."""
    substeps: int = 2
    """Physics substeps per control step."""

    # -- robot and control
    urdf: str = "urdf/go2/urdf/go2.urdf"
    joint_names: tuple[str, ...] = GO2_JOINT_NAMES
    default_joint_angles: tuple[float, ...] = GO2_DEFAULT_JOINT_ANGLES
    """Default stance, in the order of ``joint_names`` (radians)."""
    kp: float = 20.0
    kv: float = 0.5
    action_scale: float = 0.25
    action_clip: float = 10.0
    action_latency: bool = True
    """Apply the previous step's action (a one-control-step actuation delay)."""
    base_init_pos: tuple[float, float, float] = (0.0, 0.0, 0.42)
    reset_joint_noise: float = 0.0
    """Joint positions at reset are drawn uniformly from ``default +- reset_joint_noise``."""

    # -- commands
    lin_vel_x_range: tuple[float, float] = (-1.0, 1.0)
    lin_vel_y_range: tuple[float, float] = (-0.5, 0.5)
    ang_vel_yaw_range: tuple[float, float] = (-1.0, 1.0)
    resampling_time_s: float = 10.0

    # -- termination
    max_roll: float = math.radians(10.0)
    max_pitch: float = math.radians(10.0)

    # -- observation
    obs_scale_lin_vel: float = 2.0
    """Scales the linear-velocity commands in the observation."""
    obs_scale_ang_vel: float = 0.25
    obs_scale_dof_pos: float = 1.0
    obs_scale_dof_vel: float = 0.05
    obs_clip: float = 100.0
    noise_ang_vel: float = 0.2
    noise_gravity: float = 0.05
    noise_dof_pos: float = 0.01
    noise_dof_vel: float = 1.5
    """Observation-noise std in physical units, multiplied by ``randomization.obs_noise_scale`` (0 = off)."""

    # -- reward
    base_height_target: float = 0.3
    tracking_sigma: float = 0.25
    reward_tracking_lin_vel: float = 1.0
    reward_tracking_ang_vel: float = 0.2
    reward_lin_vel_z: float = -1.0
    reward_base_height: float = -50.0
    reward_action_rate: float = -0.005
    reward_similar_to_default: float = -0.1

    def __post_init__(self) -> None:
        super().__post_init__()
        if len(self.joint_names) != NUM_JOINTS or len(self.default_joint_angles) != NUM_JOINTS:
            raise ValueError(f"joint_names and default_joint_angles: expected {NUM_JOINTS} entries each")
        for name in ("lin_vel_x_range", "lin_vel_y_range", "ang_vel_yaw_range"):
            low, high = getattr(self, name)
            if low > high:
                raise ValueError(f"{name}: expected low <= high, got {(low, high)}")
        require_numbers(self, positive=("dt", "resampling_time_s", "tracking_sigma"))
        for name in ("max_roll", "max_pitch"):
            limit, expected = getattr(self, name), "an angle >= 0 in radians (inf: no limit)"
            if isinstance(limit, bool) or not isinstance(limit, (int, float)):
                raise TypeError(f"{name}: expected {expected}, got {limit!r}")
            if not limit >= 0:  # NaN too
                raise ValueError(f"{name}: expected {expected}, got {limit!r}")
        if isinstance(self.substeps, bool) or not isinstance(self.substeps, int) or self.substeps < 1:
            raise ValueError(f"substeps: expected an int >= 1, got {self.substeps!r}")


@dataclasses.dataclass(frozen=True)
class Go2State:
    """The robot state the hooks share, read from Genesis once per step (``read_state``); base frame velocities."""

    pos: torch.Tensor
    quat: torch.Tensor
    lin_vel: torch.Tensor
    ang_vel: torch.Tensor
    gravity: torch.Tensor
    """The unit gravity direction in the base frame (projected gravity)."""
    dof_pos: torch.Tensor
    dof_vel: torch.Tensor
    """Joint positions and velocities, in the order of ``joint_names``."""


# -- quaternion helpers (Genesis order: w, x, y, z) --------------------------------------------------------------


def rotate_inverse(quat: torch.Tensor, vec: torch.Tensor, out: torch.Tensor | None = None) -> torch.Tensor:
    """Express world vectors ``vec`` in the frame of the unit quaternions ``quat``: ``R(quat)^T vec`` (into ``out``
    when given). The doubling rides on the last addition (``alpha``): exact, so the same bits as a separate product."""
    w = quat[..., :1]
    u = -quat[..., 1:]
    uv = torch.cross(u, vec, dim=-1)
    return torch.add(vec, w * uv + torch.cross(u, uv, dim=-1), alpha=2.0, out=out)


def roll_pitch(quat: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Roll and pitch (intrinsic z-y-x Euler angles) of unit quaternions."""
    w, x, y, z = quat.unbind(-1)
    roll = torch.atan2(2.0 * (w * x + y * z), 1.0 - 2.0 * (x * x + y * y))
    pitch = torch.asin((2.0 * (w * y - z * x)).clamp(-1.0, 1.0))
    return roll, pitch


def tilted_beyond(gravity: torch.Tensor, max_roll: float, max_pitch: float) -> torch.Tensor | None:
    """Where the roll or the pitch of ``roll_pitch`` exceeds ``max_roll`` or ``max_pitch``, told from the gravity
    direction in the base frame, which is ``(sin p, -sin r cos p, -cos r cos p)`` for roll r and pitch p: |pitch| >
    max_pitch where ``|g_x| > sin(max_pitch)``, |roll| > max_roll where ``-g_z < cos(max_roll) * hypot(g_y, g_z)``.
    Six kernels and no trigonometry on the device (the angles cost some twenty). A limit that cannot be passed (pitch
    stays within pi/2, roll within pi) costs none; None when neither can."""
    beyond = []
    if max_pitch < math.pi / 2:
        beyond.append(gravity[:, 0].abs() > math.sin(max_pitch))
    if max_roll < math.pi:
        beyond.append(gravity[:, 2] > -math.cos(max_roll) * torch.hypot(gravity[:, 1], gravity[:, 2]))
    return functools.reduce(torch.logical_or, beyond) if beyond else None


@register_task("go2-walk")
class Go2Walk(Task):
    """``render_mode="rgb_array"``: per env, a view from the front right that follows the base over the ground."""

    config_class = Go2WalkConfig
    config: Go2WalkConfig
    render_modes = (RGB_ARRAY,)
    fresh_outputs = True  # observe, compute_rewards and compute_terminated compute a new tensor each call
    capturable = True  # and they read only tensors written in place (test_the_state_the_output_hooks_read_keeps_...)

    @classmethod
    def spaces(cls, config: TaskConfig) -> tuple[gym.spaces.Box, gym.spaces.Box]:
        assert isinstance(config, Go2WalkConfig)
        observation = gym.spaces.Box(-config.obs_clip, config.obs_clip, shape=(OBS_DIM,), dtype=np.float32)
        action = gym.spaces.Box(-config.action_clip, config.action_clip, shape=(NUM_JOINTS,), dtype=np.float32)
        return observation, action

    def build(self) -> None:
        import genesis as gs

        config, n, device = self.config, self.num_envs, self.device
        self.randomizer = DomainRandomizer(config.randomization, self.random, config.dt)
        self.scene = gs.Scene(
            sim_options=gs.options.SimOptions(dt=config.dt, substeps=config.substeps),
            rigid_options=gs.options.RigidOptions(
                enable_collision=True,
                enable_self_collision=False,
                enable_joint_limit=True,
                max_collision_pairs=30,
                **self.randomizer.rigid_options(),
            ),
            vis_options=vis_options(self.render_mode),
            show_viewer=False,
        )
        self.ground = self.scene.add_entity(gs.morphs.URDF(file="urdf/plane/plane.urdf", fixed=True))
        self.robot = self.scene.add_entity(
            gs.morphs.URDF(file=config.urdf, pos=config.base_init_pos, quat=(1.0, 0.0, 0.0, 0.0))
        )
        spec = CameraSpec(offset=(1.0, -1.6, 0.6), lookat_offset=(0.0, 0.0, 0.25))
        self.camera = FollowCamera(self.scene, spec) if self.render_mode is not None else None
        self.scene.build(n_envs=n)

        joints = [self.robot.get_joint(name) for name in config.joint_names]
        self.dofs = [joint.dofs_idx_local[0] for joint in joints]
        """The joints' local dof indices, in the order of ``joint_names`` (the order of actions and observations)."""
        # Index lists handed to Genesis are copied to the device on every call (a host sync each): the step path
        # gives Genesis ranges and reorders on the device instead. Genesis orders the joint dofs 6..17.
        self.joint_dofs_range = range(6, 6 + NUM_JOINTS)
        if self.robot.base_joint.type != gs.JOINT_TYPE.FREE or sorted(self.dofs) != list(self.joint_dofs_range):
            raise ValueError(f"go2-walk: expected a free base and {NUM_JOINTS} joint dofs after it in {config.urdf}")
        self._read_qpos, self._read_dofs_velocity = qpos_reader(self.robot), dofs_velocity_reader(self.robot)
        self.robot.set_dofs_kp(torch.full((NUM_JOINTS,), config.kp), self.dofs)
        self.robot.set_dofs_kv(torch.full((NUM_JOINTS,), config.kv), self.dofs)
        self.randomizer.attach(
            self.robot,
            pd_dofs=self.dofs,
            kp=torch.tensor(config.kp),
            kv=torch.tensor(config.kv),
            mass_link="base",
            friction_entities=(self.robot, self.ground),
            push_dofs=[0, 1],
            obs_noise_std=self._obs_noise_std(),
        )

        def tensor(values) -> torch.Tensor:
            return torch.tensor(values, dtype=torch.float32, device=device)

        self.default_dof_pos = tensor(config.default_joint_angles)
        self.base_init_pos = tensor(config.base_init_pos)
        self.gravity_world = tensor((0.0, 0.0, -1.0)).expand(n, 3)
        self.to_genesis_order = torch.tensor([self.dofs.index(d) for d in self.joint_dofs_range], device=device)
        self.joint_dof_index = torch.tensor(self.dofs, device=device)
        # qpos of a fresh episode, one full row per env: set_qpos with a boolean envs_idx writes the masked rows
        self.joint_qs = [joint.qs_idx_local[0] for joint in joints]
        self.joint_q_index = torch.tensor(self.joint_qs, device=device)
        init_qpos = torch.zeros(self.robot.n_qs, dtype=torch.float32, device=device)
        init_qpos[:3] = self.base_init_pos
        init_qpos[3] = 1.0  # identity quaternion (w, x, y, z)
        init_qpos[self.joint_qs] = self.default_dof_pos
        self.init_qpos = init_qpos.expand(n, -1)
        self.command_low = tensor([r[0] for r in self._command_ranges()])
        self.command_high = tensor([r[1] for r in self._command_ranges()])
        self.command_obs_scale = tensor((config.obs_scale_lin_vel, config.obs_scale_lin_vel, config.obs_scale_ang_vel))
        # observe: (raw - offset) * scale over the concatenated raw columns, the same roundings as term by term
        c = config
        zeros = torch.zeros(2 * NUM_JOINTS, device=device)
        self._obs_offset = torch.cat([zeros[:9], self.default_dof_pos, zeros])
        self._obs_scale = torch.cat([
            tensor([c.obs_scale_ang_vel] * 3 + [1.0] * 3),
            self.command_obs_scale,
            tensor([c.obs_scale_dof_pos] * NUM_JOINTS + [c.obs_scale_dof_vel] * NUM_JOINTS + [1.0] * NUM_JOINTS),
        ])  # fmt: skip
        self._weighted_terms: tuple[str, ...] = ()
        """The names ``reward_terms`` returned when ``_reward_weights`` was made (a subclass may add terms)."""
        self._reward_weights = torch.zeros(0, device=device)
        self.commands = torch.zeros(n, 3, dtype=torch.float32, device=device)
        self.actions = torch.zeros(n, NUM_JOINTS, dtype=torch.float32, device=device)
        self.last_actions = torch.zeros_like(self.actions)
        self.resampling_steps = max(1, round(config.resampling_time_s / config.dt))
        self._all_envs = torch.ones(n, dtype=torch.bool, device=device)
        self._no_envs = torch.zeros(n, dtype=torch.bool, device=device)
        self.commands_due = self._no_envs
        """Envs whose command the next ``read_state`` draws (reset, or at a resampling step), as a bool mask."""
        self.state: Go2State | None = None
        # the state read_state computes, written in place (the same storage every step: Task.capturable)
        self._base_frame = torch.zeros(n, 2, 3, dtype=torch.float32, device=device)
        """Linear velocity and gravity direction in the base frame (``state.lin_vel``, ``state.gravity``)."""
        self._dof_pos = torch.zeros(n, NUM_JOINTS, dtype=torch.float32, device=device)
        self._dof_vel = torch.zeros_like(self._dof_pos)
        self._reset_qpos = self.init_qpos
        """The qpos rows the last ``reset_envs`` set (``init_qpos`` plus joint noise), for ``read_reset_state``."""

    def _command_ranges(self) -> tuple[tuple[float, float], ...]:
        c = self.config
        return (c.lin_vel_x_range, c.lin_vel_y_range, c.ang_vel_yaw_range)

    def _obs_noise_std(self) -> torch.Tensor:
        c = self.config
        parts = (
            [c.noise_ang_vel * c.obs_scale_ang_vel] * 3
            + [c.noise_gravity] * 3
            + [0.0] * 3
            + [c.noise_dof_pos * c.obs_scale_dof_pos] * NUM_JOINTS
            + [c.noise_dof_vel * c.obs_scale_dof_vel] * NUM_JOINTS
            + [0.0] * NUM_JOINTS
        )
        return torch.tensor(parts, dtype=torch.float32)

    # -- hooks -----------------------------------------------------------------------------------------------

    def apply_actions(self, actions: torch.Tensor) -> None:
        clip = self.config.action_clip
        self.last_actions.copy_(self.actions)
        torch.clamp(actions, -clip, clip, out=self.actions)
        applied = self.last_actions if self.config.action_latency else self.actions
        target = self.default_dof_pos + self.config.action_scale * applied
        self.robot.control_dofs_position(target.index_select(1, self.to_genesis_order), self.joint_dofs_range)

    def simulate(self) -> None:
        steps = self.episode_steps
        self.commands_due = self.commands_due | ((steps > 0) & (steps % self.resampling_steps == 0))
        self.randomizer.push(steps)
        self.scene.step()
        self.randomizer.draw_obs_noise(self._all_envs)

    def reset_envs(self, mask: torch.Tensor) -> None:
        c = self.config
        qpos = self.init_qpos
        if c.reset_joint_noise > 0.0:
            noise = self.random.uniform(mask, (NUM_JOINTS,), -c.reset_joint_noise, c.reset_joint_noise)
            qpos = qpos.clone()
            qpos[:, self.joint_q_index] += noise  # a device index: no list copied to the device
        self.robot.set_qpos(qpos, envs_idx=mask, zero_velocity=True)
        self._reset_qpos = qpos
        keep = ~mask.unsqueeze(1)
        self.actions.mul_(keep)
        self.last_actions.mul_(keep)
        self.commands_due = self.commands_due | mask
        self.randomizer.reset(mask)
        self.randomizer.draw_obs_noise(mask)

    def read_state(self) -> None:
        """The whole robot state from two of Genesis's arrays, read through live views (``state_views``: no Genesis
        call, no copy): qpos is the base position and quaternion then the joint angles; the dof velocities are the
        base's linear velocity (world frame), its angular velocity (base frame) and the joint velocities. ``pos``,
        ``quat`` and ``ang_vel`` stay views, which the next physics step or reset changes. Also draws the commands
        that resets and resampling made due since the last read (one draw per step for both)."""
        self._draw_due_commands()
        qpos, qvel = self._read_qpos(), self._read_dofs_velocity()
        quat = qpos[:, 3:7]
        # both world vectors rotated into the base frame at once: one pass of kernels instead of two
        world = torch.stack([qvel[:, :3], self.gravity_world], dim=1)
        rotate_inverse(quat.unsqueeze(1), world, out=self._base_frame)
        torch.index_select(qpos, 1, self.joint_q_index, out=self._dof_pos)
        torch.index_select(qvel, 1, self.joint_dof_index, out=self._dof_vel)
        self._set_state(qpos, qvel)

    def _set_state(self, qpos: torch.Tensor, qvel: torch.Tensor) -> None:
        """``state`` over the task's own tensors and the live views: the same storage at every step."""
        lin_vel, gravity = self._base_frame.unbind(1)
        self.state = Go2State(pos=qpos[:, :3], quat=qpos[:, 3:7], lin_vel=lin_vel, ang_vel=qvel[:, 3:6],
                              gravity=gravity, dof_pos=self._dof_pos, dof_vel=self._dof_vel)  # fmt: skip

    def read_reset_state(self, mask: torch.Tensor) -> None:
        """The masked rows from the qpos ``reset_envs`` set, at rest: base and joint velocities zero, gravity straight
        down in the base frame (the start quaternion is the identity), written in place. No Genesis call (unless
        Genesis runs without zero-copy: then its getters read ``pos``, ``quat`` and ``ang_vel`` again); the same values
        a ``read_state`` would read (``tests/tasks/test_go2_walk.py`` compares them)."""
        self._draw_due_commands()
        # pos, quat and ang_vel: the live views hold what set_qpos wrote (the readers return them again, no copy)
        self._set_state(self._read_qpos(), self._read_dofs_velocity())
        s, fresh = self._state(), mask.unsqueeze(1)
        s.lin_vel.masked_fill_(fresh, 0.0)
        torch.where(fresh, self.gravity_world, s.gravity, out=s.gravity)
        torch.where(fresh, self._reset_qpos.index_select(1, self.joint_q_index), s.dof_pos, out=s.dof_pos)
        s.dof_vel.masked_fill_(fresh, 0.0)

    def observe(self) -> torch.Tensor:
        """Scaled angular velocity, gravity in the base frame, scaled commands, joint offsets from the default pose
        and velocities (scaled), last actions: four kernels (concatenate, subtract the offsets, scale, clip), with
        the roundings of scaling each part before the concatenation."""
        c, s = self.config, self._state()
        raw = torch.cat([s.ang_vel, s.gravity, self.commands, s.dof_pos, s.dof_vel, self.actions], dim=1)
        obs = self.randomizer.add_obs_noise((raw - self._obs_offset) * self._obs_scale)
        return obs.clamp(-c.obs_clip, c.obs_clip)

    def reward_terms(self) -> dict[str, torch.Tensor]:
        """Each reward term before weighting (per env), as used by ``compute_rewards``."""
        c, s = self.config, self._state()
        lin_error = torch.sum((self.commands[:, :2] - s.lin_vel[:, :2]) ** 2, dim=1)
        ang_error = (self.commands[:, 2] - s.ang_vel[:, 2]) ** 2
        scale = -1.0 / c.tracking_sigma
        return {
            "tracking_lin_vel": torch.exp(lin_error * scale),
            "tracking_ang_vel": torch.exp(ang_error * scale),
            "lin_vel_z": s.lin_vel[:, 2] ** 2,
            "base_height": (s.pos[:, 2] - c.base_height_target) ** 2,
            "action_rate": torch.sum((self.actions - self.last_actions) ** 2, dim=1),
            "similar_to_default": torch.sum(torch.abs(s.dof_pos - self.default_dof_pos), dim=1),
        }

    def compute_rewards(self) -> torch.Tensor:
        """Each term of ``reward_terms`` weighted by the config's ``reward_<name>`` times ``dt``, summed: one stack,
        one product and one sum (not a matrix product, whose float32 precision a TF32 setting would lower)."""
        terms = self.reward_terms()
        if tuple(terms) != self._weighted_terms:  # the first call, or a subclass's terms changed
            c, names = self.config, tuple(terms)
            weights = [getattr(c, f"reward_{name}") * c.dt for name in names]
            self._reward_weights = torch.tensor(weights, dtype=torch.float32, device=self.device)
            self._weighted_terms = names
        return (torch.stack(list(terms.values()), dim=1) * self._reward_weights).sum(dim=1)

    def metrics(self) -> dict[str, float]:
        """Means over the envs: base-frame forward/lateral velocity (m/s) and yaw rate (rad/s), the commanded
        forward velocity, the tracking error ``|cmd_xy - v_xy|`` (m/s) and the base height (m)."""
        s, commands = self._state(), self.commands
        values = torch.stack(
            [
                s.lin_vel[:, 0].mean(),
                s.lin_vel[:, 1].mean(),
                s.ang_vel[:, 2].mean(),
                commands[:, 0].mean(),
                torch.linalg.vector_norm(commands[:, :2] - s.lin_vel[:, :2], dim=1).mean(),
                s.pos[:, 2].mean(),
            ]
        ).tolist()
        names = ("forward_vel", "lateral_vel", "yaw_rate", "command_forward_vel", "tracking_error", "base_height")
        return dict(zip(names, values, strict=True))

    def compute_terminated(self) -> torch.Tensor:
        c = self.config
        terminated = tilted_beyond(self._state().gravity, c.max_roll, c.max_pitch)
        return torch.zeros(self.num_envs, dtype=torch.bool, device=self.device) if terminated is None else terminated

    def render(self) -> np.ndarray | None:
        """Per env, the robot seen from the front right, the camera following the base's x and y at a fixed height:
        ``(num_envs, 240, 320, 3)`` uint8; None without a render mode."""
        if self.camera is None:
            return None
        base = self.robot.get_pos().to("cpu", torch.float32)
        base[:, 2] = 0.0  # follow over the ground, not the base's bounce
        return self.camera.render(base)

    def _state(self) -> Go2State:
        if self.state is None:
            raise RuntimeError("go2-walk: read_state() must run before the hooks that use the state")
        return self.state

    def _draw_due_commands(self) -> None:
        """Draw the commands of the envs in ``commands_due`` (one draw for resets and resampling), then clear it."""
        due = self.commands_due
        drawn = self.random.uniform(due, (3,), self.command_low, self.command_high)
        torch.where(due.unsqueeze(1), drawn, self.commands, out=self.commands)
        self.commands_due = self._no_envs
