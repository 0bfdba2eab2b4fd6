"""``FaultyCartPole``: cart-pole that fails on purpose, for the fault-tolerance tests (passed as ``task=``; it is
not registered, so users never see it among ``available_tasks()``).

The scene is cart-pole's own (same URDF, same options), so no new kernels compile. ``FaultyCartPoleConfig.fault``
names one fault:

- ``"build"``: raise in ``build`` (before the scene is built);
- ``"raise"``: raise an exception in step ``fault_step``;
- ``"sleep"``: sleep ``sleep_seconds`` in step ``fault_step`` (a hang);
- ``"exit"``: print a line, then ``os._exit(exit_code)`` in step ``fault_step``;
- ``"segfault"``: send itself SIGSEGV in step ``fault_step``;
- ``"nan"``: write NaN into the state of the local envs ``nan_envs`` in step ``fault_step`` (after the physics
  step, so the shard observes it);
- ``"obs-shape"``: ``observe`` returns one column too few in step ``fault_step``;
- ``"reward-dtype"``: ``compute_rewards`` returns float64 in step ``fault_step``;
- ``"slow-close"``: ``close`` sleeps ``sleep_seconds``, then creates the file ``closed_marker`` (a Genesis cleanup
  that takes far too long).

Steps are counted per shard from 1, from the build on (resets do not count). A fault applies only in the shard
whose first global env (``context.env_offset``) is ``fault_env_offset`` (None: every shard), so a two-worker env
can lose one worker.
The attribute ``unpicklable`` cannot be sent to the parent (for ``get_attr`` / ``call`` failures);
``call("environment_variable", name)`` reads the worker's environment.
"""

from __future__ import annotations

import atexit
import dataclasses
import os
import signal
import threading
import time
from pathlib import Path

import numpy as np
import torch

from gs_gym.tasks.base import TaskConfig, TaskContext
from gs_gym.tasks.cartpole import CartPole, CartPoleConfig

FAULTS = (
    "none",
    "build",
    "raise",
    "sleep",
    "exit",
    "segfault",
    "nan",
    "obs-shape",
    "reward-dtype",
    "slow-close",
    "frames-shape",
)


@dataclasses.dataclass(frozen=True)
class FaultyCartPoleConfig(CartPoleConfig):
    fault: str = "none"
    """One of ``FAULTS``."""
    fault_step: int = 1
    """The step (1-based, counted per shard since the build) in which the fault fires."""
    fault_env_offset: int | None = 0
    """Fault only the shard whose ``env_offset`` equals this; None faults every shard."""
    sleep_seconds: float = 3600.0
    exit_code: int = 3
    nan_envs: tuple[int, ...] = (0,)
    """Local env indices whose state becomes NaN (``fault="nan"``)."""
    closed_marker: str | None = None
    """The file ``fault="slow-close"`` creates once its ``close`` has slept."""
    exit_marker: str | None = None
    """A file that an exit handler (``atexit``), registered by ``build`` in every shard, writes the process id into."""

    def __post_init__(self) -> None:
        if self.fault not in FAULTS:
            raise ValueError(f"fault: expected one of {list(FAULTS)}, got {self.fault!r}")
        if self.fault_step < 1:
            raise ValueError(f"fault_step: expected an int >= 1, got {self.fault_step}")


class FaultyCartPole(CartPole):
    name = "faulty-cartpole"
    config_class = FaultyCartPoleConfig
    config: FaultyCartPoleConfig

    def __init__(self, config: TaskConfig, context: TaskContext) -> None:
        super().__init__(config, context)
        self.env_offset = context.env_offset
        self.steps = 0
        wanted = self.config.fault_env_offset
        self.faulty = self.config.fault != "none" and (wanted is None or wanted == self.env_offset)
        self.unpicklable = threading.Lock()
        """An attribute that cannot cross the pipe (``get_attr("unpicklable")`` must fail cleanly)."""

    @staticmethod
    def environment_variable(name: str) -> str | None:
        """The worker process's value of the environment variable ``name`` (for ``call``)."""
        return os.environ.get(name)

    def _fail(self, where: str) -> str:
        return f"faulty-cartpole: injected {self.config.fault} fault {where} (env_offset {self.env_offset})"

    def build(self) -> None:
        if self.faulty and self.config.fault == "build":
            raise RuntimeError(self._fail("at build"))
        if self.config.exit_marker is not None:
            atexit.register(Path(self.config.exit_marker).write_text, str(os.getpid()))
        super().build()

    def simulate(self) -> None:
        self.steps += 1
        if not self.faulty or self.steps != self.config.fault_step:
            super().simulate()
            return
        fault, where = self.config.fault, f"at step {self.steps}"
        if fault == "raise":
            raise RuntimeError(self._fail(where))
        if fault == "sleep":
            time.sleep(self.config.sleep_seconds)
        elif fault == "exit":
            print(self._fail(where), flush=True)
            os._exit(self.config.exit_code)
        elif fault == "segfault":
            os.kill(os.getpid(), signal.SIGSEGV)
            time.sleep(5.0)  # the signal is delivered asynchronously; never go on stepping
        super().simulate()
        if fault == "nan":
            ids = torch.tensor(self.config.nan_envs, dtype=torch.int64, device=self.device)
            nan = torch.full((len(ids), 2), float("nan"), dtype=torch.float32, device=self.device)
            self.robot.set_qpos(nan, envs_idx=ids, zero_velocity=False)

    def observe(self) -> torch.Tensor:
        obs = super().observe()
        return obs[:, :-1] if self._faulting("obs-shape") else obs

    def compute_rewards(self) -> torch.Tensor:
        rewards = super().compute_rewards()
        return rewards.double() if self._faulting("reward-dtype") else rewards

    def render(self) -> np.ndarray | None:
        """``fault="frames-shape"``: grey frames without their colour axis, drawn without a camera."""
        if self.faulty and self.config.fault == "frames-shape":
            return np.full((self.num_envs, 240, 320), 128, dtype=np.uint8)
        return super().render()

    def _faulting(self, fault: str) -> bool:
        return self.faulty and self.config.fault == fault and self.steps == self.config.fault_step

    def close(self) -> None:
        if self.faulty and self.config.fault == "slow-close":
            time.sleep(self.config.sleep_seconds)
            if self.config.closed_marker is not None:
                Path(self.config.closed_marker).touch()
        if getattr(self, "_urdf_dir", None) is not None:
            super().close()
