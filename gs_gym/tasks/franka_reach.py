"""Franka reach: a fixed Franka Panda moving its hand link to a random target position per env.

Scene: only the Panda MJCF shipped with Genesis (no ground, collisions off, so it compiles quickly), stepped at
``dt`` with ``substeps`` physics substeps. Actions in ``[-1, 1]^7`` move the PD targets of the seven arm joints by
``action_scale * action`` radians per step (targets are accumulated and clipped to the joint limits); the fingers
are held open. Targets are drawn uniformly from the box ``[target_low, target_high]`` (world frame, meters) at reset.
The MJCF's dofs and qpos must be exactly the seven arm joints then the two finger joints (the Panda's own order), so
that one Genesis call sets, controls or reads the whole robot.

Observation (20 floats): ``[arm joint positions (7), arm joint velocities * joint_velocity_scale (7),
hand position (3), target position (3)]``.

Reward: ``-distance_weight * |hand - target| + success_bonus * success`` with
``success = |hand - target| < success_threshold``; terminated on success when ``terminate_on_success``, truncated at
``max_episode_steps``.
"""

from __future__ import annotations

import dataclasses

import gymnasium as gym
import numpy as np
import torch

from gs_gym.tasks.base import Task, TaskConfig
from gs_gym.tasks.randomization import DomainRandomizer, RandomizedTaskConfig
from gs_gym.tasks.registry import register_task
from gs_gym.tasks.rendering import RGB_ARRAY, CameraSpec, FollowCamera, vis_options
from gs_gym.tasks.state_views import dofs_position_reader, dofs_velocity_reader

ARM_JOINTS = tuple(f"joint{i}" for i in range(1, 8))
FINGER_JOINTS = ("finger_joint1", "finger_joint2")
NUM_ARM = len(ARM_JOINTS)
OBS_DIM = 2 * NUM_ARM + 3 + 3


@dataclasses.dataclass(frozen=True)
class FrankaReachConfig(RandomizedTaskConfig):
    max_episode_steps: int = 250
    """5 s at 50 Hz."""
    dt: float = 0.02
    substeps: int = 2

    mjcf: str = "xml/franka_emika_panda/panda.xml"
    ee_link: str = "hand"
    home_qpos: tuple[float, ...] = (0.0, -0.785, 0.0, -2.356, 0.0, 1.571, 0.785)
    """Arm joint positions the episodes start around (radians)."""
    finger_opening: float = 0.04
    kp: tuple[float, ...] = (4500.0, 4500.0, 3500.0, 3500.0, 2000.0, 2000.0, 2000.0)
    kv: tuple[float, ...] = (450.0, 450.0, 350.0, 350.0, 200.0, 200.0, 200.0)
    finger_kp: float = 100.0
    finger_kv: float = 10.0
    action_scale: float = 0.05
    """Radians of PD-target change per step for an action of 1."""
    reset_joint_noise: float = 0.1
    """Arm joint positions at reset are drawn uniformly from ``home_qpos +- reset_joint_noise``."""

    target_low: tuple[float, float, float] = (0.3, -0.3, 0.2)
    target_high: tuple[float, float, float] = (0.7, 0.3, 0.7)
    joint_velocity_scale: float = 0.1
    noise_dof_pos: float = 0.005
    noise_dof_vel: float = 0.05
    """Observation-noise std in physical units, multiplied by ``randomization.obs_noise_scale`` (0 = off)."""

    distance_weight: float = 1.0
    success_threshold: float = 0.05
    success_bonus: float = 5.0
    terminate_on_success: bool = True

    def __post_init__(self) -> None:
        super().__post_init__()
        if len(self.home_qpos) != NUM_ARM or len(self.kp) != NUM_ARM or len(self.kv) != NUM_ARM:
            raise ValueError(f"home_qpos, kp and kv: expected {NUM_ARM} entries each")
        if any(low > high for low, high in zip(self.target_low, self.target_high, strict=False)):
            raise ValueError(f"target_low/target_high: expected low <= high, got {self.target_low}, {self.target_high}")
        if self.randomization.friction_range is not None:
            raise ValueError("randomization.friction_range: franka-reach simulates no contacts")
        if self.randomization.push_interval_s is not None:
            raise ValueError("randomization.push_interval_s: franka-reach has no floating base to push")


