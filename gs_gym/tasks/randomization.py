"""Domain randomization shared by tasks: per-env friction, added mass, PD gains, observation noise and pushes.

Everything is off by default, and a feature that is off costs nothing: no draw, no Genesis call. A task config that
subclasses ``RandomizedTaskConfig`` carries a nested, frozen ``RandomizationConfig`` (overridable through
``task_kwargs={"randomization": {...}}`` or a ``RandomizationConfig``); the task owns one ``DomainRandomizer``, built
on its ``EnvRandom``, and calls it from its hooks:

- ``rigid_options()`` before building: per-env masses and gains need Genesis' batched link / dof info, which is only
  switched on when the matching randomization is enabled (it costs memory bandwidth and compiles other kernels).
- ``attach(...)`` after ``scene.build``: names the robot, its PD dofs and nominal gains, the link that receives the
  added mass, the entities whose contact friction is scaled, the floating-base dofs that pushes kick and the
  per-component observation noise.
- ``reset(mask)`` from ``reset_envs``: draws friction, mass and gains for the masked envs only.
- ``push(episode_steps)`` once per control step: kicks the envs whose episode step is a multiple of the interval.
- ``draw_obs_noise(mask)`` once per control step (all envs) and at reset (the masked envs), and ``add_obs_noise(obs)``
  in ``observe``: the noise is drawn where the step count is fixed, so ``observe`` stays pure and an env's random
  stream does not depend on how often other envs make the shard observe.

``has_reset_draws``, ``has_pushes`` and ``has_obs_noise`` say which of these do anything, for callers that would
otherwise prepare work for them. Nothing here waits for the device: draws and writes are by mask, never by index.

How Genesis 1.4.5 stores these properties, and how its setters take a boolean ``envs_idx`` (read from its rigid
solver and checked on its CPU backend):

- friction: a contact uses ``max(friction_a * ratio_a, friction_b * ratio_b)``; the ratios live in the per-env
  dynamic state (``set_geoms_friction_ratio``), the friction coefficients themselves are shared by every env. The
  sampled multiplier is therefore written as the ratio of every geom of the robot *and* of the ground, so that it
  scales the contact friction whichever side has the larger coefficient.
- mass: ``set_links_mass``, per env only with ``RigidOptions(batch_links_info=True)``. The inertia of the link is left
  as it is (a point payload at its center of mass); the setter recomputes the inverse weights of the envs it writes.
- PD gains: ``set_dofs_kp`` / ``set_dofs_kv``, per env only with ``RigidOptions(batch_dofs_info=True)`` (without it
  Genesis silently writes every env when zero-copy is available).
- pushes: a random change of the floating base's horizontal velocity (``set_dofs_velocity`` on its x/y dofs).

Of these setters only ``set_dofs_velocity`` (over a contiguous range of dofs) takes a boolean ``envs_idx`` with a full
``(n_envs, ...)`` value whose masked rows it writes (so does the entity's ``set_qpos`` over all its qpos, which tasks
use to reset). The other four turn a mask into indices (``nonzero``, a host sync) and want one value row per selected
env, whose count the host would have to read. They are therefore called with ``envs_idx=None`` and a full value that
holds the fresh draw in the masked rows and the values already in place elsewhere (``torch.where``): one call, no
sync, the other envs rewritten with what they hold (for the mass, every env's inverse weights are recomputed, to the
same values: the price of added-mass randomization, paid on every call of ``reset``). Index lists are handed over as
ranges or device tensors, since Genesis copies a Python list to the device on every call (on CUDA a copy that waits
for the device).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence
from typing import Any

import torch

from gs_gym.tasks.base import TaskConfig
from gs_gym.tasks.random import EnvRandom

Range = tuple[float, float]
GENESIS_INDEX_DTYPE = torch.int32
"""Genesis' ``gs.tc_int``: index tensors of this dtype reach its kernels without a conversion."""


def _as_range(name: str, value: Any, *, positive: bool = False) -> Range | None:
    if value is None:
        return None
    try:
        low, high = (float(v) for v in value)
    except (TypeError, ValueError):
        raise ValueError(f"randomization.{name}: expected a (low, high) pair or None, got {value!r}") from None
    if not (math.isfinite(low) and math.isfinite(high)) or low > high:
        raise ValueError(f"randomization.{name}: expected finite low <= high, got {value!r}")
    if positive and low <= 0.0:
        raise ValueError(f"randomization.{name}: expected positive values, got {value!r}")
    return (low, high)


