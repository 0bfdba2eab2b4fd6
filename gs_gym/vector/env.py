"""``GenesisVectorEnv``: the Gymnasium 1.x vector env over batched Genesis scenes in pinned worker processes."""

from __future__ import annotations

import enum
import os
import warnings
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import torch
from gymnasium.error import ClosedEnvironmentError
from gymnasium.vector import AutoresetMode, VectorEnv
from gymnasium.vector.utils import batch_space

from gs_gym.errors import CallOrderError, EnvFailedError, GsGymError, WorkerCrashedError, WorkerTimeoutError
from gs_gym.tasks import Task, resolve_task
from gs_gym.tasks.runtime import resolve_genesis_logging_level
from gs_gym.transport.devices import cuda_uuid, visible_gpu_count
from gs_gym.transport.pool import WorkerLaunch, WorkerPool
from gs_gym.transport.progress import StartupDisplay
from gs_gym.transport.protocol import Command
from gs_gym.vector.in_process import InProcessPool
from gs_gym.vector.shard import EnvShard, ShardBuffers, ShardSpec, kernel_cache_notice
from gs_gym.vector.sharding import EnvRange, split_envs
from gs_gym.vector.validation import as_action_tensor, check_reset_mask, check_seed

_BACKENDS = ("gpu", "cpu")
_OUTPUTS = ("torch", "numpy", "shards")
_ON_WORKER_FAILURE = ("raise", "restart")
_WORKER_FAILED = "a worker failed earlier (see the first error)"


class _State(enum.Enum):
    NEEDS_RESET = "needs reset"
    READY = "ready"
    STEP_PENDING = "step pending"
    FAILED = "failed"
    CLOSED = "closed"


def _autoreset_mode(value: AutoresetMode | str) -> AutoresetMode:
    if isinstance(value, AutoresetMode):
        return value
    names = {spelling: mode for mode in AutoresetMode for spelling in (mode.value, mode.name, mode.name.lower())}
    if value not in names:
        raise ValueError(f"autoreset_mode: expected one of {[m.value for m in AutoresetMode]}, got {value!r}")
    return names[value]


def _random_seed() -> int:
    return int(np.random.SeedSequence().generate_state(1, np.uint64)[0] >> np.uint64(2))


