"""Exceptions raised by gs_gym.

Every failure of a worker process reaches the parent as a ``WorkerError`` subclass. When the failure was a Python
exception inside the worker, the worker's own traceback is chained as ``__cause__`` (a ``RemoteTraceback``), so
the parent's report shows both where the parent was waiting and where the worker failed.
"""

from __future__ import annotations

import gymnasium.error
from gymnasium.error import AlreadyPendingCallError, NoAsyncCallError


class GsGymError(Exception):
    """Base class of every error raised by gs_gym itself."""


class RemoteTraceback(Exception):
    """Carries a traceback formatted in another process; its ``str`` is that traceback."""

    def __init__(self, formatted: str) -> None:
        super().__init__(formatted)
        self.formatted = formatted

    def __str__(self) -> str:
        return f"\n\n--- traceback in the worker ---\n{self.formatted}"


class WorkerError(GsGymError):
    """An exception raised inside a worker process (or in the in-process shard).

    ``remote_type`` names the worker's exception class (``"AttributeError"``, ...) when there was one.
    """

    def __init__(self, message: str, *, worker: int, device: str, remote_type: str | None = None) -> None:
        super().__init__(f"worker {worker} ({device}): {message}")
        self.worker = worker
        self.device = device
        self.remote_type = remote_type


class BuildError(WorkerError):
    """Task construction or ``scene.build`` failed in a worker."""


class WorkerCrashedError(WorkerError):
    """A worker process died (exit code or signal) or closed its pipe."""

    def __init__(self, message: str, *, worker: int, device: str, exitcode: int | None) -> None:
        super().__init__(message, worker=worker, device=device)
        self.exitcode = exitcode


class WorkerTimeoutError(WorkerError):
    """A worker did not answer within the configured timeout."""


class NonFiniteObservationError(GsGymError):
    """A shard observed NaN or inf (the simulation state diverged); the message names the envs by global index."""


class TaskOutputError(GsGymError):
    """A task hook returned a tensor of the wrong shape, dtype or device for the task's spaces; the message names the
    task, the hook, what was expected and what came back."""


class EnvFailedError(GsGymError):
    """The env is unusable after an earlier worker failure (or an interrupted wait); only ``close()`` is allowed."""


class CallOrderError(GsGymError):
    """A method was called out of order (step before reset, ``step_wait`` without ``step_async``, ...)."""


class StepPendingError(CallOrderError, AlreadyPendingCallError):
    """A call that needs the workers while a ``step_async`` waits for its ``step_wait`` (also Gymnasium's
    ``AlreadyPendingCallError``)."""

    def __init__(self, message: str, name: str = "step") -> None:
        Exception.__init__(self, message)
        self.name = name


class NoStepPendingError(CallOrderError, NoAsyncCallError):
    """``step_wait`` without a pending ``step_async`` (also Gymnasium's ``NoAsyncCallError``)."""

    def __init__(self, message: str, name: str = "step") -> None:
        Exception.__init__(self, message)
        self.name = name


class PoolClosedError(GsGymError):
    """A command was sent to a worker pool that is already closed."""


class ProtocolError(GsGymError):
    """A worker's reply does not answer the request the parent is waiting for (a bug, or a pipe shared by two
    threads); the env cannot trust its workers afterwards."""


class DeviceNotVisibleError(GsGymError):
    """A worker's GPU (named by UUID) is not visible to this process (check ``CUDA_VISIBLE_DEVICES``)."""


class VectorOnlyError(GsGymError, gymnasium.error.Error):
    """``gym.make("GenesisMultiGPU-v0")`` (or anything that calls it, such as torchrl's ``GymEnv``): the id names a
    vector env, which only ``gym.make_vec`` (or ``GenesisVectorEnv``) builds; the message says what to use."""