@dataclasses.dataclass(frozen=True)
class RandomizationConfig:
    """Domain-randomization ranges; ``None`` (or 0) disables an item. All are off by default."""

    friction_range: Range | None = None
    """Per-env multiplier of the contact friction (robot and ground), drawn uniformly at reset."""
    added_mass_range: Range | None = None
    """Per-env mass in kg added to the task's mass link (Go2: base; Franka: hand, a payload), drawn at reset."""
    kp_scale_range: Range | None = None
    """Per-env, per-dof multiplier of the nominal PD stiffness, drawn at reset (the gain is drawn uniformly between
    the nominal gain times each end)."""
    kv_scale_range: Range | None = None
    """Per-env, per-dof multiplier of the nominal PD damping, drawn at reset (like ``kp_scale_range``)."""
    obs_noise_scale: float = 0.0
    """Multiplier of the task's per-component Gaussian observation-noise std (fresh noise every control step)."""
    push_interval_s: float | None = None
    """Push each env every this many seconds of its episode (floating-base tasks only)."""
    push_velocity: float = 1.0
    """A push changes the base's x and y velocity (m/s) by independent uniform draws in ``[-v, v]``."""

    def __post_init__(self) -> None:
        set_ = object.__setattr__
        set_(self, "friction_range", _as_range("friction_range", self.friction_range, positive=True))
        set_(self, "added_mass_range", _as_range("added_mass_range", self.added_mass_range))
        set_(self, "kp_scale_range", _as_range("kp_scale_range", self.kp_scale_range, positive=True))
        set_(self, "kv_scale_range", _as_range("kv_scale_range", self.kv_scale_range, positive=True))
        if not (math.isfinite(self.obs_noise_scale) and self.obs_noise_scale >= 0.0):
            raise ValueError(
                f"randomization.obs_noise_scale: expected a finite value >= 0, got {self.obs_noise_scale!r}"
            )
        if self.push_interval_s is not None and not self.push_interval_s > 0.0:
            raise ValueError(
                f"randomization.push_interval_s: expected a positive value or None, got {self.push_interval_s!r}"
            )
        if not (math.isfinite(self.push_velocity) and self.push_velocity >= 0.0):
            raise ValueError(f"randomization.push_velocity: expected a finite value >= 0, got {self.push_velocity!r}")

    @property
    def enabled(self) -> bool:
        return any(
            (
                self.friction_range is not None,
                self.added_mass_range is not None,
                self.kp_scale_range is not None,
                self.kv_scale_range is not None,
                self.obs_noise_scale > 0.0,
                self.push_interval_s is not None,
            )
        )


def as_randomization_config(value: RandomizationConfig | Mapping[str, Any] | None) -> RandomizationConfig:
    """Accept a ``RandomizationConfig``, a mapping of its fields (naming unknown keys in the error) or None (off)."""
    if value is None:
        return RandomizationConfig()
    if isinstance(value, RandomizationConfig):
        return value
    if isinstance(value, Mapping):
        known = {f.name for f in dataclasses.fields(RandomizationConfig)}
        unknown = sorted(set(value) - known)
        if unknown:
            raise ValueError(f"randomization: unknown option(s) {unknown}; expected some of {sorted(known)}")
        return RandomizationConfig(**value)
    raise TypeError(f"randomization: expected a RandomizationConfig, a mapping or None, got {type(value).__name__}")


@dataclasses.dataclass(frozen=True)
class RandomizedTaskConfig(TaskConfig):
    """A task config with a nested ``randomization`` (a ``RandomizationConfig``, or a dict of its fields)."""

    randomization: RandomizationConfig = RandomizationConfig()

    def __post_init__(self) -> None:
        object.__setattr__(self, "randomization", as_randomization_config(self.randomization))


def genesis_indices(
    indices: Sequence[int], device: torch.device, dtype: torch.dtype = torch.int64
) -> range | torch.Tensor:
    """``indices`` in a form Genesis takes without copying it to the device on every call: a ``range`` when they are
    contiguous and increasing (Genesis turns it into a slice), else a tensor on ``device``."""
    indices = list(indices)
    if indices and indices == list(range(indices[0], indices[0] + len(indices))):
        return range(indices[0], indices[0] + len(indices))
    return torch.tensor(indices, dtype=dtype, device=device)