@register_task("franka-reach")
class FrankaReach(Task):
    """A step is three Genesis calls (one control, one ``scene.step``, the hand position's getter in ``read_state``;
    the joints are read through live views) plus the masked ``set_qpos`` of ``reset_envs`` and one setter per enabled
    reset-time randomization.

    ``render_mode="rgb_array"``: per env, the arm and its target (a sphere of radius ``success_threshold``, added to
    the scene only when rendering, without collision) from a camera aimed between the arm's workspace and the
    target."""

    WORKSPACE_CENTER = (0.25, 0.0, 0.35)
    """Where, with the target, the camera aims (world frame, meters): half way between the two."""

    config_class = FrankaReachConfig
    config: FrankaReachConfig
    render_modes = (RGB_ARRAY,)
    fresh_outputs = True  # observe, compute_rewards and compute_terminated compute a new tensor each call
    capturable = True  # they read the live joint views, hand_pos and targets, all written in place

    @classmethod
    def spaces(cls, config: TaskConfig) -> tuple[gym.spaces.Box, gym.spaces.Box]:
        observation = gym.spaces.Box(-np.inf, np.inf, shape=(OBS_DIM,), dtype=np.float32)
        action = gym.spaces.Box(-1.0, 1.0, shape=(NUM_ARM,), dtype=np.float32)
        return observation, action

    def build(self) -> None:
        import genesis as gs

        config, n, device = self.config, self.num_envs, self.device
        self.randomizer = DomainRandomizer(config.randomization, self.random, config.dt)
        self.scene = gs.Scene(
            sim_options=gs.options.SimOptions(dt=config.dt, substeps=config.substeps),
            rigid_options=gs.options.RigidOptions(
                enable_collision=False,
                enable_self_collision=False,
                enable_joint_limit=True,
                **self.randomizer.rigid_options(),
            ),
            vis_options=vis_options(self.render_mode),
            show_viewer=False,
        )
        self.robot = self.scene.add_entity(gs.morphs.MJCF(file=config.mjcf))
        self.marker = None
        self.camera = None
        if self.render_mode is not None:
            self.marker = self.scene.add_entity(
                gs.morphs.Sphere(radius=config.success_threshold, fixed=True, collision=False),
                surface=gs.surfaces.Default(color=(0.9, 0.2, 0.2)),
            )
            self.camera = FollowCamera(self.scene, CameraSpec(offset=(1.1, 0.9, 0.45), fov=50.0))
        self.scene.build(n_envs=n)
        self._check_joint_layout()

        self.arm_dofs = list(range(NUM_ARM))
        self.finger_dofs = list(range(NUM_ARM, NUM_ARM + len(FINGER_JOINTS)))
        self._arm = range(NUM_ARM)  # Genesis reads a range as a slice: no index tensor per call
        self._read_arm_pos = dofs_position_reader(self.robot, self._arm)
        self._read_arm_vel = dofs_velocity_reader(self.robot, self._arm)
        self.ee = self.robot.get_link(config.ee_link)
        fingers = [config.finger_opening] * len(FINGER_JOINTS)
        self.robot.set_dofs_kp(torch.tensor([*config.kp, *[config.finger_kp] * len(FINGER_JOINTS)]))
        self.robot.set_dofs_kv(torch.tensor([*config.kv, *[config.finger_kv] * len(FINGER_JOINTS)]))
        noise = [config.noise_dof_pos] * NUM_ARM + [config.noise_dof_vel * config.joint_velocity_scale] * NUM_ARM
        self.randomizer.attach(
            self.robot,
            pd_dofs=self.arm_dofs,
            kp=torch.tensor(config.kp),
            kv=torch.tensor(config.kv),
            mass_link=config.ee_link,
            obs_noise_std=torch.tensor(noise + [0.0] * 6),
        )

        def tensor(values) -> torch.Tensor:
            return torch.tensor(values, dtype=torch.float32, device=device)

        lower, upper = self.robot.get_dofs_limit(self.arm_dofs)
        self.joint_lower = lower.to(device, torch.float32).reshape(-1, NUM_ARM)[0]  # per-env rows are equal
        self.joint_upper = upper.to(device, torch.float32).reshape(-1, NUM_ARM)[0]
        self.home_qpos = tensor(config.home_qpos)
        self.target_low = tensor(config.target_low)
        self.target_high = tensor(config.target_high)
        # World-frame target of every env (drawn at reset; may be written between steps, e.g. by a curriculum, in place:
        # the captured hooks read this tensor).
        self.targets = torch.zeros(n, 3, dtype=torch.float32, device=device)
        # PD targets of all nine dofs, in Genesis' dof order: the arm's (``joint_targets``, a view) then the open
        # fingers, which never change. Reset writes an episode's first qpos into the arm's rows, so these rows are
        # also what ``set_qpos`` takes.
        self._dof_targets = torch.cat([self.home_qpos, tensor(fingers)]).expand(n, -1).clone()
        self._all_envs = torch.ones(n, dtype=torch.bool, device=device)
        self.hand_pos = torch.zeros(n, 3, dtype=torch.float32, device=device)
        self.read_state()

    def _check_joint_layout(self) -> None:
        joints = [self.robot.get_joint(name) for name in ARM_JOINTS + FINGER_JOINTS]
        order = list(range(len(joints)))
        dofs = [index for joint in joints for index in joint.dofs_idx_local]
        qs = [index for joint in joints for index in joint.qs_idx_local]
        if dofs != order or qs != order or self.robot.n_dofs != len(joints) or self.robot.n_qs != len(joints):
            raise ValueError(
                f"mjcf {self.config.mjcf!r}: expected the robot's dofs and qpos to be exactly the joints "
                f"{list(ARM_JOINTS + FINGER_JOINTS)} in this order, got dofs {dofs} and qpos {qs} of "
                f"{self.robot.n_dofs} dofs / {self.robot.n_qs} qpos"
            )

    @property
    def joint_targets(self) -> torch.Tensor:
        """``(num_envs, 7)`` PD targets of the arm joints (a view: write into it, do not assign it)."""
        return self._dof_targets[:, :NUM_ARM]

    # -- state -----------------------------------------------------------------------------------------------

    def read_state(self) -> None:
        """Cache what the hooks share: ``arm_pos`` / ``arm_vel`` (7 joints, radians and rad/s; live views of
        Genesis's arrays, ``state_views``) and ``hand_pos`` (world frame; Genesis's getter, copied into the same
        tensor each time, as ``capturable`` asks: link positions come out of Genesis's kinematics, which a view of its
        array would not run)."""
        self.arm_pos = self._read_arm_pos()
        self.arm_vel = self._read_arm_vel()
        self.hand_pos.copy_(self.ee.get_pos())

    def ee_pos(self) -> torch.Tensor:
        """The hand position read from Genesis now (``hand_pos`` holds the one ``read_state`` cached)."""
        return self.ee.get_pos()

    def distance(self) -> torch.Tensor:
        """Hand-to-target distance of every env: the cached hand position against the current ``targets``."""
        return torch.linalg.vector_norm(self.hand_pos - self.targets, dim=1)

    # -- hooks -----------------------------------------------------------------------------------------------

    def apply_actions(self, actions: torch.Tensor) -> None:
        delta = actions.to(self.device, torch.float32).clamp(-1.0, 1.0) * self.config.action_scale
        targets = self.joint_targets
        torch.clamp(targets + delta, self.joint_lower, self.joint_upper, out=targets)
        self.robot.control_dofs_position(self._dof_targets)

    def simulate(self) -> None:
        self.scene.step()
        self.randomizer.draw_obs_noise(self._all_envs)  # no-op when noise is off

    def reset_envs(self, mask: torch.Tensor) -> None:
        """One Genesis call (plus the randomizer's, when on): the masked envs' nine qpos, velocities zeroed.

        Their PD targets go to the ``joint_targets`` buffer only: no control call is needed, since every reset the
        shard makes (autoreset after ``simulate``, or ``env.reset``) is followed by ``apply_actions``, which sends
        every env's nine targets, before the next ``scene.step``."""
        c, rows = self.config, mask.unsqueeze(1)
        qpos = self.home_qpos
        if c.reset_joint_noise > 0.0:
            qpos = qpos + self.random.uniform(mask, (NUM_ARM,), -c.reset_joint_noise, c.reset_joint_noise)
        qpos = torch.clamp(qpos, self.joint_lower, self.joint_upper)
        targets = self.random.uniform(mask, (3,), self.target_low, self.target_high)
        torch.where(rows, targets, self.targets, out=self.targets)
        joint_targets = self.joint_targets
        torch.where(rows, qpos, joint_targets, out=joint_targets)
        self.robot.set_qpos(self._dof_targets, envs_idx=mask, zero_velocity=True)
        self.randomizer.reset(mask)
        self.randomizer.draw_obs_noise(mask)

    def observe(self) -> torch.Tensor:
        obs = torch.cat(
            [self.arm_pos, self.arm_vel * self.config.joint_velocity_scale, self.hand_pos, self.targets], dim=1
        )
        return self.randomizer.add_obs_noise(obs).to(torch.float32)

    def compute_rewards(self) -> torch.Tensor:
        """``-distance_weight * distance + success_bonus * success``: the bonus added with ``alpha``, five kernels."""
        c = self.config
        distance = self.distance()
        return torch.add(distance * -c.distance_weight, distance < c.success_threshold, alpha=c.success_bonus)

    def compute_terminated(self) -> torch.Tensor:
        if not self.config.terminate_on_success:
            return torch.zeros(self.num_envs, dtype=torch.bool, device=self.device)
        return self.distance() < self.config.success_threshold

    def render(self) -> np.ndarray | None:
        """Per env, the arm and the target marker, the camera aimed half way between the arm's workspace and the
        target: ``(num_envs, 240, 320, 3)`` uint8; None without a render mode. Moves the marker (no collision) to
        ``targets`` first."""
        if self.camera is None or self.marker is None:
            return None
        self.marker.set_pos(self.targets)
        center = torch.tensor(self.WORKSPACE_CENTER, dtype=torch.float32, device=self.device)
        return self.camera.render((self.targets + center) / 2)

    def metrics(self) -> dict[str, float]:
        """Means over the envs: hand-to-target distance (m) and the fraction within ``success_threshold``."""
        distance = torch.linalg.vector_norm(self.ee_pos() - self.targets, dim=1)
        success = (distance < self.config.success_threshold).to(torch.float32)
        values = torch.stack([distance.mean(), success.mean()]).tolist()
        return dict(zip(("distance", "success_rate"), values, strict=True))
