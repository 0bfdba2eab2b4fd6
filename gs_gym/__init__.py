"""gs_gym: Genesis World scenes as one Gymnasium vector env spread over GPU worker processes."""

from gs_gym.errors import (
    BuildError,
    CallOrderError,
    EnvFailedError,
    GsGymError,
    NonFiniteObservationError,
    TaskOutputError,
    WorkerCrashedError,
    WorkerError,
    WorkerTimeoutError,
)
from gs_gym.registration import ENV_ID, register_envs
from gs_gym.tasks import EnvRandom, Task, TaskConfig, available_tasks, register_task
from gs_gym.vector.env import GenesisVectorEnv

__version__ = "0.1.0"

register_envs()

__all__ = [
    "ENV_ID",
    "BuildError",
    "CallOrderError",
    "EnvFailedError",
    "EnvRandom",
    "GenesisVectorEnv",
    "GsGymError",
    "NonFiniteObservationError",
    "Task",
    "TaskConfig",
    "TaskOutputError",
    "WorkerCrashedError",
    "WorkerError",
    "WorkerTimeoutError",
    "available_tasks",
    "register_task",
]
