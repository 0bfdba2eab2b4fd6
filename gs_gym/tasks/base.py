"""The task API: a handful of batched tensor hooks over one Genesis scene.

A task knows Genesis and nothing about processes, step loops or autoreset. ``gs_gym.vector.shard.EnvShard`` drives
it: ``build`` once, then per step ``apply_actions`` -> ``simulate`` -> ``reset_envs(mask)`` (the envs whose episode
ended on the previous step; often none) -> ``read_state`` -> ``observe`` / ``compute_rewards`` /
``compute_terminated`` / ``compute_truncated``. All tensors are batched over the task's ``num_envs`` and live on its
``device``.

Nothing on that path may wait for the device: no ``nonzero()``, ``.item()``, ``.tolist()`` or ``bool(tensor)``.
Resets come as boolean masks (Genesis 1.4.5 setters take them as ``envs_idx``), so a reset of no env costs the same
launches as a reset of some, and the host never has to look at which envs are done.

A hook's result need stay valid only until the next hook call: a task may return the same tensor every step,
refilled in place. The shard never writes into what a hook returned. A task whose ``observe``, ``compute_rewards``
and ``compute_terminated`` make a new tensor on every call says so (``Task.fresh_outputs``), and the env in process
hands those tensors out as they are instead of cloning them for ``copy=True``.
"""

from __future__ import annotations

import dataclasses
import math
from abc import ABC, abstractmethod
from typing import Any, ClassVar

import gymnasium as gym
import torch

from gs_gym.tasks.random import EnvRandom