class GenesisVectorEnv(VectorEnv):
    """``num_envs`` Genesis envs split over worker processes (one per GPU), stepped as one batch.

    Args:
        num_envs: total number of envs, split as evenly as possible over the workers.
        task: a registered task name (see ``gs_gym.tasks.available_tasks()``) or a ``Task`` subclass.
        backend: ``"gpu"`` (CUDA) or ``"cpu"``; default ``"gpu"`` when CUDA is available, else ``"cpu"``.
        num_workers: worker processes; ``0`` runs the task in this process (the reference implementation).
            Default: one per device on ``"gpu"``, one on ``"cpu"``. Workers beyond the number of devices share
            them round-robin.
        devices: CUDA device indices (as this process sees them) for the workers; default every visible GPU.
        seed: base seed: env ``g`` starts with seed ``seed + g`` (random when None). ``reset(seed=...)`` re-seeds.
        output: ``"torch"`` (tensors on ``main_device``), ``"numpy"`` (host arrays for CPU algorithms) or
            ``"shards"``: no gather; every output (and every per-env entry of ``info``) is a tuple with one tensor
            per worker, on that worker's device, holding the envs of ``env_ranges[i]``; ``step`` also takes actions
            as such a tuple. For learners that stay sharded; outside Gymnasium's contract (the spaces describe
            the whole batch): the adapters refuse it, and wrappers expect one batch.
        autoreset_mode: ``NEXT_STEP`` (default), ``SAME_STEP`` or ``DISABLED`` (see ``gymnasium.vector``).
        task_kwargs: overrides of the task's config fields.
        performance_mode: Genesis ``performance_mode``. Off by default: on the H200 it stepped 1.16x (go2-walk) and
            1.26x (cartpole) faster at 4096 envs, but compiles again for every new shard size (1-2 min) and adds
            10-18 s to every build (``bench/results/README.md``); worth it for long runs at a fixed size.
        main_device: where gathered outputs live; default the first GPU on ``"gpu"``, the CPU on ``"cpu"``.
        render_mode: one of the task's ``render_modes`` or None.
        copy: return fresh tensors each step (True) or the env's own output buffers, overwritten by the next call.
        check_actions: reject NaN/inf actions (costs one device sync per step on GPU).
        build_timeout: seconds allowed for workers to start and build their scenes (first builds compile kernels).
        step_timeout: seconds allowed for one step/reset/call before ``WorkerTimeoutError``; None waits forever.
        forward_output: forward the workers' stdout/stderr, line by line, as INFO records of the logger
            ``gs_gym.worker.<index>`` (shown on stderr as ``[gs_gym worker <index>] <line>`` when the application
            configured no logging; see ``gs_gym.transport.output``).
        host_buffers: exchange data through host shared memory even on GPUs (for comparison; slower).
        check_observations: raise (a ``WorkerError`` naming the envs) when a step observes NaN or inf.
        on_worker_failure: ``"raise"`` (default): any worker failure raises and leaves the env failed (only
            ``close()`` is allowed). ``"restart"``: a worker that dies during a step (``WorkerCrashedError``) is
            started again on its device with the same settings, its envs are re-seeded and reset, and the step
            returns for them the reset observations, reward 0, ``truncated=True`` (and, in SAME_STEP mode, the
            reset observations as ``final_obs``), with ``info["worker_restarted"]`` (and its mask
            ``"_worker_restarted"``) true for the envs of restarted workers (a ``RuntimeWarning`` says why). Other
            failures still raise.
        verbose: show on stderr, while workers start (and restart), each worker's stage: starting, importing
            genesis, building scene (a first build compiles kernels for minutes), ready; with one line about the
            kernel cache. Live rows with ``rich`` (``pip install "gs-gym[progress]"``) on a terminal, else one line
            per change. None (default): only when stderr is a terminal. ``num_workers=0`` shows the same stages.
        genesis_logging_level: ``gs.init``'s ``logging_level`` in the workers (and in this process when
            ``num_workers=0``): "debug", "info", "warning", "error", "critical" or a ``logging`` number. None
            (default): the effective level of the ``gs_gym`` logger (WARNING unless the application sets one).
        spin_wait_us: microseconds that this process and each worker poll their pipes before sleeping on them.
            A process that sleeps through the other's half of a step is slow to wake up; spinning keeps it on its
            core, at the price of that core (measured in ``bench/results/README.md``). 0 (default): never spin.
    """

    metadata: dict[str, Any] = {"autoreset_mode": AutoresetMode.NEXT_STEP, "render_modes": []}

    def __init__(
        self,
        num_envs: int,
        task: str | type[Task] = "cartpole",
        *,
        backend: str | None = None,
        num_workers: int | None = None,
        devices: Sequence[int] | None = None,
        seed: int | None = None,
        output: str = "torch",
        autoreset_mode: AutoresetMode | str = AutoresetMode.NEXT_STEP,
        task_kwargs: dict[str, Any] | None = None,
        performance_mode: bool = False,
        main_device: str | torch.device | None = None,
        render_mode: str | None = None,
        copy: bool = True,
        check_actions: bool = True,
        build_timeout: float = 1800.0,
        step_timeout: float | None = 300.0,
        forward_output: bool = True,
        host_buffers: bool = False,
        check_observations: bool = True,
        on_worker_failure: str = "raise",
        verbose: bool | None = None,
        genesis_logging_level: str | int | None = None,
        spin_wait_us: float = 0.0,
    ) -> None:
        self._state = _State.CLOSED  # until construction succeeds; lets close() and __del__ run on a failed init
        self._failure = _WORKER_FAILED
        self._pool: WorkerPool | InProcessPool | None = None
        if isinstance(num_envs, bool) or not isinstance(num_envs, int) or num_envs < 1:
            raise ValueError(f"num_envs: expected a positive int, got {num_envs!r}")
        backend = backend or ("gpu" if visible_gpu_count() else "cpu")
        if backend not in _BACKENDS:
            raise ValueError(f"backend: expected one of {list(_BACKENDS)}, got {backend!r}")
        if output not in _OUTPUTS:
            raise ValueError(f"output: expected one of {list(_OUTPUTS)}, got {output!r}")
        task_class = resolve_task(task)
        if render_mode is not None and render_mode not in task_class.render_modes:
            raise ValueError(
                f"render_mode: task {task_class.name!r} supports {list(task_class.render_modes)}, got {render_mode!r}"
            )
        config = task_class.make_config(**(task_kwargs or {}))
        devices = self._check_devices(backend, devices)
        if num_workers is None:
            num_workers = len(devices) if backend == "gpu" else 1
        if isinstance(num_workers, bool) or not isinstance(num_workers, int) or num_workers < 0:
            raise ValueError(f"num_workers: expected an int >= 0 (0 runs in-process), got {num_workers!r}")
        if on_worker_failure not in _ON_WORKER_FAILURE:
            raise ValueError(
                f"on_worker_failure: expected one of {list(_ON_WORKER_FAILURE)}, got {on_worker_failure!r}"
            )
        if on_worker_failure == "restart" and num_workers == 0:
            raise ValueError("on_worker_failure: 'restart' needs worker processes (num_workers >= 1), got 0")
        if seed is not None:
            seed = check_seed(seed, num_envs)
            if not isinstance(seed, int):
                raise TypeError(f"seed: expected an int or None, got {type(seed).__name__}")
        genesis_level = resolve_genesis_logging_level(genesis_logging_level)
        if isinstance(spin_wait_us, bool) or not isinstance(spin_wait_us, (int, float)) or not spin_wait_us >= 0:
            raise ValueError(f"spin_wait_us: expected a number of microseconds >= 0, got {spin_wait_us!r}")
        progress = StartupDisplay(verbose, notice=kernel_cache_notice())

        self.num_envs = num_envs
        self.backend = backend
        self.num_workers = num_workers
        self.output = output
        self.copy = copy
        self.check_actions = check_actions
        self.step_timeout = step_timeout
        self.on_worker_failure = on_worker_failure
        self._restarts = 0
        self._send_crashes: dict[int, WorkerCrashedError] = {}
        self.autoreset_mode = _autoreset_mode(autoreset_mode)
        self.render_mode = render_mode
        self.task_class = task_class
        self.task_config = config
        self.metadata = {"autoreset_mode": self.autoreset_mode, "render_modes": list(task_class.render_modes)}
        single_obs, single_act = task_class.spaces(config)
        self.single_observation_space, self.single_action_space = single_obs, single_act
        self.observation_space = batch_space(single_obs, num_envs)
        self.action_space = batch_space(single_act, num_envs)
        self.env_ranges: list[EnvRange] = split_envs(num_envs, max(num_workers, 1))
        self.main_device = torch.device(main_device or (f"cuda:{devices[0]}" if backend == "gpu" else "cpu"))

        specs = [
            ShardSpec(
                task_class=task_class,
                config=config,
                num_envs=shard.count,
                env_offset=shard.offset,
                backend=backend,
                autoreset_mode=self.autoreset_mode,
                base_seed=_random_seed() if seed is None else seed,
                performance_mode=performance_mode,
                share_buffers=num_workers > 0,
                host_buffers=host_buffers,
                check_observations=check_observations,
                genesis_logging_level=genesis_level,
            )
            for shard in self.env_ranges
        ]
        self._base_seeds = [spec.base_seed for spec in specs]
        if num_workers == 0:
            self._pool = InProcessPool(specs[0], progress=progress)
        else:
            launches = [
                WorkerLaunch(
                    label=self._worker_label(backend, devices, index),
                    environment=self._worker_environment(backend, devices, index),
                    shard_factory=_ShardFactory(spec),
                    spin_wait=spin_wait_us * 1e-6,
                )
                for index, spec in enumerate(specs)
            ]
            self._pool = WorkerPool(
                launches,
                build_timeout=build_timeout,
                forward_output=forward_output,
                progress=progress,
                spin_wait=spin_wait_us * 1e-6,
            )
        self.worker_devices = [handshake.device for handshake in self._pool.handshakes]
        self.worker_gpu_uuids = [handshake.gpu_uuid for handshake in self._pool.handshakes]
        self._shard_buffers: list[ShardBuffers] = [h.open_buffers() for h in self._pool.handshakes]
        self._outputs = (
            None if output == "shards"
            else ShardBuffers.allocate(num_envs, single_obs.shape, single_act.shape, self.main_device)
        )
        self._all_workers = list(range(len(self._pool)))
        self._state = _State.NEEDS_RESET

    # -- construction helpers ------------------------------------------------------------------------------------

    @staticmethod
    def _check_devices(backend: str, devices: Sequence[int] | None) -> list[int]:
        if backend == "cpu":
            if devices is not None:
                raise ValueError(f"devices: only meaningful with backend='gpu', got devices={list(devices)}")
            return []
        visible = visible_gpu_count()
        if visible == 0:
            raise ValueError("backend: 'gpu' needs a CUDA device and torch sees none; use backend='cpu'")
        devices = list(range(visible)) if devices is None else list(devices)
        bad = [d for d in devices if isinstance(d, bool) or not isinstance(d, int) or not 0 <= d < visible]
        if not devices or bad or len(set(devices)) != len(devices):
            raise ValueError(f"devices: expected distinct CUDA indices in [0, {visible}), got {devices}")
        return devices

    @staticmethod
    def _worker_label(backend: str, devices: list[int], index: int) -> str:
        return "cpu" if backend == "cpu" else f"cuda:{devices[index % len(devices)]}"

    @staticmethod
    def _worker_environment(backend: str, devices: list[int], index: int) -> dict[str, str]:
        """Variables a worker must have before CUDA starts: it sees only its GPU, as device 0."""
        environment = {"QD_VISIBLE_DEVICE": "0"}
        if "DISPLAY" not in os.environ:
            environment["PYGLET_HEADLESS"] = "1"
        if backend == "cpu":
            environment["CUDA_VISIBLE_DEVICES"] = ""
        else:
            environment["CUDA_VISIBLE_DEVICES"] = f"GPU-{cuda_uuid(devices[index % len(devices)])}"
        return environment

    # -- Gymnasium API -------------------------------------------------------------------------------------------

    def reset(self, *, seed: int | list[int | None] | None = None, options: dict[str, Any] | None = None):
        """Reset every env, or those of ``options["reset_mask"]``; returns ``(observations, {})``."""
        self._require(_State.NEEDS_RESET, _State.READY, action="reset")
        seeds = check_seed(seed, self.num_envs)
        mask = check_reset_mask(options, self.num_envs)
        requests: dict[int, tuple[Any, ...]] = {}
        for index, shard in enumerate(self.env_ranges):
            shard_mask = None if mask is None else mask[shard.offset : shard.stop]
            if shard_mask is not None and not shard_mask.any():
                continue
            shard_seeds = seeds[shard.offset : shard.stop] if isinstance(seeds, list) else seeds
            requests[index] = (shard_seeds, shard_mask)
        self._run(Command.RESET, requests, "reset")
        self._state = _State.READY
        return self._output("observations"), {}

    def step_async(self, actions: Any) -> None:
        """Validate ``actions``, write them into the workers' action buffers and start the step."""
        if self._state is _State.STEP_PENDING:
            raise CallOrderError("step_async: a step is already pending; call step_wait() first")
        self._require(_State.READY, action="step")
        for buffers, part in zip(self._shard_buffers, self._action_parts(actions)):
            buffers.actions.copy_(part, non_blocking=False)
        self._wait_for_action_copies()
        self._send_crashes = {}
        options = {"crashed": self._send_crashes} if self._restart_mode() else {}
        self._send(Command.STEP, {index: () for index in self._all_workers}, **options)
        self._state = _State.STEP_PENDING

    def step_wait(self):
        """Wait for the pending step; returns ``(observations, rewards, terminated, truncated, info)``."""
        if self._state is not _State.STEP_PENDING:
            self._require(_State.STEP_PENDING, action="step_wait")
        crashed = dict(self._send_crashes) if self._restart_mode() else None
        self._collect(self._all_workers, "step", **({} if crashed is None else {"crashed": crashed}))
        restarted = self._restart_workers(crashed) if crashed else []
        self._state = _State.READY
        info: dict[str, Any] = {}
        if self.autoreset_mode == AutoresetMode.SAME_STEP:
            done = [buffers.terminated | buffers.truncated for buffers in self._shard_buffers]
            if any(bool(part.any()) for part in done):
                done_out = self._present(done)
                info = {"final_obs": self._output("final_observations", copy=True),
                        "_final_obs": done_out, "final_info": {}, "_final_info": done_out}
        if restarted:
            marked = [torch.full_like(b.truncated, i in restarted) for i, b in enumerate(self._shard_buffers)]
            info["worker_restarted"] = info["_worker_restarted"] = self._present(marked)
        return (
            self._output("observations"),
            self._output("rewards"),
            self._output("terminated"),
            self._output("truncated"),
            info,
        )

    @property
    def worker_busy_seconds(self) -> list[float]:
        """Per worker: seconds spent executing commands since it (re)started. Against the wall time of the same
        steps, the rest is transport: pipes, waking up, the parent's action copies and gathers."""
        return list(self._pool.busy_seconds) if self._pool is not None else []

    def step(self, actions: Any):
        self.step_async(actions)
        return self.step_wait()

    def call(self, name: str, *args: Any, **kwargs: Any) -> tuple[Any, ...]:
        """Call the task method ``name`` (or read the attribute) in every worker; one result per worker."""
        return self.call_workers(None, name, *args, **kwargs)

    def call_workers(self, workers: Sequence[int] | None, name: str, *args: Any, **kwargs: Any) -> tuple[Any, ...]:
        """``call`` on the given worker indices only (all when None); one result per worker asked."""
        requests = {i: (name, args, kwargs) for i in self._worker_indices(workers)}
        return tuple(self._run(Command.CALL, requests, f"call {name!r}"))

    def get_attr(self, name: str, workers: Sequence[int] | None = None) -> tuple[Any, ...]:
        """The task attribute ``name`` of every worker (or of ``workers``); one value per worker."""
        requests = {i: (name,) for i in self._worker_indices(workers)}
        return tuple(self._run(Command.GET_ATTR, requests, f"get_attr {name!r}"))

    def set_attr(self, name: str, values: Any, workers: Sequence[int] | None = None) -> None:
        """Set the existing task attribute ``name`` in every worker (or in ``workers``): one value for all, or a
        list/tuple of one value per worker."""
        indices = self._worker_indices(workers)
        if isinstance(values, (list, tuple)):
            if len(values) != len(indices):
                raise ValueError(f"set_attr: expected one value per worker ({len(indices)}), got {len(values)}")
        else:
            values = [values] * len(indices)
        self._run(Command.SET_ATTR, {i: (name, v) for i, v in zip(indices, values)}, f"set_attr {name!r}")

    def render(self) -> tuple[Any, ...] | None:
        if self.render_mode is None:
            return None
        return self.call("render")

    def close_extras(self, **kwargs: Any) -> None:
        """Release buffers, then stop the workers (join, terminate, kill). Idempotent; never raises."""
        if self._pool is None:
            return
        self._state = _State.CLOSED
        self._shard_buffers = []
        pool, self._pool = self._pool, None
        try:
            pool.close()
        except Exception:  # close must not raise; the pool already escalated to kill
            pass

    def close(self, **kwargs: Any) -> None:
        if not self.closed:
            self.close_extras(**kwargs)
            self.closed = True

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:
            pass

    # -- internals -----------------------------------------------------------------------------------------------

    def _require(self, *states: _State, action: str) -> None:
        if self._state in states:
            return
        if self._state is _State.CLOSED:
            raise ClosedEnvironmentError(f"{action}: the env is closed")
        if self._state is _State.FAILED:
            raise EnvFailedError(f"{action}: {self._failure}; close() the env")
        if self._state is _State.NEEDS_RESET:
            raise CallOrderError(f"{action}: call reset() before step()")
        if self._state is _State.STEP_PENDING:
            raise CallOrderError(f"{action}: a step is pending; call step_wait() first")
        raise CallOrderError(f"{action}: step_wait() called without a pending step_async()")

    def _wait_for_action_copies(self) -> None:
        """A worker reads its action buffer from another CUDA context as soon as the pipe says so: this process's
        copies into that buffer must be complete first (copies between GPUs are asynchronous)."""
        if self.num_workers == 0:
            return  # the in-process shard reads them on this process's stream, in order
        for device in {b.actions.device for b in self._shard_buffers if b.actions.device.type == "cuda"}:
            torch.cuda.current_stream(device).synchronize()

    def _worker_indices(self, workers: Sequence[int] | None) -> list[int]:
        if workers is None:
            return self._all_workers
        indices = list(workers)
        if not indices or any(i not in self._all_workers for i in indices) or len(set(indices)) != len(indices):
            raise ValueError(f"workers: expected distinct indices in [0, {len(self._all_workers)}), got {indices}")
        return indices

    def _send(self, command: Command, requests: dict[int, tuple[Any, ...]], **pool_options: Any) -> None:
        assert self._pool is not None
        try:
            self._pool.request(command, requests, **pool_options)
        except GsGymError:
            self._fail(_WORKER_FAILED)
            raise
        except BaseException:  # an interrupt between two workers' requests leaves them out of step
            self._fail(f"interrupted while sending {command.name.lower()} to the workers")
            raise

    def _collect(
        self, workers: list[int], during: str, *, exception_fails_env: bool = True, **pool_options: Any
    ) -> list[Any]:
        """Wait for ``workers``. A crash or timeout always leaves the env FAILED; an exception raised by a command
        does so only when it may have left shards out of step with each other (step, reset). So does an interrupt
        (Ctrl-C): replies may still be on their way, and the next command would misread them."""
        assert self._pool is not None
        try:
            return self._pool.collect(workers, self.step_timeout, during, **pool_options)
        except (WorkerCrashedError, WorkerTimeoutError):
            self._fail(_WORKER_FAILED)
            raise
        except GsGymError:
            if exception_fails_env:
                self._fail(_WORKER_FAILED)
            raise
        except BaseException:
            self._fail(f"interrupted while waiting for the workers ({during})")
            raise

    def _fail(self, reason: str) -> None:
        if self._state is not _State.FAILED:
            self._failure = reason
        self._state = _State.FAILED

    def _restart_mode(self) -> bool:
        """Whether step collects worker crashes (to restart those workers) instead of raising them."""
        return self.on_worker_failure == "restart" and isinstance(self._pool, WorkerPool)

    def _restart_workers(self, crashed: dict[int, WorkerCrashedError]) -> list[int]:
        """Restart each crashed worker, re-seed and reset its envs, and mark them truncated (``"restart"`` mode)."""
        assert isinstance(self._pool, WorkerPool)
        restarted = sorted(crashed)
        for index in restarted:
            warnings.warn(f"{str(crashed[index]).splitlines()[0]}; restarting it", RuntimeWarning, stacklevel=3)
            self._restarts += 1
            seed = np.random.SeedSequence([self._base_seeds[index], self._restarts]).generate_state(1, np.uint64)[0]
            try:
                handshake = self._pool.restart(index)
                self._shard_buffers[index] = handshake.open_buffers()
                self.worker_devices[index] = handshake.device
                self.worker_gpu_uuids[index] = handshake.gpu_uuid
                self._send(Command.RESET, {index: (int(seed >> np.uint64(2)), None)}, during="reset after restart")
                self._collect([index], "reset after restart")
            except BaseException:
                self._fail(_WORKER_FAILED)
                raise
            buffers = self._shard_buffers[index]
            buffers.truncated.fill_(True)  # the reset wrote the observations and zeroed rewards and terminated
            buffers.final_observations.copy_(buffers.observations)
        return restarted

    def _run(self, command: Command, requests: dict[int, tuple[Any, ...]], during: str) -> list[Any]:
        if self._state not in (_State.NEEDS_RESET, _State.READY):
            self._require(_State.READY, action=during)
        self._send(command, requests)
        return self._collect(list(requests), during, exception_fails_env=command == Command.RESET)

    def _action_parts(self, actions: Any) -> list[torch.Tensor]:
        """Each worker's slice of ``actions``, validated; with ``output="shards"`` also a tuple of slices."""
        action_shape = self.single_action_space.shape
        if self.output == "shards" and isinstance(actions, (tuple, list)) and all(
            isinstance(part, (torch.Tensor, np.ndarray)) for part in actions
        ):
            if len(actions) != len(self.env_ranges):
                raise ValueError(
                    f"actions: expected one tensor per worker ({len(self.env_ranges)}) or one batch, "
                    f"got a {type(actions).__name__} of {len(actions)}"
                )
            return [
                as_action_tensor(part, (shard.count, *action_shape), self.check_actions, name=f"actions[{i}]")
                for i, (shard, part) in enumerate(zip(self.env_ranges, actions))
            ]
        actions = as_action_tensor(actions, (self.num_envs, *action_shape), self.check_actions)
        return [actions[shard.offset : shard.stop] for shard in self.env_ranges]

    def _output(self, name: str, copy: bool | None = None) -> Any:
        """The workers' buffers ``name`` as ``output`` asks: gathered on ``main_device`` (into the reused output
        buffer unless copying), on the host, or per shard."""
        parts = [getattr(buffers, name) for buffers in self._shard_buffers]
        fresh = self.copy if copy is None else copy
        if self.output == "shards":
            return tuple(part.clone() for part in parts) if fresh else tuple(parts)
        if fresh:
            return self._host_or_device(self._gather(parts))
        assert self._outputs is not None
        out = getattr(self._outputs, name)
        for shard, part in zip(self.env_ranges, parts):
            out[shard.offset : shard.stop].copy_(part)
        return self._host_or_device(out)

    def _present(self, parts: list[torch.Tensor]) -> Any:
        """Per-shard tensors computed here (not the workers' buffers) as ``output`` asks."""
        return tuple(parts) if self.output == "shards" else self._host_or_device(self._gather(parts))

    def _gather(self, parts: list[torch.Tensor]) -> torch.Tensor:
        """A new tensor on ``main_device`` holding ``parts`` in env order."""
        if len(parts) == 1:
            return parts[0].to(self.main_device, copy=True)
        return torch.cat([part.to(self.main_device) for part in parts])

    def _host_or_device(self, tensor: torch.Tensor) -> torch.Tensor | np.ndarray:
        return tensor.cpu().numpy() if self.output == "numpy" else tensor


class _ShardFactory:
    """Builds the ``EnvShard`` of one worker; cloudpickled into the worker process."""

    def __init__(self, spec: ShardSpec) -> None:
        self.spec = spec

    def __call__(self, report: Callable[[str], None] | None = None) -> EnvShard:
        return EnvShard(self.spec, report)
