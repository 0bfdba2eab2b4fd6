"""The life of a ``GenesisVectorEnv`` as a state machine, and the errors for calls out of order."""

from __future__ import annotations

import enum

from gymnasium.error import ClosedEnvironmentError

from gs_gym.errors import CallOrderError, EnvFailedError, NoStepPendingError, StepPendingError

WORKER_FAILED = "a worker failed earlier (see the first error)"


class State(enum.Enum):
    NEEDS_RESET = "needs reset"
    READY = "ready"
    STEP_PENDING = "step pending"
    FAILED = "failed"
    CLOSED = "closed"


class Lifecycle:
    """The env's state, and why it failed; ``require`` raises the error that explains a call out of order."""

    def __init__(self) -> None:
        self.state = State.CLOSED  # until construction succeeds: close() and __del__ run on a failed init
        self.failure = WORKER_FAILED

    def require(self, *states: State, action: str) -> None:
        state = self.state
        if state in states:
            return
        if state is State.CLOSED:
            raise ClosedEnvironmentError(f"{action}: the env is closed")
        if state is State.FAILED:
            raise EnvFailedError(f"{action}: {self.failure}; close() the env")
        if state is State.NEEDS_RESET:
            raise CallOrderError(f"{action}: call reset() before step()")
        if state is State.STEP_PENDING:
            if action == "step":
                raise StepPendingError("step_async: a step is already pending; call step_wait() first")
            raise StepPendingError(f"{action}: a step is pending; call step_wait() first", name=action)
        raise NoStepPendingError(f"{action}: step_wait() called without a pending step_async()")

    def fail(self, reason: str) -> None:
        """Enter FAILED (for good: only close() is allowed); the first reason is kept. A closed env stays closed (a
        command interrupted by close() from another thread fails after the close)."""
        if self.state is State.CLOSED:
            return
        if self.state is not State.FAILED:
            self.failure = reason
        self.state = State.FAILED
