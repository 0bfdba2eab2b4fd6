"""A Go2 walking env written the way Genesis's own locomotion example writes its Go2 env, as the yardstick for gs_gym.

    python bench/go2_reference.py --backend cpu --n-envs 16 --steps 30      # check it against go2-walk

``Go2ReferenceEnv`` is what ``bench/go2_vs_reference.py`` times as path (a). It is a plain class over one batched
Genesis scene, with ``reset()`` and ``step(actions) -> (obs, rewards, dones)`` on torch tensors, no Gymnasium, no
processes and no per-env random streams: the style of Genesis's ``examples/locomotion/go2_env.py`` (our own code,
not a copy of it), in the form its newest version takes: envs that end are reset by a boolean mask in the same
step, with ONE ``robot.set_qpos(full_qpos, envs_idx=mask, zero_velocity=True)`` (Genesis 1.4.5 writes only the
masked rows of a full ``(n_envs, n_qs)`` qpos), commands are redrawn with ``torch.rand`` + ``torch.where``, and
nothing on the step path waits for the device (no ``nonzero()``, ``.item()``, ``bool(tensor)``).

Physics and terms are go2-walk's defaults, read from ``Go2WalkConfig()`` so that the two cannot drift: the same
URDF, base pose, joint order and default angles, PD gains, ``dt`` and substeps, the ``RigidOptions`` that
``Go2Walk.build`` passes (written out below: they are not in the config; ``check_same_scene_options`` compares them
with a built go2-walk scene), action clip and scale, one-step action latency, observation layout, scales and clip,
reward terms and weights times ``dt``, termination on roll or pitch beyond the limits, truncation at
``max_episode_steps``, command ranges and resampling period. Both scenes hold the same entities with the same
options, so they compile the same Genesis kernels and share the kernel cache.

What differs, on purpose (the example's simpler bookkeeping):
  - randomness comes from torch's global generator (``torch.rand``), not from gs_gym's per-env streams;
  - an env that ends is reset within the same step and ``step`` returns the first observation of its new episode
    (the final observation is dropped, as the example does), where gs_gym returns the final observation and resets
    on the next step (Gymnasium's next-step autoreset: one more physics step of a fallen robot, rewarded 0);
  - the new episode's first observation is written from the reset state the env knows (standing still, default
    joints) instead of being read back from Genesis after the reset;
  - rotations use ``genesis.utils.geom`` as the example does (equal to go2-walk's own helpers up to float rounding).
Domain randomization and observation noise (off in go2-walk's defaults) are not implemented; a config that turns
them on is refused.

Run as a script it checks itself against go2-walk on a small batch: it resets, steps with small random actions,
and compares each step's observations and rewards with go2-walk's formulas evaluated on the reference's own Genesis
state (always possible) and, when the go2-walk task can be built with the task API, with a go2-walk scene stepped
in lockstep with the same actions and commands (same physics, not only same formulas).
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout without installing

from gs_gym.tasks.go2_walk import Go2WalkConfig

REWARD_TERMS = (
    "tracking_lin_vel", "tracking_ang_vel", "lin_vel_z", "base_height", "action_rate", "similar_to_default",
)  # fmt: skip
"""go2-walk's reward terms; each is weighted by ``Go2WalkConfig.reward_<name> * dt``."""


def rigid_options():
    """The ``RigidOptions`` go2-walk's scene is built with: its ``build`` passes these literally, plus the flags its
    domain randomization needs (none when randomization is off, as in its defaults)."""
    import genesis as gs

    return gs.options.RigidOptions(
        enable_collision=True,
        enable_self_collision=False,
        enable_joint_limit=True,
        max_collision_pairs=30,
    )


