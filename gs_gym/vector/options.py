"""``EnvOptions``: every option of ``GenesisVectorEnv``, parsed and checked once, before anything starts.

Each check names the option, what was expected and what was given. Integer options accept any integral number
(numpy integers included, ``bool`` excluded); timeouts must be positive and finite; devices must exist. Defaults
that depend on the machine (the backend, the worker count, the main device) are decided here and nowhere else.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import numbers
from collections.abc import Sequence
from typing import Any, Literal, overload

import torch
from gymnasium.vector import AutoresetMode

from gs_gym.tasks import Task, TaskConfig, resolve_task
from gs_gym.tasks.runtime import resolve_genesis_logging_level
from gs_gym.transport.devices import visible_gpu_count
from gs_gym.transport.spinning import default_spin_wait_us

BACKENDS = ("gpu", "cpu")
OUTPUTS = ("torch", "numpy", "shards")
ON_WORKER_FAILURE = ("raise", "restart")


def as_int(name: str, value: Any, minimum: int, hint: str = "") -> int:
    """``value`` as a Python int >= ``minimum`` (numpy integers too, never a bool), or a ValueError naming it."""
    if isinstance(value, numbers.Integral) and not isinstance(value, bool) and int(value) >= minimum:
        return int(value)
    expected = "a positive int" if minimum == 1 and not hint else f"an int >= {minimum}{hint}"
    raise ValueError(f"{name}: expected {expected}, got {value!r}")


def as_bool(name: str, value: Any) -> bool:
    if isinstance(value, bool):
        return value
    raise TypeError(f"{name}: expected True or False, got {value!r}")


def as_optional_bool(name: str, value: Any, none_means: str) -> bool | None:
    """``value`` when it is True, False or None, else a TypeError naming it and what None means."""
    if value is None or isinstance(value, bool):
        return value
    raise TypeError(f"{name}: expected True, False or None ({none_means}), got {value!r}")


LONGEST_WAIT = 1e6
"""Seconds: the longest timeout accepted. The OS waits under the pool's take at most 2**31 - 1 ms (about 24.8 days)
and raise ``OverflowError`` beyond, so larger values are refused up front, not half-way through a command."""


@overload
def as_seconds(name: str, value: Any, *, allow_none: Literal[False]) -> float: ...


@overload
def as_seconds(name: str, value: Any, *, allow_none: bool) -> float | None: ...


def as_seconds(name: str, value: Any, *, allow_none: bool) -> float | None:
    """A positive, finite number of seconds up to ``LONGEST_WAIT`` (or None where waiting forever is allowed)."""
    if value is None and allow_none:
        return None
    none = " or None (wait forever)" if allow_none else ""
    # ``not value <= 0`` is ``value > 0`` for the finite reals that reach it; numbers.Real declares only < and <=.
    if isinstance(value, numbers.Real) and not isinstance(value, bool) and math.isfinite(value) and not value <= 0:
        if value <= LONGEST_WAIT:
            return float(value)
        raise ValueError(f"{name}: expected at most {LONGEST_WAIT:.0f} seconds{none}, got {value!r}")
    raise ValueError(f"{name}: expected a positive, finite number of seconds{none}, got {value!r}")


def as_choice(name: str, value: Any, choices: Sequence[str]) -> str:
    if isinstance(value, str) and value in choices:
        return value
    raise ValueError(f"{name}: expected one of {list(choices)}, got {value!r}")


def as_autoreset_mode(value: AutoresetMode | str) -> AutoresetMode:
    if isinstance(value, AutoresetMode):
        return value
    names = {spelling: mode for mode in AutoresetMode for spelling in (mode.value, mode.name, mode.name.lower())}
    if not isinstance(value, str) or value not in names:
        raise ValueError(f"autoreset_mode: expected one of {[m.value for m in AutoresetMode]}, got {value!r}")
    return names[value]


def _check_devices(backend: str, devices: Sequence[int] | None) -> tuple[int, ...]:
    if backend == "cpu":
        if devices is not None:
            raise ValueError(f"devices: only meaningful with backend='gpu', got devices={devices!r}")
        return ()
    visible = visible_gpu_count()
    if visible == 0:
        raise ValueError("backend: 'gpu' needs a CUDA device and torch sees none; use backend='cpu'")
    if devices is not None and (not isinstance(devices, Sequence) or isinstance(devices, str)):
        raise ValueError(f"devices: expected a sequence of CUDA indices in [0, {visible}) or None, got {devices!r}")
    chosen = list(range(visible)) if devices is None else list(devices)
    bad = [d for d in chosen if not isinstance(d, numbers.Integral) or isinstance(d, bool) or not 0 <= d < visible]
    if not chosen or bad or len(set(chosen)) != len(chosen):
        raise ValueError(f"devices: expected distinct CUDA indices in [0, {visible}), got {chosen}")
    return tuple(int(d) for d in chosen)


def _check_main_device(value: Any, backend: str, devices: tuple[int, ...]) -> torch.device:
    if value is None:
        return torch.device(f"cuda:{devices[0]}" if backend == "gpu" else "cpu")
    try:
        device = torch.device(value)
    except (RuntimeError, TypeError):
        raise ValueError(f"main_device: expected a torch device such as 'cpu' or 'cuda:0', got {value!r}") from None
    if device.type == "cuda":
        visible = visible_gpu_count()
        index = 0 if device.index is None else device.index
        if index >= visible:
            raise ValueError(f"main_device: {value!r} is not a visible CUDA device (torch sees {visible})")
        return torch.device("cuda", index)
    if device.type != "cpu":
        raise ValueError(f"main_device: expected 'cpu' or a CUDA device, got {value!r}")
    return device


@dataclasses.dataclass(frozen=True)
class EnvOptions:
    """The options of ``GenesisVectorEnv(num_envs, task, **options)``, checked (see ``EnvOptions.parse``)."""

    num_envs: int
    task_class: type[Task]
    """``task``: a registered task name (``gs_gym.tasks.available_tasks()``) or a ``Task`` subclass."""
    config: TaskConfig
    """``task_kwargs``: overrides of the task's config fields (unknown keys are named in the error)."""
    backend: str
    """``"gpu"`` (CUDA) or ``"cpu"``; default ``"gpu"`` when CUDA is available, else ``"cpu"``."""
    num_workers: int
    """Worker processes; 0 runs the task in this process (the reference). Default: one per device on ``"gpu"``,
    one on ``"cpu"``. Workers beyond the number of devices share them round-robin."""
    devices: tuple[int, ...]
    """CUDA device indices (as this process sees them) for the workers; default every visible GPU."""
    seed: int | None
    """Base seed: env ``g`` starts with seed ``seed + g`` (random when None); ``reset(seed=...)`` re-seeds."""
    output: str
    """``"torch"`` (tensors on ``main_device``), ``"numpy"`` (host arrays for CPU algorithms) or ``"shards"``: no
    gather; every output (and every per-env entry of ``info``) is a tuple with one tensor per worker, on that
    worker's device, holding the envs of ``env_ranges[i]``; ``step`` also takes actions as such a tuple. Outside
    Gymnasium's contract (the spaces describe the whole batch): the adapters refuse it."""
    autoreset_mode: AutoresetMode
    """``NEXT_STEP`` (default), ``SAME_STEP`` or ``DISABLED`` (see ``gymnasium.vector``); strings accepted."""
    final_obs: bool
    """SAME_STEP only: report the observations that finished envs ended on in ``info["final_obs"]`` (True, Gymnasium's
    contract) or not at all (False, for learners that never read them, such as rsl_rl's PPO, which bootstraps
    time-outs from its value estimate). False spares a second ``observe`` in every step that resets an env: the
    task's hooks then run ``read_state``, ``compute_rewards``, ``compute_terminated``, the resets, and ``observe``
    once, for the observations returned (the ones the NaN/inf check covers)."""
    cuda_graph: bool
    """Replay the task's output hooks (``compute_truncated`` included) and the shard's bookkeeping after them (time
    limit, done, the step flags) from one CUDA graph per shard, captured at the first step: one launch per step where
    go2-walk's take 39 (host-bound GPU steps pay 10-20 us of host time per launch). Only for tasks that declare
    ``Task.capturable`` (go2-walk, franka-reach); the first replays are checked against the hooks. On the CPU backend
    the same code runs as it is. None (the default) means on for capturable tasks on the GPU backend, where it made
    go2-walk's step 1.12x (in process) and 1.20x (one worker) faster on an H100, franka-reach's 1.12x and 1.15x
    (paired, one run: ``bench/results/README.md``)."""
    performance_mode: bool
    """Genesis ``performance_mode``. Off by default: on the H200 it stepped 1.16x (go2-walk) and 1.26x (cartpole)
    faster at 4096 envs, but compiles again for every new shard size (1-2 min) and adds 10-18 s to every build."""
    main_device: torch.device
    """Where gathered outputs live; default the first GPU on ``"gpu"``, the CPU on ``"cpu"``."""
    render_mode: str | None
    """One of the task's ``render_modes`` or None."""
    copy: bool
    """Return fresh tensors each step (True) or the env's own output buffers, overwritten by the next call."""
    check_actions: bool
    """NaN/inf actions act as 0 in the step, which then raises ``ValueError`` naming the envs (found with the step's
    one wait, in ``step_wait``: no sync before the step)."""
    check_observations: bool
    """Raise ``NonFiniteObservationError`` (naming the envs) when observations or rewards hold NaN or inf (one host
    wait per step, in ``step_wait`` after the workers' replies: the workers themselves never wait for it)."""
    build_timeout: float
    """Seconds allowed for workers to start and build their scenes (first builds compile kernels)."""
    step_timeout: float | None
    """Seconds allowed for one step/reset/call before ``WorkerTimeoutError``; None waits forever."""
    forward_output: bool
    """Forward the workers' stdout/stderr, line by line, as INFO records of the logger ``gs_gym.worker.<index>``."""
    host_buffers: bool
    """Exchange data through host shared memory even on GPUs (for comparison; slower)."""
    on_worker_failure: str
    """``"raise"``: any worker failure raises and leaves the env failed (only ``close()`` is allowed).
    ``"restart"``: a worker that dies during a step is started again on its device, its envs re-seeded and reset;
    the step returns for them the reset observations, reward 0, ``truncated=True``, with
    ``info["worker_restarted"]`` (and ``"_worker_restarted"``) true for them. Other failures still raise."""
    verbose: bool | None
    """Show each worker's start-up stage on stderr; None: only when stderr is a terminal."""
    genesis_logging_level: str
    """``gs.init``'s ``logging_level`` in the workers; from None: the ``gs_gym`` logger's effective level."""
    spin_wait_us: float
    """Microseconds this process and each worker poll their pipes before sleeping on them (0: never spin). Default:
    20,000 with workers on GPUs when the machine has two logical cores per process, else 0
    (``gs_gym.transport.spinning``)."""

    @functools.cached_property  # read every step; on a frozen dataclass it is computed once per instance
    def outputs_by_reference(self) -> bool:
        """In process with ``copy=True``: the shard's output buffers hold tensors nothing writes again, which the env
        returns as they are (``ShardSpec.outputs_by_reference``) instead of cloning them."""
        return self.num_workers == 0 and self.copy and not self.host_buffers

    @functools.cached_property
    def actions_by_reference(self) -> bool:
        """In process with ``check_actions``: the shard reads the caller's actions as they are (``EnvShard.step``),
        since the task gets their NaN-free copy anyway."""
        return self.num_workers == 0 and self.check_actions

    @classmethod
    def parse(
        cls,
        num_envs: Any,
        task: str | type[Task] = "cartpole",
        *,
        backend: str | None = None,
        num_workers: Any = None,
        devices: Sequence[int] | None = None,
        seed: Any = None,
        output: str = "torch",
        autoreset_mode: AutoresetMode | str = AutoresetMode.NEXT_STEP,
        final_obs: bool = True,
        task_kwargs: dict[str, Any] | None = None,
        cuda_graph: bool | None = None,
        performance_mode: bool = False,
        main_device: str | torch.device | None = None,
        render_mode: str | None = None,
        copy: bool = True,
        check_actions: bool = True,
        check_observations: bool = True,
        build_timeout: float = 1800.0,
        step_timeout: float | None = 300.0,
        forward_output: bool = True,
        host_buffers: bool = False,
        on_worker_failure: str = "raise",
        verbose: bool | None = None,
        genesis_logging_level: str | int | None = None,
        spin_wait_us: float | None = None,
    ) -> EnvOptions:
        """Check every option (in this order: the first problem raises) and fill in the machine's defaults."""
        num_envs = as_int("num_envs", num_envs, 1)
        default_backend = "gpu" if visible_gpu_count() else "cpu"
        backend = as_choice("backend", default_backend if backend is None else backend, BACKENDS)
        output = as_choice("output", output, OUTPUTS)
        task_class = resolve_task(task)
        if render_mode is not None and render_mode not in task_class.render_modes:
            raise ValueError(
                f"render_mode: task {task_class.name!r} supports {list(task_class.render_modes)}, got {render_mode!r}"
            )
        if task_kwargs is not None and not isinstance(task_kwargs, dict):
            raise TypeError(f"task_kwargs: expected a dict of config overrides, got {type(task_kwargs).__name__}")
        config = task_class.make_config(**(task_kwargs or {}))
        chosen_devices = _check_devices(backend, devices)
        if num_workers is None:
            num_workers = len(chosen_devices) if backend == "gpu" else 1
        num_workers = as_int("num_workers", num_workers, 0, " (0 runs in-process)")
        if num_envs < max(num_workers, 1):
            raise ValueError(f"num_envs: expected at least one env per worker ({num_workers} workers), got {num_envs}")
        on_worker_failure = as_choice("on_worker_failure", on_worker_failure, ON_WORKER_FAILURE)
        if on_worker_failure == "restart" and num_workers == 0:
            raise ValueError("on_worker_failure: 'restart' needs worker processes (num_workers >= 1), got 0")
        if seed is not None:
            seed = as_int("seed", seed, 0)
        mode = as_autoreset_mode(autoreset_mode)
        if not as_bool("final_obs", final_obs) and mode != AutoresetMode.SAME_STEP:
            raise ValueError(
                f"final_obs: False is meaningful only with autoreset_mode='same_step' (the other modes report no "
                f"final observations), got autoreset_mode={mode.name.lower()!r}"
            )
        cuda_graph = as_optional_bool(
            "cuda_graph", cuda_graph, "on for tasks declaring Task.capturable on the GPU backend"
        )
        if cuda_graph is None:
            cuda_graph = backend == "gpu" and task_class.outputs_are_capturable()
        elif cuda_graph and not task_class.outputs_are_capturable():
            raise ValueError(
                f"cuda_graph: task {task_class.name!r} does not declare its output hooks capturable "
                f"(Task.capturable; go2-walk and franka-reach do), got cuda_graph=True"
            )
        verbose = as_optional_bool("verbose", verbose, "when stderr is a terminal")
        if spin_wait_us is None:
            spin_wait_us = default_spin_wait_us(backend == "gpu", num_workers)
        valid_spin = isinstance(spin_wait_us, numbers.Real) and not isinstance(spin_wait_us, bool)
        if not (valid_spin and math.isfinite(spin_wait_us) and spin_wait_us >= 0):
            raise ValueError(
                f"spin_wait_us: expected a number of microseconds >= 0 or None (the default), got {spin_wait_us!r}"
            )
        return cls(
            num_envs=num_envs,
            task_class=task_class,
            config=config,
            backend=backend,
            num_workers=num_workers,
            devices=chosen_devices,
            seed=seed,
            output=output,
            autoreset_mode=mode,
            final_obs=final_obs,
            cuda_graph=cuda_graph,
            performance_mode=as_bool("performance_mode", performance_mode),
            main_device=_check_main_device(main_device, backend, chosen_devices),
            render_mode=render_mode,
            copy=as_bool("copy", copy),
            check_actions=as_bool("check_actions", check_actions),
            check_observations=as_bool("check_observations", check_observations),
            build_timeout=as_seconds("build_timeout", build_timeout, allow_none=False),
            step_timeout=as_seconds("step_timeout", step_timeout, allow_none=True),
            forward_output=as_bool("forward_output", forward_output),
            host_buffers=as_bool("host_buffers", host_buffers),
            on_worker_failure=on_worker_failure,
            verbose=verbose,
            genesis_logging_level=resolve_genesis_logging_level(genesis_logging_level),
            spin_wait_us=float(spin_wait_us),
        )


def parse_options(num_envs: Any, task: str | type[Task], options: dict[str, Any]) -> EnvOptions:
    """``EnvOptions.parse`` that names unknown option keys in a ValueError (instead of Python's TypeError)."""
    known = set(EnvOptions.parse.__kwdefaults__ or {})
    unknown = sorted(set(options) - known)
    if unknown:
        raise ValueError(f"unknown option(s) {unknown}; expected some of {sorted(known)}")
    return EnvOptions.parse(num_envs, task, **options)