class DomainRandomizer:
    """Applies a ``RandomizationConfig`` to one robot of a batched scene; see the module docstring for the protocol.

    ``random`` is the task's ``EnvRandom``: the randomizer draws from it (with the caller's mask) and takes its
    ``num_envs`` and ``device``. After ``reset`` the drawn values of every env are kept in ``friction``,
    ``added_mass``, ``kp`` and ``kv`` (nominal values for envs never randomized), and the current observation noise
    in ``obs_noise`` (None when noise is off).
    """

    def __init__(self, config: RandomizationConfig, random: EnvRandom, control_dt: float) -> None:
        self.config = config
        self.random = random
        self.num_envs = random.num_envs
        self.device = random.device
        self.push_interval_steps = (
            None if config.push_interval_s is None else max(1, round(config.push_interval_s / control_dt))
        )
        self.robot: Any = None
        self.obs_noise: torch.Tensor | None = None

    # -- what is switched on -----------------------------------------------------------------------------------

    @property
    def has_reset_draws(self) -> bool:
        """Whether ``reset`` draws and writes anything (friction, added mass or PD gains)."""
        c = self.config
        return any(r is not None for r in (c.friction_range, c.added_mass_range, c.kp_scale_range, c.kv_scale_range))

    @property
    def has_pushes(self) -> bool:
        """Whether ``push`` kicks anyone."""
        return self.push_interval_steps is not None

    @property
    def has_obs_noise(self) -> bool:
        """Whether observations get noise (``draw_obs_noise`` draws, ``add_obs_noise`` adds)."""
        return self.config.obs_noise_scale > 0.0

    def rigid_options(self) -> dict[str, bool]:
        """The ``gs.options.RigidOptions`` flags this randomization needs (only those that must be switched on)."""
        options = {}
        if self.config.added_mass_range is not None:
            options["batch_links_info"] = True
        if self.config.kp_scale_range is not None or self.config.kv_scale_range is not None:
            options["batch_dofs_info"] = True
        return options

    def attach(
        self,
        robot: Any,
        *,
        pd_dofs: Sequence[int],
        kp: torch.Tensor,
        kv: torch.Tensor,
        mass_link: str | None = None,
        friction_entities: Sequence[Any] = (),
        push_dofs: Sequence[int] | None = None,
        obs_noise_std: torch.Tensor | None = None,
    ) -> None:
        """Bind the built scene's robot. Raises ``ValueError`` for a randomization the task cannot support."""
        config, n, device = self.config, self.num_envs, self.device
        self.robot = robot
        self.pd_dofs = list(pd_dofs)
        self._pd_dofs_idx = genesis_indices(self.pd_dofs, device)
        self.nominal_kp = torch.as_tensor(kp, dtype=torch.float32, device=device).expand(len(self.pd_dofs)).clone()
        self.nominal_kv = torch.as_tensor(kv, dtype=torch.float32, device=device).expand(len(self.pd_dofs)).clone()
        self.kp = self.nominal_kp.expand(n, -1).clone()
        self.kv = self.nominal_kv.expand(n, -1).clone()
        # Gains are drawn uniformly between the nominal gain times the range's ends (one draw, no product after it).
        if config.kp_scale_range is not None:
            self._kp_bounds = tuple(self.nominal_kp * scale for scale in config.kp_scale_range)
        if config.kv_scale_range is not None:
            self._kv_bounds = tuple(self.nominal_kv * scale for scale in config.kv_scale_range)
        self.friction = torch.ones(n, dtype=torch.float32, device=device)
        self.added_mass = torch.zeros(n, dtype=torch.float32, device=device)

        if config.friction_range is not None and not friction_entities:
            raise ValueError("randomization.friction_range: this task has no contacts whose friction could be scaled")
        self.friction_entities = list(friction_entities)
        if config.friction_range is not None:
            # The solver's setter spans entities (one call for robot and ground); the entity's builds its index
            # tensors from lists on every call.
            geoms = [geom.idx for entity in self.friction_entities for geom in entity.geoms]
            self._friction_geoms = torch.tensor(geoms, dtype=GENESIS_INDEX_DTYPE, device=device)

        self.mass_link_idx: int | None = None
        if config.added_mass_range is not None:
            if mass_link is None:
                raise ValueError("randomization.added_mass_range: this task names no link to add mass to")
            self.mass_link_idx = robot.get_link(mass_link).idx_local
            self._mass_link = torch.tensor([self.mass_link_idx], dtype=GENESIS_INDEX_DTYPE, device=device)
            masses = robot.get_links_mass([self.mass_link_idx])
            self.nominal_mass = float(masses.reshape(-1)[0])

        if config.push_interval_s is not None and push_dofs is None:
            raise ValueError("randomization.push_interval_s: this task has no floating base to push")
        self.push_dofs = None if push_dofs is None else list(push_dofs)
        if config.push_interval_s is not None:
            assert self.push_dofs is not None  # checked above
            self._push_dofs_idx = genesis_indices(self.push_dofs, device)
            if not isinstance(self._push_dofs_idx, range):
                # A masked velocity write needs a contiguous range of dofs (else Genesis turns the mask into indices).
                raise ValueError(f"randomization.push_interval_s: push dofs must be contiguous, got {self.push_dofs}")

        if config.obs_noise_scale > 0.0:
            if obs_noise_std is None:
                raise ValueError("randomization.obs_noise_scale: this task defines no observation noise")
            std = torch.as_tensor(obs_noise_std, dtype=torch.float32, device=device)
            self.obs_noise_std = std * config.obs_noise_scale
            self.obs_noise = torch.zeros(n, self.obs_noise_std.numel(), dtype=torch.float32, device=device)

    # -- reset-time properties ---------------------------------------------------------------------------------

    def reset(self, mask: torch.Tensor) -> None:
        """Draw and apply friction, added mass and PD gains for the envs where the bool ``mask`` is True (in that
        fixed order, each only when enabled); one Genesis call per enabled property, none when all are off."""
        config, random, rows = self.config, self.random, mask.unsqueeze(1)
        if config.friction_range is not None:
            self.friction = torch.where(mask, random.uniform(mask, (), *config.friction_range), self.friction)
            ratio = self.friction.unsqueeze(1).expand(-1, len(self._friction_geoms))
            self.robot.solver.set_geoms_friction_ratio(ratio, self._friction_geoms, envs_idx=None)
        if config.added_mass_range is not None:
            self.added_mass = torch.where(mask, random.uniform(mask, (), *config.added_mass_range), self.added_mass)
            self.robot.set_links_mass((self.nominal_mass + self.added_mass).unsqueeze(1), self._mass_link)
        dofs = len(self.pd_dofs)
        if config.kp_scale_range is not None:
            self.kp = torch.where(rows, random.uniform(mask, (dofs,), *self._kp_bounds), self.kp)
            self.robot.set_dofs_kp(self.kp, self._pd_dofs_idx)
        if config.kv_scale_range is not None:
            self.kv = torch.where(rows, random.uniform(mask, (dofs,), *self._kv_bounds), self.kv)
            self.robot.set_dofs_kv(self.kv, self._pd_dofs_idx)

    # -- per-step events ---------------------------------------------------------------------------------------

    def push(self, episode_steps: torch.Tensor) -> torch.Tensor | None:
        """Kick the envs whose episode step is a positive multiple of the push interval (a kick drawn with that
        mask, added to the base velocity by one masked write) and return the bool mask; None, and no work, when
        pushes are off."""
        interval = self.push_interval_steps
        if interval is None:
            return None
        due = (episode_steps > 0) & (episode_steps % interval == 0)
        v = self.config.push_velocity
        assert self.push_dofs is not None  # pushes are on, so attach() had push dofs
        kick = self.random.uniform(due, (len(self.push_dofs),), -v, v)
        velocity = self.robot.get_dofs_velocity(self._push_dofs_idx)
        self.robot.set_dofs_velocity(velocity + kick, self._push_dofs_idx, envs_idx=due)
        return due

    def draw_obs_noise(self, mask: torch.Tensor) -> None:
        """Draw fresh observation noise for the envs where ``mask`` is True (no-op when noise is off)."""
        if self.obs_noise is None:
            return
        noise = self.random.normal(mask, (self.obs_noise_std.numel(),), self.obs_noise_std)
        torch.where(mask.unsqueeze(1), noise, self.obs_noise, out=self.obs_noise)  # in place: Task.capturable

    def add_obs_noise(self, observations: torch.Tensor) -> torch.Tensor:
        return observations if self.obs_noise is None else observations + self.obs_noise

    # -- inspection --------------------------------------------------------------------------------------------

    def read_friction_ratio(self) -> torch.Tensor:
        """The friction ratio Genesis holds for every geom of the friction entities, ``(num_envs, n_geoms)``."""
        solver = self.robot.solver
        geoms = [g.idx for entity in self.friction_entities for g in entity.geoms]
        return solver.get_geoms_friction_ratio(geoms)