class Go2ReferenceEnv:
    """Go2 tracking a commanded base velocity on flat ground, ``num_envs`` envs in one scene (``gs.init`` done)."""

    def __init__(self, num_envs: int, config: Go2WalkConfig | None = None) -> None:
        import genesis as gs

        c = config if config is not None else Go2WalkConfig()
        if c.randomization.enabled or c.randomization.obs_noise_scale > 0.0:
            raise ValueError("Go2ReferenceEnv: domain randomization and observation noise are not implemented")
        self.cfg = c
        self.num_envs = num_envs
        self.device = torch.device(gs.device)
        self.num_actions = len(c.joint_names)

        self.scene = gs.Scene(
            sim_options=gs.options.SimOptions(dt=c.dt, substeps=c.substeps),
            rigid_options=rigid_options(),
            show_viewer=False,
        )
        self.scene.add_entity(gs.morphs.URDF(file="urdf/plane/plane.urdf", fixed=True))
        self.robot = self.scene.add_entity(gs.morphs.URDF(file=c.urdf, pos=c.base_init_pos, quat=(1.0, 0.0, 0.0, 0.0)))
        self.scene.build(n_envs=num_envs)

        # The motors in the config's joint order, as dof indices (control, reads) and qpos indices (resets).
        motors = [self.robot.get_joint(name) for name in c.joint_names]
        self.motor_dofs = [joint.dofs_idx_local[0] for joint in motors]
        motor_qs = [joint.qs_idx_local[0] for joint in motors]
        self.robot.set_dofs_kp(torch.full((self.num_actions,), c.kp), self.motor_dofs)
        self.robot.set_dofs_kv(torch.full((self.num_actions,), c.kv), self.motor_dofs)

        def tensor(values) -> torch.Tensor:
            return torch.tensor(values, dtype=torch.float32, device=self.device)

        n, dev = num_envs, self.device
        self.default_dof_pos = tensor(c.default_joint_angles)
        # The whole robot's qpos at the start of an episode: base upright at base_init_pos, motors at the defaults.
        (base_joint,) = [joint for joint in self.robot.joints if joint.type == gs.JOINT_TYPE.FREE]
        start_qpos = torch.zeros(self.robot.n_qs, dtype=torch.float32, device=dev)
        start_qpos[base_joint.qs_idx_local] = tensor((*c.base_init_pos, 1.0, 0.0, 0.0, 0.0))
        start_qpos[motor_qs] = self.default_dof_pos
        self.start_qpos = start_qpos.expand(n, -1)
        self.motor_qs = motor_qs
        self.gravity_world = tensor((0.0, 0.0, -1.0)).expand(n, 3)
        ranges = (c.lin_vel_x_range, c.lin_vel_y_range, c.ang_vel_yaw_range)
        self.command_low = tensor([low for low, _ in ranges])
        self.command_span = tensor([high for _, high in ranges]) - self.command_low
        self.command_scale = tensor((c.obs_scale_lin_vel, c.obs_scale_lin_vel, c.obs_scale_ang_vel))
        self.resampling_steps = max(1, round(c.resampling_time_s / c.dt))
        self.reward_weights = {name: getattr(c, f"reward_{name}") * c.dt for name in REWARD_TERMS}

        self.commands = torch.zeros(n, 3, dtype=torch.float32, device=dev)
        self.actions = torch.zeros(n, self.num_actions, dtype=torch.float32, device=dev)
        self.last_actions = torch.zeros_like(self.actions)
        self.start_dof_pos = self.default_dof_pos.expand(n, -1)
        """Motor positions each env's current episode started from (the defaults unless ``reset_joint_noise``)."""
        self.episode_length = torch.zeros(n, dtype=torch.int64, device=dev)
        self.terminated = torch.zeros(n, dtype=torch.bool, device=dev)
        self.truncated = torch.zeros(n, dtype=torch.bool, device=dev)
        self.obs = torch.zeros(n, 9 + 3 * self.num_actions, dtype=torch.float32, device=dev)

    # -- episodes ------------------------------------------------------------------------------------------------

    def reset(self) -> torch.Tensor:
        """Start a new episode in every env; returns the first observations."""
        everyone = torch.ones(self.num_envs, dtype=torch.bool, device=self.device)
        self._start_episodes(everyone)
        self.obs = self._observe(everyone, *self._read_state())
        return self.obs

    def _start_episodes(self, mask: torch.Tensor) -> None:
        """Put the envs of the bool ``mask`` back at the start: one qpos write for the whole robot, velocities
        zeroed, fresh commands, no action history. Costs the same whether the mask holds no env or all of them."""
        c = self.cfg
        if c.reset_joint_noise > 0.0:
            noise = (2.0 * torch.rand(self.num_envs, self.num_actions, device=self.device) - 1.0) * c.reset_joint_noise
            start_dof_pos = self.default_dof_pos + noise
            self.start_dof_pos = torch.where(mask[:, None], start_dof_pos, self.start_dof_pos)
            start_qpos = self.start_qpos.clone()
            start_qpos[:, self.motor_qs] = start_dof_pos
        else:
            start_qpos = self.start_qpos
        self.robot.set_qpos(start_qpos, envs_idx=mask, zero_velocity=True)
        self._draw_commands(mask)
        self.actions = self.actions.masked_fill(mask[:, None], 0.0)
        self.last_actions = self.last_actions.masked_fill(mask[:, None], 0.0)
        self.episode_length = self.episode_length.masked_fill(mask, 0)

    def _draw_commands(self, mask: torch.Tensor) -> None:
        fresh = self.command_low + self.command_span * torch.rand(self.num_envs, 3, device=self.device)
        self.commands = torch.where(mask[:, None], fresh, self.commands)

    # -- step ----------------------------------------------------------------------------------------------------

    def step(self, actions: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Advance every env by one control step; returns ``(obs, rewards, dones)``, with ``obs`` of the envs that
        ended already the first observation of their next episode (``self.terminated``/``self.truncated`` say why)."""
        c = self.cfg
        actions = torch.clip(actions, -c.action_clip, c.action_clip)
        executed = self.actions if c.action_latency else actions  # one control step of actuation delay
        self.robot.control_dofs_position(self.default_dof_pos + c.action_scale * executed, self.motor_dofs)
        self.last_actions, self.actions = self.actions, actions
        # Commands are redrawn each time an episode has run a whole resampling period (as go2-walk does it).
        length = self.episode_length
        self._draw_commands((length > 0) & (length % self.resampling_steps == 0))
        self.scene.step()
        self.episode_length += 1

        state = self._read_state()
        base_pos, base_quat, lin_vel, ang_vel, _, dof_pos, _ = state

        rewards = self._rewards(base_pos, lin_vel, ang_vel, dof_pos)
        self.terminated = self._fell(base_quat)
        self.truncated = self.episode_length >= c.max_episode_steps
        dones = self.terminated | self.truncated

        self._start_episodes(dones)
        self.obs = self._observe(dones, *state)
        return self.obs, rewards, dones

    def _read_state(self) -> tuple[torch.Tensor, ...]:
        """Base position and orientation, base-frame velocities and gravity, motor positions and velocities."""
        from genesis.utils.geom import inv_quat, transform_by_quat

        base_pos = self.robot.get_pos()
        base_quat = self.robot.get_quat()
        to_base = inv_quat(base_quat)
        lin_vel = transform_by_quat(self.robot.get_vel(), to_base)
        ang_vel = transform_by_quat(self.robot.get_ang(), to_base)
        gravity = transform_by_quat(self.gravity_world, to_base)
        dof_pos = self.robot.get_dofs_position(self.motor_dofs)
        dof_vel = self.robot.get_dofs_velocity(self.motor_dofs)
        return base_pos, base_quat, lin_vel, ang_vel, gravity, dof_pos, dof_vel

    def _fell(self, base_quat: torch.Tensor) -> torch.Tensor:
        from genesis.utils.geom import quat_to_xyz

        roll_pitch_yaw = quat_to_xyz(base_quat, rpy=True)
        return (roll_pitch_yaw[:, 0].abs() > self.cfg.max_roll) | (roll_pitch_yaw[:, 1].abs() > self.cfg.max_pitch)

    def _rewards(self, base_pos, lin_vel, ang_vel, dof_pos) -> torch.Tensor:
        terms = self.reward_terms(base_pos, lin_vel, ang_vel, dof_pos)
        rewards = torch.zeros(self.num_envs, dtype=torch.float32, device=self.device)
        for name, value in terms.items():
            rewards += self.reward_weights[name] * value
        return rewards

    def reward_terms(self, base_pos, lin_vel, ang_vel, dof_pos) -> dict[str, torch.Tensor]:
        """Each term before weighting, per env."""
        c = self.cfg
        lin_error = torch.sum(torch.square(self.commands[:, :2] - lin_vel[:, :2]), dim=1)
        ang_error = torch.square(self.commands[:, 2] - ang_vel[:, 2])
        return {
            "tracking_lin_vel": torch.exp(-lin_error / c.tracking_sigma),
            "tracking_ang_vel": torch.exp(-ang_error / c.tracking_sigma),
            "lin_vel_z": torch.square(lin_vel[:, 2]),
            "base_height": torch.square(base_pos[:, 2] - c.base_height_target),
            "action_rate": torch.sum(torch.square(self.actions - self.last_actions), dim=1),
            "similar_to_default": torch.sum(torch.abs(dof_pos - self.default_dof_pos), dim=1),
        }

    def _observe(self, new_episode, base_pos, base_quat, lin_vel, ang_vel, gravity, dof_pos, dof_vel):
        """The 45 observations; for the envs of ``new_episode`` from the state their episode starts in (standing
        upright and still), which is what Genesis would report right after the reset."""
        c, fresh = self.cfg, new_episode[:, None]
        ang_vel = ang_vel.masked_fill(fresh, 0.0)
        gravity = torch.where(fresh, self.gravity_world, gravity)
        dof_pos = torch.where(fresh, self.start_dof_pos, dof_pos)
        dof_vel = dof_vel.masked_fill(fresh, 0.0)
        obs = torch.cat(
            [
                ang_vel * c.obs_scale_ang_vel,
                gravity,
                self.commands * self.command_scale,
                (dof_pos - self.default_dof_pos) * c.obs_scale_dof_pos,
                dof_vel * c.obs_scale_dof_vel,
                self.actions,
            ],
            dim=1,
        )
        return torch.clip(obs, -c.obs_clip, c.obs_clip)

    def close(self) -> None:
        self.scene.destroy()


def check_same_scene_options(reference_options, go2_walk_options) -> list[str]:
    """Differences between the sim and rigid options (``scene.options``) of two scenes; empty when both compile the
    same kernels."""
    differences = []
    for part in ("sim", "rigid"):
        ours, theirs = getattr(reference_options, part), getattr(go2_walk_options, part)
        for field in type(ours).model_fields:
            if getattr(ours, field) != getattr(theirs, field):
                differences.append(f"{part}.{field}: {getattr(ours, field)!r} vs {getattr(theirs, field)!r}")
    return differences


# -- self-check against go2-walk ---------------------------------------------------------------------------------


def go2_walk_formulas(env: Go2ReferenceEnv) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Observations, rewards and terminations as go2-walk's module computes them, evaluated on the reference's current
    Genesis state, commands and actions (its own quaternion helpers, its own term list)."""
    from gs_gym.tasks import go2_walk as g

    c, robot = env.cfg, env.robot
    quat = robot.get_quat()
    lin_vel = g.rotate_inverse(quat, robot.get_vel())
    ang_vel = g.rotate_inverse(quat, robot.get_ang())
    gravity = g.rotate_inverse(quat, env.gravity_world)
    dof_pos, dof_vel = robot.get_dofs_position(env.motor_dofs), robot.get_dofs_velocity(env.motor_dofs)
    scale = torch.tensor((c.obs_scale_lin_vel, c.obs_scale_lin_vel, c.obs_scale_ang_vel), device=env.device)
    obs = torch.cat(
        [
            ang_vel * c.obs_scale_ang_vel,
            gravity,
            env.commands * scale,
            (dof_pos - env.default_dof_pos) * c.obs_scale_dof_pos,
            dof_vel * c.obs_scale_dof_vel,
            env.actions,
        ],
        dim=1,
    ).clamp(-c.obs_clip, c.obs_clip)
    terms = {
        "tracking_lin_vel": torch.exp(
            -torch.sum((env.commands[:, :2] - lin_vel[:, :2]) ** 2, dim=1) / c.tracking_sigma
        ),
        "tracking_ang_vel": torch.exp(-((env.commands[:, 2] - ang_vel[:, 2]) ** 2) / c.tracking_sigma),
        "lin_vel_z": lin_vel[:, 2] ** 2,
        "base_height": (robot.get_pos()[:, 2] - c.base_height_target) ** 2,
        "action_rate": torch.sum((env.actions - env.last_actions) ** 2, dim=1),
        "similar_to_default": torch.sum(torch.abs(dof_pos - env.default_dof_pos), dim=1),
    }
    rewards = sum(getattr(c, f"reward_{name}") * value for name, value in terms.items()) * c.dt
    roll, pitch = g.roll_pitch(quat)
    return obs, rewards, (roll.abs() > c.max_roll) | (pitch.abs() > c.max_pitch)


def build_go2_walk(config: Go2WalkConfig, num_envs: int, device: torch.device):
    """go2-walk built through the task API (``Task(config, context)``), reset everywhere; raises if it cannot be."""
    from gs_gym.tasks.base import TaskContext
    from gs_gym.tasks.go2_walk import Go2Walk

    task = Go2Walk(config, TaskContext.create(num_envs, 0, device, base_seed=0))
    task.build()
    task.reset_envs(torch.ones(num_envs, dtype=torch.bool, device=device))
    task.read_state()
    return task


def step_go2_walk(task, actions: torch.Tensor) -> None:
    """One step of go2-walk's hooks as the shard drives them (no env ended, so ``reset_envs`` gets an empty mask)."""
    task.apply_actions(actions)
    task.simulate()
    task.context.episode_steps.add_(1)
    task.reset_envs(torch.zeros(task.num_envs, dtype=torch.bool, device=task.device))
    task.read_state()


def largest(a: torch.Tensor, b: torch.Tensor) -> float:
    return (a.float() - b.float()).abs().max().item()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backend", default="cpu", choices=("cpu", "gpu"), help="Genesis backend")
    parser.add_argument("--n-envs", type=int, default=16, help="envs in the scene")
    parser.add_argument("--steps", type=int, default=30, help="steps compared after the reset, with small actions")
    parser.add_argument(
        "--action-scale",
        type=float,
        default=0.5,
        help="those steps' random actions are uniform in +-this (small: no robot falls)",
    )
    parser.add_argument(
        "--fall-steps",
        type=int,
        default=60,
        help="then steps with actions over the whole action box, so that robots fall and reset",
    )
    parser.add_argument(
        "--resampling-time-s",
        type=float,
        default=0.1,
        help="go2-walk's resampling_time_s for the check (its default, 10 s, would not show the "
        "redrawing of commands within the check; every other setting is the default)",
    )
    parser.add_argument("--tolerance", type=float, default=1e-4, help="largest allowed difference")
    parser.add_argument("--no-lockstep", action="store_true", help="skip building go2-walk for the lockstep check")
    args = parser.parse_args()

    from gs_gym.tasks.runtime import init_genesis

    init_genesis(args.backend)
    torch.manual_seed(0)
    config = Go2WalkConfig(resampling_time_s=args.resampling_time_s)
    start = time.perf_counter()
    env = Go2ReferenceEnv(args.n_envs, config)
    print(f"reference built in {time.perf_counter() - start:.1f} s ({args.n_envs} envs, {env.device})")
    c = env.cfg
    print(
        f"from Go2WalkConfig(): dt {c.dt}, substeps {c.substeps}, kp {c.kp}, kv {c.kv}, action clip {c.action_clip}"
        f" scale {c.action_scale} latency {c.action_latency}, max_episode_steps {c.max_episode_steps}, "
        f"max roll/pitch {math.degrees(c.max_roll):.1f}/{math.degrees(c.max_pitch):.1f} deg, commands redrawn "
        f"every {env.resampling_steps} steps (resampling_time_s {c.resampling_time_s} for this check)"
    )
    print("reward weights x dt:", {k: round(v, 6) for k, v in env.reward_weights.items()})
    worst: dict[str, float] = {}

    def record(name: str, value: float) -> None:
        worst[name] = max(worst.get(name, 0.0), value)

    obs = env.reset()
    formula_obs, _, _ = go2_walk_formulas(env)
    print("\nfirst observation after reset, env 0:")
    print("  reference:", [round(x, 4) for x in obs[0].tolist()])
    print("  go2-walk formulas on the reference's state:", [round(x, 4) for x in formula_obs[0].tolist()])
    record("formulas: observations", largest(obs, formula_obs))

    task = None
    if not args.no_lockstep:
        try:
            task = build_go2_walk(config, args.n_envs, env.device)
        except Exception as error:
            print(
                f"\nlockstep check skipped: go2-walk cannot be built with the task API ({type(error).__name__}: "
                f"{error})"
            )
    if task is not None:
        differences = check_same_scene_options(env.scene.options, task.scene.options)
        task.commands = env.commands.clone()  # the two draw commands from different generators
        task_obs = task.observe()
        print(
            "  go2-walk's own scene after its reset, given the same commands:",
            [round(x, 4) for x in task_obs[0].tolist()],
        )
        print("scene options of the two scenes:", differences or "identical")
        record("lockstep: scene options differ", float(bool(differences)))
        record("lockstep: observations", largest(obs, task_obs))

    print(f"\n{args.steps} steps with actions uniform in +-{args.action_scale} (compared until an env ends):")
    redraws = 0
    for step in range(args.steps):
        actions = (2.0 * torch.rand(args.n_envs, env.num_actions, device=env.device) - 1.0) * args.action_scale
        commands_before = env.commands.clone()
        obs, rewards, dones = env.step(actions)
        if bool(dones.any()):
            print(f"  step {step + 1}: an env ended; stopping the comparison here")
            break
        f_obs, f_rewards, f_terminated = go2_walk_formulas(env)
        record("formulas: observations", largest(obs, f_obs))
        record("formulas: rewards", largest(rewards, f_rewards))
        record("formulas: terminated (envs)", float((env.terminated != f_terminated).sum().item()))
        redrawn = (env.commands != commands_before).any(dim=1)
        redraws += int(redrawn.sum().item())
        if task is not None:
            task.commands = commands_before.clone()
            step_go2_walk(task, actions)
            task_redrawn = (task.commands != commands_before).any(dim=1)
            record("lockstep: envs whose commands were redrawn on another step", float((redrawn != task_redrawn).sum()))
            task.commands = env.commands.clone()  # same values from here on
            t_obs, t_rewards, t_terminated = task.observe(), task.compute_rewards(), task.compute_terminated()
            record("lockstep: observations", largest(obs, t_obs))
            record("lockstep: rewards", largest(rewards, t_rewards))
            record("lockstep: terminated (envs)", float((env.terminated != t_terminated).sum().item()))
        if step < 3 or step == args.steps - 1:
            print(
                f"  step {step + 1}: rewards of envs 0-3: reference {[round(x, 5) for x in rewards[:4].tolist()]}, "
                f"go2-walk formulas {[round(x, 5) for x in f_rewards[:4].tolist()]}"
                + ("" if task is None else f", go2-walk lockstep {[round(x, 5) for x in t_rewards[:4].tolist()]}")
            )
    print(f"  commands redrawn {redraws} times (envs x steps)")

    # Robots that fall: after a step, Genesis holds the reset state of the envs that ended and the stepped state of
    # the others, so go2-walk's formulas on it must give the returned observations of every env.
    ends = 0
    for _ in range(args.fall_steps):
        actions = (2.0 * torch.rand(args.n_envs, env.num_actions, device=env.device) - 1.0) * c.action_clip
        obs, rewards, dones = env.step(actions)
        record("formulas after resets: observations", largest(obs, go2_walk_formulas(env)[0]))
        ends += int(dones.sum().item())
    print(
        f"\n{args.fall_steps} steps with actions uniform in the whole action box (+-{c.action_clip}): {ends} episode "
        f"ends ({ends / args.n_envs:.2f} per env)"
    )

    print("\nlargest differences, reference vs go2-walk:")
    for name, value in worst.items():
        print(f"  {name}: {value:.2e}")
    verdict = "PASS" if max(worst.values()) <= args.tolerance else "FAIL"
    print(f"{verdict} (tolerance {args.tolerance:.0e})")
    env.close()
    sys.exit(0 if verdict == "PASS" else 1)


if __name__ == "__main__":
    main()
