"""The task API: a handful of batched tensor hooks over one Genesis scene.

A task knows Genesis and nothing about processes, step loops or autoreset. ``gs_gym.vector.shard.EnvShard`` drives
it: ``build`` once, then per step ``apply_actions`` -> ``simulate`` -> ``observe`` / ``compute_rewards`` /
``compute_terminated`` / ``compute_truncated``, and ``reset_envs`` for the envs that must start a new episode.
All tensors are batched over the task's ``num_envs`` and live on its ``device``.
"""

from __future__ import annotations

import dataclasses
from abc import ABC, abstractmethod
from typing import Any, ClassVar

import gymnasium as gym
import torch

from gs_gym.tasks.random import EnvRandom


@dataclasses.dataclass(frozen=True)
class TaskConfig:
    """Settings every task has; subclasses add their own fields (all overridable through ``task_kwargs``)."""

    max_episode_steps: int = 500
    """Episodes are truncated after this many steps."""


class Task(ABC):
    """Base class of batched tasks. Subclasses set ``name`` and ``config_class`` and implement the hooks."""

    name: ClassVar[str]
    config_class: ClassVar[type[TaskConfig]] = TaskConfig
    render_modes: ClassVar[tuple[str, ...]] = ()

    def __init__(self, config: TaskConfig, num_envs: int, device: torch.device) -> None:
        self.config = config
        self.num_envs = num_envs
        self.device = device

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
    def observe(self) -> torch.Tensor:
        """Observations of every env, ``(num_envs, *observation_shape)`` float32."""

    @abstractmethod
    def compute_rewards(self) -> torch.Tensor:
        """Rewards of the last control step, ``(num_envs,)`` float32."""

    @abstractmethod
    def compute_terminated(self) -> torch.Tensor:
        """Which envs reached a terminal state, ``(num_envs,)`` bool."""

    def compute_truncated(self) -> torch.Tensor:
        """Task-specific truncation beyond the time limit (which the shard applies); none by default."""
        return torch.zeros(self.num_envs, dtype=torch.bool, device=self.device)

    @abstractmethod
    def reset_envs(self, env_ids: torch.Tensor, rng: EnvRandom) -> None:
        """Start new episodes for the local envs ``env_ids`` (int64), drawing randomness from ``rng`` only."""

    def metrics(self) -> dict[str, float]:
        """Diagnostics of the current state, each averaged over this task's envs (for logging; none by default).

        Called between steps (e.g. through ``GenesisVectorEnv.call("metrics")``, one dict per worker); must not
        change any state. Values are plain floats, keys the same on every call.
        """
        return {}

    def render(self) -> Any:
        """A frame for ``render_mode``; only tasks that list render modes implement it."""
        raise NotImplementedError(f"task {self.name!r} does not render")

    def close(self) -> None:
        """Release what the task holds (the scene is destroyed with the process)."""
