"""Tasks: batched Genesis scenes behind the ``Task`` hooks, and the registry that names them."""

from gs_gym.tasks import cartpole as _cartpole  # noqa: F401  (registers "cartpole")
from gs_gym.tasks import franka_reach as _franka_reach  # noqa: F401  (registers "franka-reach")
from gs_gym.tasks import go2_walk as _go2_walk  # noqa: F401  (registers "go2-walk")
from gs_gym.tasks.base import Task, TaskConfig, TaskContext
from gs_gym.tasks.random import EnvRandom
from gs_gym.tasks.registry import available_tasks, register_task, resolve_task

__all__ = ["EnvRandom", "Task", "TaskConfig", "TaskContext", "available_tasks", "register_task", "resolve_task"]