def require_numbers(config: object, *, positive: tuple[str, ...] = (), non_negative: tuple[str, ...] = ()) -> None:
    """Check that the named fields of ``config`` are finite real numbers, > 0 (``positive``) or >= 0
    (``non_negative``); the error names the field, its value and the allowed range."""
    for names, bound, ok in ((positive, "> 0", lambda v: v > 0), (non_negative, ">= 0", lambda v: v >= 0)):
        for name in names:
            value = getattr(config, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise TypeError(f"{name}: expected a finite number {bound}, got {value!r}")
            if not (math.isfinite(value) and ok(value)):
                raise ValueError(f"{name}: expected a finite number {bound}, got {value!r}")


@dataclasses.dataclass(frozen=True)
class TaskConfig:
    """Settings every task has; subclasses add their own fields (all overridable through ``task_kwargs``)."""

    max_episode_steps: int = 500
    """Episodes are truncated after this many steps."""

    def __post_init__(self) -> None:
        if isinstance(self.max_episode_steps, bool) or not isinstance(self.max_episode_steps, int):
            raise TypeError(f"max_episode_steps: expected an int >= 1, got {self.max_episode_steps!r}")
        if self.max_episode_steps < 1:
            raise ValueError(f"max_episode_steps: expected an int >= 1, got {self.max_episode_steps}")


@dataclasses.dataclass(frozen=True)
class TaskContext:
    """What the shard hands its task: which envs of the vector env it holds, and the per-env state the shard owns.

    The tensors are the shard's own (the dataclass is frozen, the tensors are not): tasks read them and draw from
    ``random``; only the shard advances ``episode_steps``, though an adapter may overwrite it between steps (rsl_rl
    starts episodes at random lengths this way).
    """

    num_envs: int
    env_offset: int
    """Global index, in the vector env, of this task's env 0."""
    device: torch.device
    random: EnvRandom
    """Per-env counter-based streams: env ``i``'s numbers do not depend on how envs are split over workers."""
    episode_steps: torch.Tensor
    """``(num_envs,)`` int64: control steps since each env's last reset (0 right after a reset)."""
    render_mode: str | None = None
    """One of the task's ``render_modes``, or None: then ``build`` adds no camera and ``render`` returns None."""

    @classmethod
    def create(
        cls,
        num_envs: int,
        env_offset: int,
        device: torch.device | str,
        base_seed: int,
        render_mode: str | None = None,
    ) -> TaskContext:
        """A context with fresh counters, env ``g`` (global index) seeded with ``base_seed + g``."""
        device = torch.device(device)
        random = EnvRandom(num_envs, env_offset, device)
        random.seed_range(base_seed)
        steps = torch.zeros(num_envs, dtype=torch.int64, device=device)
        return cls(num_envs, env_offset, device, random, steps, render_mode)


class Task(ABC):
    """Base class of batched tasks. Subclasses set ``name`` and ``config_class`` and implement the hooks."""

    name: ClassVar[str]
    config_class: ClassVar[type[TaskConfig]] = TaskConfig
    render_modes: ClassVar[tuple[str, ...]] = ()
    """The ``render_mode`` values ``render`` supports (the env's ``metadata["render_modes"]``)."""
    fresh_outputs: ClassVar[bool] = False
    """True when ``observe``, ``compute_rewards`` and ``compute_terminated`` return a tensor made by that call (a
    ``torch.cat``, an arithmetic result), which the task neither keeps nor reads later. The env in process
    (``num_workers=0``, ``copy=True``) then returns those very tensors, as copies no later step touches, instead of
    cloning them. It covers the hooks of the class that sets it: a subclass that overrides one of the three hooks
    must set it again (``outputs_are_fresh``). False (the default) is always safe: the outputs are cloned."""
    capturable: ClassVar[bool] = False
    """True when ``observe``, ``compute_rewards``, ``compute_terminated`` and ``compute_truncated`` can be captured
    once in a CUDA graph and replayed at every step (``cuda_graph=True``, with the env's bookkeeping after them): they
    launch torch work on the task's device only (no Genesis call, no random draw, no host sync, no Python decision on
    a tensor's values) and read only tensors that keep their storage from step to step: the task writes its state into
    them in place (``copy_``, ``out=``, in-place operations) and reads Genesis's through ``gs_gym.tasks.state_views``.
    A replay recomputes the outputs from what those tensors hold then; one replaced instead of written would be read
    stale, which the env's first replays check against the hooks (``gs_gym.vector.capture``). Like ``fresh_outputs``
    it covers the hooks of the class that sets it (``outputs_are_capturable``), ``compute_truncated`` included."""

    scene: Any
    """The Genesis scene, set by ``build``."""

    def __init__(self, config: TaskConfig, context: TaskContext) -> None:
        self.config = config
        self.context = context

    @property
    def num_envs(self) -> int:
        return self.context.num_envs

    @property
    def device(self) -> torch.device:
        return self.context.device

    @property
    def random(self) -> EnvRandom:
        return self.context.random

    @property
    def episode_steps(self) -> torch.Tensor:
        return self.context.episode_steps

    @classmethod
    def make_config(cls, **overrides: Any) -> TaskConfig:
        """Build this task's config from keyword overrides, naming unknown keys in the error."""
        known = {f.name for f in dataclasses.fields(cls.config_class)}
        unknown = sorted(set(overrides) - known)
        if unknown:
            raise ValueError(
                f"task_kwargs: unknown option(s) {unknown} for task {cls.name!r}; expected some of {sorted(known)}"
            )
        return cls.config_class(**overrides)

    @classmethod
    def outputs_are_fresh(cls) -> bool:
        """Whether ``fresh_outputs`` holds for this class's ``observe``, ``compute_rewards`` and
        ``compute_terminated``: only when the class that set it defines each of those hooks or inherits it, so that a
        subclass overriding a hook of a task that declared fresh outputs (say, to refill a buffer) does not inherit
        the promise."""
        return cls._declared_for_output_hooks("fresh_outputs")

    @classmethod
    def outputs_are_capturable(cls) -> bool:
        """Whether ``capturable`` holds for this class's output hooks and ``compute_truncated``, by
        ``outputs_are_fresh``'s rule."""
        return cls._declared_for_output_hooks("capturable", "compute_truncated")

    @classmethod
    def _declared_for_output_hooks(cls, flag: str, *more_hooks: str) -> bool:
        """The class attribute ``flag`` as the nearest class in the MRO that sets it, unless one of the three output
        hooks (or of ``more_hooks``) is overridden below that class (then False: the override did not make the
        promise)."""
        mro = cls.__mro__
        declared = next(index for index, klass in enumerate(mro) if flag in vars(klass))
        for hook in ("observe", "compute_rewards", "compute_terminated", *more_hooks):
            if next(index for index, klass in enumerate(mro) if hook in vars(klass)) < declared:
                return False  # overridden below the declaration
        return bool(vars(mro[declared])[flag])

    @classmethod
    @abstractmethod
    def spaces(cls, config: TaskConfig) -> tuple[gym.spaces.Box, gym.spaces.Box]:
        """The single-env (observation, action) spaces, known without building a scene."""

    @abstractmethod
    def build(self) -> None:
        """Create and build the Genesis scene for ``num_envs`` envs (``gs.init`` has run already)."""

    @abstractmethod
    def apply_actions(self, actions: torch.Tensor) -> None:
        """Turn a float32 ``(num_envs, *action_shape)`` batch into controls for the next ``simulate``."""

    def simulate(self) -> None:
        """Advance the physics by one control step (one ``scene.step()`` unless overridden)."""
        self.scene.step()

    @abstractmethod
    def reset_envs(self, mask: torch.Tensor) -> None:
        """Start new episodes where the ``(num_envs,)`` bool ``mask`` is True; leave every other env untouched.

        Called on every step with the envs whose episode ended on the previous one, usually a mask with few or no
        True entries: work by mask (Genesis setters with ``envs_idx=mask``, ``torch.where``), never by ``nonzero``.
        Draw randomness from ``self.random`` with the same mask, so that only the reset envs' streams advance.
        """

    def read_state(self) -> None:  # noqa: B027  (an optional hook: doing nothing is the default)
        """Read from Genesis, once, the state that ``observe`` and ``compute_*`` share (after ``simulate`` and
        ``reset_envs``, before those hooks). Tasks that read the scene in each hook need not override it."""

    def read_reset_state(self, mask: torch.Tensor) -> None:
        """Bring the state ``read_state`` read up to date after ``reset_envs(mask)``, for an ``observe`` of the new
        episodes in the step that ended the old ones (SAME_STEP autoreset, most steps of a large batch).

        The default reads everything from Genesis again. A task that knows the state its resets leave (positions it
        set, velocities zeroed) overrides it to write the masked rows itself, sparing the Genesis getters; what it
        writes must equal what ``read_state`` would read.
        """
        self.read_state()

    @abstractmethod
    def observe(self) -> torch.Tensor:
        """Observations of every env, ``(num_envs, *observation_shape)`` float32."""

    @abstractmethod
    def compute_rewards(self) -> torch.Tensor:
        """Rewards of the last control step, ``(num_envs,)`` float32."""

    @abstractmethod
    def compute_terminated(self) -> torch.Tensor:
        """Which envs reached a terminal state, ``(num_envs,)`` bool."""

    def compute_truncated(self) -> torch.Tensor | None:
        """Task-specific truncation beyond the time limit (which the shard applies); None (the default) for none."""
        return None

    def metrics(self) -> dict[str, float]:
        """Diagnostics of the current state, each averaged over this task's envs (for logging; none by default).

        Called between steps (e.g. through ``GenesisVectorEnv.call("metrics")``, one dict per worker); must not
        change any state. Values are plain floats, keys the same on every call.
        """
        return {}

    @property
    def render_mode(self) -> str | None:
        return self.context.render_mode

    def render(self) -> Any:
        """Frames for ``context.render_mode``; only tasks that list ``render_modes`` implement it.

        ``"rgb_array"`` (``gs_gym.tasks.rendering``): a uint8 ``(num_envs, H, W, 3)`` array, one RGB frame per env of
        this task, each from a camera following that env's subject; None when the task has no render mode. Called
        between steps; must not change the simulation state.
        """
        raise NotImplementedError(f"task {self.name!r} does not render")

    def close(self) -> None:  # noqa: B027  (an optional hook: doing nothing is the default)
        """Release what the task holds (the scene is destroyed with the process)."""
