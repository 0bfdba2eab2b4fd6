"""Tasks: batched Genesis scenes behind the ``Task`` hooks, and the registry that names them."""

from gs_gym.tasks.base import Task, TaskConfig
from gs_gym.tasks.random import EnvRandom
from gs_gym.tasks.registry import available_tasks, register_task, resolve_task
from gs_gym.tasks import cartpole as _cartpole  # noqa: F401  (registers "cartpole")

__all__ = ["EnvRandom", "Task", "TaskConfig", "available_tasks", "register_task", "resolve_task"]
