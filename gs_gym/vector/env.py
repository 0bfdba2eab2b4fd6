"""``GenesisVectorEnv``: the Gymnasium 1.x vector env over batched Genesis scenes in pinned worker processes."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import torch
from gymnasium.vector import AutoresetMode, VectorEnv
from gymnasium.vector.utils import batch_space

from gs_gym.display import StartupDisplay
from gs_gym.errors import WorkerCrashedError
from gs_gym.tasks import Task
from gs_gym.transport.buffers import OpenedShard, StepFlags
from gs_gym.transport.interface import ShardPool
from gs_gym.transport.protocol import Command
from gs_gym.vector.batch import BatchIO
from gs_gym.vector.client import ShardClient
from gs_gym.vector.lifecycle import Lifecycle, State
from gs_gym.vector.options import EnvOptions, as_seconds, parse_options
from gs_gym.vector.pools import random_seed, shard_specs, start_pool
from gs_gym.vector.shard import kernel_cache_notice
from gs_gym.vector.sharding import EnvRange, split_envs
from gs_gym.vector.validation import check_episode_steps, check_reset_mask, check_seed, non_finite_actions_error


class GenesisVectorEnv(VectorEnv):
    """``num_envs`` Genesis envs split over worker processes (one per GPU), stepped as one batch.

    ``GenesisVectorEnv(num_envs, task="cartpole", **options)``: every option (backend, num_workers, devices, seed,
    output, autoreset_mode, task_kwargs, copy, checks, timeouts, ...) is described, with its default, on
    ``gs_gym.vector.options.EnvOptions``; all are checked before anything starts (``ValueError``/``TypeError``
    naming the option). The parsed options are ``env.options``.

    Example (CPU backend)::

        env = GenesisVectorEnv(64, "cartpole", backend="cpu", num_workers=2, seed=0)
        obs, info = env.reset(seed=0)                       # torch.float32, shape (64, 4)
        obs, rewards, terminated, truncated, info = env.step(torch.zeros(64, 1))
        env.close()
    """

    # not a ClassVar: __init__ gives each env its own metadata; this is the class's default, as in Gymnasium
    metadata: dict[str, Any] = {"autoreset_mode": AutoresetMode.NEXT_STEP, "render_modes": []}  # noqa: RUF012

    def __init__(self, num_envs: int, task: str | type[Task] = "cartpole", **options: Any) -> None:
        self._life = Lifecycle()
        self._client: ShardClient | None = None
        self.options = opts = parse_options(num_envs, task, options)
        progress = StartupDisplay(opts.verbose, notice=kernel_cache_notice())
        self.num_envs = opts.num_envs
        self.autoreset_mode = opts.autoreset_mode
        self.render_mode = opts.render_mode
        self.metadata = {"autoreset_mode": opts.autoreset_mode, "render_modes": list(opts.task_class.render_modes)}
        single_obs, single_act = opts.task_class.spaces(opts.config)
        self.single_observation_space, self.single_action_space = single_obs, single_act
        self.observation_space = batch_space(single_obs, opts.num_envs)
        self.action_space = batch_space(single_act, opts.num_envs)
        self.env_ranges: list[EnvRange] = split_envs(opts.num_envs, max(opts.num_workers, 1))
        self._io = BatchIO(self.env_ranges, single_obs.shape, single_act.shape, output=opts.output, copy=opts.copy,
                           main_device=opts.main_device, by_reference=opts.outputs_by_reference)  # fmt: skip
        base_seed = random_seed() if opts.seed is None else opts.seed
        pool = start_pool(opts, shard_specs(opts, self.env_ranges, base_seed), progress)
        self._client = ShardClient(pool, self._life, step_timeout=opts.step_timeout, base_seed=base_seed)
        self._restarts_crashed = opts.on_worker_failure == "restart" and pool.can_restart
        """A step tolerates worker crashes and restarts the crashed workers (``on_worker_failure="restart"``)."""
        self._send_crashes: Mapping[int, WorkerCrashedError] = {}
        self._frame_buffers: dict[int, torch.Tensor] = {}
        """Per shard: its frame buffer (shared memory for a worker), as the last render that sent one left it."""
        self._life.state = State.NEEDS_RESET

    # -- what users read ---------------------------------------------------------------------------------------

    def __getattr__(self, name: str) -> Any:
        """Options read as attributes (``env.backend``, ``env.num_workers``, ``env.task_class``, ...)."""
        options = self.__dict__.get("options")
        if options is not None and name in EnvOptions.__dataclass_fields__:
            return getattr(options, name)
        if name == "task_config" and options is not None:
            return options.config
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")

    @property
    def device(self) -> torch.device:
        """Where ``output="torch"`` outputs live (``main_device``)."""
        return self.options.main_device

    @property
    def worker_devices(self) -> list[str]:
        """Per worker: its device as the worker sees it (``"cuda:0"`` inside a worker pinned to one GPU)."""
        pool = self._open_pool()
        return list(pool.devices) if pool is not None else []

    @property
    def worker_gpu_uuids(self) -> list[str | None]:
        pool = self._open_pool()
        return list(pool.gpu_uuids) if pool is not None else []

    @property
    def worker_pids(self) -> list[int]:
        """Process ids of the workers (none with ``num_workers=0``)."""
        pool = self._open_pool()
        return [pid for pid in pool.pids if pid is not None] if pool is not None else []

    @property
    def worker_busy_seconds(self) -> list[float]:
        """Per worker: seconds spent executing commands since it (re)started. Against the wall time of the same
        steps, the rest is transport: pipes, waking up, the parent's action copies and gathers."""
        pool = self._open_pool()
        return list(pool.busy_seconds) if pool is not None else []

    @property
    def local_task(self) -> Task:
        """The task object itself, for inspection and tests; only with ``num_workers=0`` (else it is in a worker).
        Under ``cuda_graph`` (the default for capturable tasks on GPUs) write into its tensors rather than assign new
        ones, or assign through ``set_attr``, which captures the graph again: the replays read the old tensors."""
        pool = self._open_pool()
        shard = pool.local_shard if pool is not None else None
        if shard is None:
            raise AttributeError("local_task: the task lives in a worker process; use num_workers=0, or call()")
        return shard.task

    # -- Gymnasium API -------------------------------------------------------------------------------------------

    def reset(self, *, seed: int | list[int | None] | None = None, options: dict[str, Any] | None = None):
        """Reset every env, or those of ``options["reset_mask"]`` (a bool array of ``num_envs``).

        Args:
            seed: None keeps each env's random stream; an int ``s`` gives env ``i`` the seed ``s + i``; a list gives
                one seed (or None) per env. Any non-negative int is accepted.
            options: None, or ``{"reset_mask": mask}`` (numpy or torch bool, shape ``(num_envs,)``, some True).

        Returns:
            ``(observations, {})``: observations of every env (the reset ones new), float32 ``(num_envs, *obs)``
            on ``main_device`` (``output="torch"``), as a numpy array (``"numpy"``) or per worker (``"shards"``).
        """
        self._life.require(State.NEEDS_RESET, State.READY, action="reset")
        seeds = check_seed(seed, self.num_envs)
        mask = check_reset_mask(options, self.num_envs)
        if isinstance(seeds, int):
            super().reset(seed=seeds)  # np_random / np_random_seed follow the seed, as in Gymnasium
        requests: dict[int, tuple[Any, ...]] = {}
        for index, shard in enumerate(self.env_ranges):
            shard_mask = None if mask is None else mask[shard.offset : shard.stop]
            if shard_mask is not None and not shard_mask.any():
                continue
            shard_seeds = seeds[shard.offset : shard.stop] if isinstance(seeds, list) else seeds
            requests[index] = (shard_seeds, shard_mask)
        self._shards.run(Command.RESET, requests, "reset")
        self._life.state = State.READY
        return self._io.read(self._shards.shards, "observations"), {}

    def step_async(self, actions: Any) -> None:
        """Validate ``actions`` (float or int, ``(num_envs, *action_shape)``, on any device; checked for NaN/inf
        when ``check_actions``), write them into the shards' buffers and start the step. A rejected call raises
        ``ValueError``/``TypeError`` and changes nothing."""
        self._life.require(State.READY, action="step")
        parts = self._io.action_parts(actions)
        client = self._shards
        if self.options.actions_by_reference:
            requests: dict[int, tuple[Any, ...]] = {0: (parts[0],)}
        else:
            self._io.write_actions(client.shards, parts)
            requests = dict.fromkeys(client.all, ())
        self._send_crashes = client.send(Command.STEP, requests, tolerate_crashes=self._restarts_crashed)
        self._life.state = State.STEP_PENDING

    def step_wait(self, timeout: float | None = None):
        """Wait for the pending step (``timeout`` seconds, default the env's ``step_timeout``).

        Returns:
            ``(observations, rewards, terminated, truncated, info)``: float32 ``(num_envs, *obs)``, float32
            ``(num_envs,)``, bool ``(num_envs,)`` twice, laid out as ``output`` asks. ``info`` is empty except:
            under SAME_STEP with ``final_obs`` (the default), when some env finished, ``"final_obs"`` with its mask
            ``"_final_obs"``, and
            ``"final_info"``/``"_final_info"``: with ``output="numpy"`` exactly ``SyncVectorEnv``'s layout (an object
            array, the final observation where an env finished, None elsewhere); with tensors a dense batch of every
            env's pre-reset observation (no object arrays on a GPU; see ``BatchIO.same_step_info``); with
            ``on_worker_failure="restart"``, ``"worker_restarted"``/``"_worker_restarted"`` marking the envs of
            restarted workers. Raises ``WorkerError`` subclasses for worker failures, and ``ValueError`` for
            non-finite actions (see ``step_async``; the env stays usable).
        """
        self._life.require(State.STEP_PENDING, action="step_wait")
        timeout = as_seconds("timeout", timeout, allow_none=True)
        client = self._shards
        collected = client.collect(client.all, "step", timeout=timeout, tolerate_crashes=self._restarts_crashed,
                                   skip=list(self._send_crashes))  # fmt: skip
        crashed = {**self._send_crashes, **collected.crashed}
        restarted = client.restart(crashed) if crashed else []
        shards = client.shards
        self._life.state = State.READY
        outputs = self._io.read_step(shards)
        flags = self._read_step_flags(shards)
        info: dict[str, Any] = {}
        final_obs = self.autoreset_mode == AutoresetMode.SAME_STEP and self.options.final_obs
        if final_obs and (restarted or any(f.any_done for f in flags)):
            done = self._io.present([s.buffers.terminated | s.buffers.truncated for s in shards])
            info = self._io.same_step_info(shards, done)
        if restarted:
            marked = [torch.full_like(s.buffers.truncated, i in restarted) for i, s in enumerate(shards)]
            info["worker_restarted"] = info["_worker_restarted"] = self._io.present(marked)
        self._check_step(flags)
        return (*outputs, info)

    def _read_step_flags(self, shards: Sequence[OpenedShard]) -> list[StepFlags]:
        """Each shard's ``StepFlags``: with the checks on or under SAME_STEP the step's one host wait, here rather
        than in the workers so that they reply as soon as the step is queued. For a CUDA worker it waits on the
        worker's own event, not on this process's stream: the gathers queued above run once it fires, and no work of
        this process's needs the GPU before the host goes on. Otherwise no wait: flags that say nothing."""
        options = self.options
        if options.check_actions or options.check_observations or self.autoreset_mode == AutoresetMode.SAME_STEP:
            return [shard.step_flags() for shard in shards]
        return [StepFlags(all_finite=True, any_done=False)] * len(shards)

    def _check_step(self, flags: Sequence[StepFlags]) -> None:
        """When a shard's ``all_finite`` is False, ask that shard what: ``NonFiniteObservationError`` (the env
        fails) or the envs of non-finite actions, raised as ``ValueError`` with every shard still in step."""
        failing = [index for index, shard_flags in enumerate(flags) if not shard_flags.all_finite]
        if failing:
            rejected = self._shards.check_step(failing)
            if rejected:
                raise non_finite_actions_error(rejected)

    def step(self, actions: Any):
        """``step_async(actions)`` then ``step_wait()``; see both."""
        self.step_async(actions)
        return self.step_wait()

    def set_episode_steps(self, steps: Any) -> None:
        """Set every env's episode step counter: the control steps its current episode has taken, which the time
        limit counts (the step that brings a counter to ``max_episode_steps`` truncates the env).

        After ``set_episode_steps(s)``, env ``i`` is truncated by its ``max_episode_steps - s[i]``-th next step
        unless it terminates first, so ``s[i] = max_episode_steps - 1`` truncates it on the next step; task hooks
        that read ``episode_steps`` (command resampling, pushes) see the new values. Random counters spread episode
        ends over the batch, as rsl_rl's ``OnPolicyRunner.learn(init_at_random_ep_len=True)`` asks. Each worker
        gets the slice of its envs; ``get_attr("episode_steps")`` reads them back (one tensor per worker).

        Args:
            steps: ``num_envs`` ints in ``[0, max_episode_steps)``, env ``i`` at index ``i``: a torch tensor (any
                device), a numpy array or a list/tuple, of an integer dtype (not bool).

        Raises:
            TypeError: ``steps`` is not a tensor, array or list, or its dtype is not an integer one.
            ValueError: the shape is not ``(num_envs,)``, or values are out of range (up to 10 envs named).
            StepPendingError: a step is pending (call ``step_wait()`` first).

        A rejected call changes nothing. ``reset()`` sets the counters of the envs it resets to 0; under NEXT_STEP
        an env that finished on the last step is reset by the next step, which starts its counter from 0 whatever
        was set here.
        """
        self._life.require(State.NEEDS_RESET, State.READY, action="set_episode_steps")
        values = check_episode_steps(steps, self.num_envs, self.options.config.max_episode_steps)
        requests = {index: (values[shard.offset : shard.stop],) for index, shard in enumerate(self.env_ranges)}
        self._shards.run(Command.SET_EPISODE_STEPS, requests, "set_episode_steps")

    def call(self, name: str, *args: Any, **kwargs: Any) -> tuple[Any, ...]:
        """Call the task method ``name`` (or read the attribute) in every worker; one result per worker.
        ``call("render")`` is Gymnasium's: one frame per env, or None per env without a render mode."""
        if name == "render":
            return self.render() or (None,) * self.num_envs
        return self.call_workers(None, name, *args, **kwargs)

    def call_workers(self, workers: Sequence[int] | None, name: str, *args: Any, **kwargs: Any) -> tuple[Any, ...]:
        """``call`` on the given worker indices only (all when None); one result per worker asked."""
        requests = {i: (name, args, kwargs) for i in self._shards.indices(workers)}
        return tuple(self._shards.run(Command.CALL, requests, f"call {name!r}"))

    def get_attr(self, name: str, workers: Sequence[int] | None = None) -> tuple[Any, ...]:
        """The task attribute ``name`` of every worker (or of ``workers``); one value per worker."""
        requests = {i: (name,) for i in self._shards.indices(workers)}
        return tuple(self._shards.run(Command.GET_ATTR, requests, f"get_attr {name!r}"))

    def set_attr(self, name: str, values: Any, workers: Sequence[int] | None = None) -> None:
        """Set the existing task attribute ``name`` in every worker (or in ``workers``): one value for all, or a
        list/tuple of one value per worker. With ``cuda_graph`` on the next step captures the graph again, so that a
        tensor set here is read by it (a task method run through ``call`` that replaces a tensor the hooks read
        breaks ``Task.capturable``'s promise: write into it instead)."""
        indices = self._shards.indices(workers)
        if isinstance(values, (list, tuple)):
            if len(values) != len(indices):
                raise ValueError(f"set_attr: expected one value per worker ({len(indices)}), got {len(values)}")
        else:
            values = [values] * len(indices)
        requests = {i: (name, v) for i, v in zip(indices, values, strict=True)}
        self._shards.run(Command.SET_ATTR, requests, f"set_attr {name!r}")

    def render(self) -> tuple[np.ndarray, ...] | None:
        """The frames of every env for ``render_mode``, as Gymnasium's vector API defines them; None without one.

        Returns:
            ``render_mode="rgb_array"``: a tuple of ``num_envs`` numpy uint8 ``(H, W, 3)`` RGB frames, env ``i`` at
            index ``i`` (``SyncVectorEnv.render``'s layout, so Gymnasium's vector ``RecordVideo`` and
            ``HumanRendering`` take it as is). Each frame comes from a camera that follows env ``i``'s subject (the
            cart, the robot's base, the arm and its target); the size is the task's (320x240 for the built-in tasks).
            ``render_mode=None``: None (no camera exists).

        Every env is drawn separately (Genesis' ``split_envs``: its default draws all envs into one image, on top
        of each other), so a render costs about one rasterizer pass per env (~10 ms per frame on a CPU core): render
        an evaluation-sized env, not a training batch of thousands. Workers write their frames into a frame buffer
        in shared memory, sent once; the pipe carries no pixels, and the frames returned are this process's own
        copies. Raises ``WorkerError`` subclasses for worker failures, and for frames that are not uint8
        ``(num_envs, H, W, 3)`` (``remote_type`` ``"TaskOutputError"``).
        """
        if self.render_mode is None:
            return None
        replies = self._shards.run(Command.RENDER, dict.fromkeys(self._shards.all, ()), "render")
        for index, buffer in enumerate(replies):
            if buffer is not None:  # a new buffer (first render, new size, restarted worker); None: the same one
                self._frame_buffers[index] = buffer
        return tuple(np.array(frame) for index in self._shards.all for frame in self._frame_buffers[index].numpy())

    def close_extras(self, timeout: float | None = None, **kwargs: Any) -> None:
        """``close(timeout=None)``: ask the workers to stop and give them ``timeout`` s (default 5), then terminate
        and kill what is left: returns within about ``timeout + 2`` s whatever the task's cleanup does, every worker
        reaped. Idempotent; raises only for a bad ``timeout`` (and then closes nothing)."""
        grace = 5.0 if timeout is None else as_seconds("timeout", timeout, allow_none=False)
        self._life.state = State.CLOSED
        if self._client is not None:
            self._client.close(grace)

    def __del__(self) -> None:
        # not contextlib.suppress: __del__ may run at interpreter exit, when module globals may already be gone
        try:  # noqa: SIM105
            self.close()
        except Exception:
            pass

    @property
    def _shards(self) -> ShardClient:
        if self._client is None:  # construction failed
            self._life.require(State.READY, action="use")
        assert self._client is not None
        return self._client

    def _open_pool(self) -> ShardPool | None:
        return self._client.open_pool if self._client is not None else None
