"""One batched Genesis scene and the Gymnasium step semantics around it.

An ``EnvShard`` owns envs ``[env_offset, env_offset + num_envs)`` of the vector env. It runs inside a worker
process, or in the parent for the in-process reference, and behaves identically in both: actions are read from and
results written to its preallocated ``ShardBuffers`` (in process, actions may come as the step's argument and outputs
by reference: see ``step`` and ``ShardSpec.outputs_by_reference``), and the autoreset mode is applied here, next to
the simulation, so that a step costs one round trip whatever the mode.

A step computes two flags on its device and copies them, in one copy and without a wait, into host memory
(``ShardBuffers.step_flags``, ``gs_gym.vector.flags``): whether the values ``check_actions`` and
``check_observations`` (both on by default) cover were all finite, and whether some env finished. The env reads both
after the step (its one host wait, in the parent, so that a worker replies as soon as its step is queued), and only
when the first is False asks the shard which envs and values (``check_step``). Non-finite actions are therefore
found after the step: the task is given them with NaN and inf replaced by 0, and the env raises a ``ValueError``
naming the envs with every shard still in step.

In process with ``copy=True`` the env returns the buffers as they are, so the shard points them at tensors nothing
writes again instead of copying into them (``ShardSpec.outputs_by_reference``): those it computes itself, the task's
own when the task makes them fresh on every call (``Task.fresh_outputs``), clones of them otherwise.

Resets go to the task as boolean masks, so that the host never looks at which envs are done. The previous step's
"any env done", copied to the host without a wait, lets steps skip resets that would change nothing (a Genesis
``set_qpos`` costs about a third of a ``scene.step``'s host time): under NEXT_STEP a step after one in which no env
finished resets nothing; under SAME_STEP a step after one in which some env finished (nearly every step of a large
batch) resets by its ``done`` mask without looking, and only a step after a quiet one waits for its own flag, so
that a step in which no env finished resets nothing. SAME_STEP observes twice in a step that resets (the final
observations, then the new episodes'), unless ``ShardSpec.final_observations`` is off: then once, after the resets.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import numpy as np
import torch
from gymnasium.vector import AutoresetMode

from gs_gym.errors import NonFiniteObservationError, TaskOutputError
from gs_gym.tasks.base import Task, TaskConfig, TaskContext
from gs_gym.tasks.runtime import KERNEL_CACHE, init_genesis
from gs_gym.transport.buffers import Handshake, ShardBuffers, SyncEvents
from gs_gym.vector.capture import CapturedStep, Outputs
from gs_gym.vector.flags import StepFlagValues

IMPORTING_GENESIS = "importing genesis"
"""Build stage: importing Genesis and ``gs.init`` (seconds)."""
BUILDING_SCENE = "building scene"
"""Build stage: the task builds its scene; a first build compiles Genesis kernels (minutes), later ones load them."""
_STEP_OUTPUT_ORDER = ("observations", "rewards", "terminated", "truncated")
"""The buffers every step and reset writes together, in ``ShardBuffers.step_outputs``'s order."""
_STEP_OUTPUTS = set(_STEP_OUTPUT_ORDER)


def kernel_cache_notice() -> str:
    """One line for the user about the kernel cache (its location as ``gs-gym info`` reports it)."""
    return f"the first build of a scene compiles Genesis kernels (minutes); later builds load them from {KERNEL_CACHE}"


def _ignore_stage(stage: str) -> None:
    """The ``report`` of a shard whose build nobody displays."""


@dataclasses.dataclass(frozen=True)
class ShardSpec:
    """Everything a process needs to build one shard; cloudpickled to workers."""

    task_class: type[Task]
    config: TaskConfig
    num_envs: int
    env_offset: int
    backend: str
    autoreset_mode: AutoresetMode
    base_seed: int
    performance_mode: bool = False
    share_buffers: bool = False
    """Export the buffers to another process (shared memory on the host, CUDA IPC with sync events on a GPU)."""
    host_buffers: bool = False
    """Keep the buffers in host memory even when the simulation runs on a GPU (one copy each way per step)."""
    check_actions: bool = True
    """Give the task NaN and inf actions as 0; the ``ALL_FINITE`` step flag covers them and ``check_step`` names the
    envs."""
    check_observations: bool = True
    """The ``ALL_FINITE`` step flag covers the step's observations and rewards, and ``check_step`` raises
    ``NonFiniteObservationError`` for them; a reset raises it at once."""
    genesis_logging_level: str = "warning"
    """``gs.init(logging_level=...)``: what Genesis itself prints (in a worker: through the worker's output)."""
    render_mode: str | None = None
    """The task's ``render_mode`` (``TaskContext.render_mode``): None adds no camera to the scene."""
    final_observations: bool = True
    """SAME_STEP: observe before the resets too, for ``buffers.final_observations`` (``EnvOptions.final_obs``)."""
    cuda_graph: bool = False
    """Replay the task's output hooks and the step's bookkeeping after them from one CUDA graph
    (``EnvOptions.cuda_graph``; the task is capturable)."""
    outputs_by_reference: bool = False
    """Point the output buffers at tensors that nothing here writes again, instead of copying into them, so that the
    env can return them as they are (in process, ``copy=True``: ``EnvOptions.outputs_by_reference``): the ones the
    shard computes (``truncated``, masked rewards), the task's own where ``Task.outputs_are_fresh``, else clones."""


def check_output(
    task: str, hook: str, value: Any, shape: tuple[int, ...], dtype: torch.dtype, device: torch.device
) -> None:
    """Raise ``TaskOutputError`` unless ``value`` is a tensor of ``shape``, ``dtype`` on ``device`` (metadata only: no
    kernel, no wait). Without this a wrong shape would be broadcast into the buffers without a word."""
    if isinstance(value, torch.Tensor) and value.shape == shape and value.dtype == dtype and value.device == device:
        return
    got = (
        f"{str(value.dtype).removeprefix('torch.')} of shape {tuple(value.shape)} on {value.device}"
        if isinstance(value, torch.Tensor)
        else type(value).__name__
    )
    expected = f"{str(dtype).removeprefix('torch.')} tensor of shape {shape} on {device}"
    raise TaskOutputError(f"task {task!r} {hook}: expected a {expected}, got {got}")


def check_frames(task: str, frames: Any, num_envs: int) -> torch.Tensor:
    """``frames`` (what a task's ``render`` returned) as a host tensor, or ``TaskOutputError`` unless it is a uint8
    array of shape ``(num_envs, H, W, 3)``."""
    is_array = isinstance(frames, np.ndarray)
    if is_array and frames.dtype == np.uint8 and frames.ndim == 4 and frames.shape[::3] == (num_envs, 3):
        return torch.from_numpy(np.ascontiguousarray(frames))
    got = f"{frames.dtype} array of shape {frames.shape}" if is_array else type(frames).__name__
    raise TaskOutputError(f"task {task!r} render: expected a uint8 array of shape ({num_envs}, H, W, 3), got {got}")


@dataclasses.dataclass(frozen=True)
class StepResults:
    """What a step computes after the physics, before any SAME_STEP reset (``EnvShard._step_results``)."""

    observations: torch.Tensor | None
    """None when the step observes only after its resets (SAME_STEP without final observations)."""
    rewards: torch.Tensor
    terminated: torch.Tensor
    truncated: torch.Tensor
    done: torch.Tensor


class EnvShard:
    """A built task plus its buffers, the episode bookkeeping and the autoreset mode."""

    def __init__(self, spec: ShardSpec, report: Callable[[str], None] | None = None) -> None:
        """Build the shard; ``report(stage)`` is told when it reaches ``IMPORTING_GENESIS`` and ``BUILDING_SCENE``."""
        report = report or _ignore_stage
        report(IMPORTING_GENESIS)
        init_genesis(spec.backend, performance_mode=spec.performance_mode, logging_level=spec.genesis_logging_level)
        import genesis as gs

        self.spec = spec
        self.device = torch.device(gs.device)
        report(BUILDING_SCENE)
        self.context = TaskContext.create(
            spec.num_envs, spec.env_offset, self.device, spec.base_seed, render_mode=spec.render_mode
        )
        self.task = spec.task_class(spec.config, self.context)
        self.task.build()
        obs_space, act_space = spec.task_class.spaces(spec.config)
        buffer_device = torch.device("cpu") if spec.host_buffers else self.device
        self.buffers = ShardBuffers.allocate(spec.num_envs, obs_space.shape, act_space.shape, buffer_device)
        self.events: SyncEvents | None = None
        if spec.share_buffers:
            self.buffers.share()
            if buffer_device.type == "cuda":
                self.events = SyncEvents.create()
        if buffer_device.type == "cuda":
            self.buffers.lock_step_flags()
        self._flags = StepFlagValues(self.buffers.step_flags, self.device)
        """The step flags as the step computes them, copied to ``buffers.step_flags`` once per step; the last step's
        "any env done" is polled from there at the next (see the module docstring)."""
        self._max_steps = spec.config.max_episode_steps
        self._needs_reset = torch.zeros(spec.num_envs, dtype=torch.bool, device=self.device)
        """NEXT_STEP: the envs that finished in the last step, reset at the start of the next (written in place
        under ``cuda_graph``, whose replays read it)."""
        self._all = torch.ones(spec.num_envs, dtype=torch.bool, device=self.device)
        self._clone_task_outputs = spec.outputs_by_reference and not spec.task_class.outputs_are_fresh()
        """Buffers by reference, and the task may write into what its hooks returned: hand out clones of them."""
        self._step_actions = self.buffers.actions
        """The actions the last step read (``step``'s argument or the buffer), for ``check_step``."""
        self._obs_shape = (spec.num_envs, *obs_space.shape)
        self._frames: torch.Tensor | None = None
        """The shared frame buffer the parent holds (``render`` in a worker); None before the first render."""
        self._graph: CapturedStep[StepResults] | None = None
        """``spec.cuda_graph``: the graph of ``_step_results``, captured at the first step (the state is read by
        then)."""
        actions_elsewhere = spec.cuda_graph and self.buffers.actions.device != self.device
        self._graph_actions = (
            torch.zeros_like(self.buffers.actions, device=self.device) if actions_elsewhere else self.buffers.actions
        )
        """``spec.cuda_graph``: the actions the graph checks (the buffer itself where it lies on the shard's
        device)."""

    @property
    def flags_landed(self) -> torch.cuda.Event | None:
        """The event recorded after each copy of the step flags to the host (None on the CPU backend)."""
        return self._flags.landed

    def handshake(self) -> Handshake:
        return Handshake.export(self.buffers, self.events, self.device)

    # -- commands --------------------------------------------------------------------------------------------

    def reset(self, seeds: int | list[int | None] | None, mask: np.ndarray | None) -> None:
        """Reset the envs selected by ``mask`` (all when None) and write every env's observation.

        ``seeds``: an int re-seeds env ``g`` (global index) with ``seeds + g``; a list gives one seed (or None,
        keep the stream) per local env; None keeps every stream. With a mask, only masked envs are re-seeded.
        """
        self._await_parent()
        random, offset = self.context.random, self.spec.env_offset
        reset_mask = self._all if mask is None else torch.as_tensor(mask, device=self.device)
        if isinstance(seeds, int):
            if mask is None:
                random.seed_range(seeds)
            else:
                random.seed([seeds + offset + i if chosen else None for i, chosen in enumerate(mask.tolist())])
        elif seeds is not None:
            chosen = [True] * len(seeds) if mask is None else mask.tolist()
            # not strict: random.seed names a list of the wrong length in its own error
            random.seed([seed if keep else None for seed, keep in zip(seeds, chosen, strict=False)])
        self._reset(reset_mask)
        self._needs_reset &= ~reset_mask  # NEXT_STEP: not again at the next step
        self.task.read_state()
        observations = self._observe()
        if self.spec.check_observations:
            self._raise_non_finite(observations, None)  # a host wait: resets are not on the hot path
        n, device = self.spec.num_envs, self.device
        # new tensors each time: by reference they are handed out, and the caller may write into them
        none = torch.zeros(n, dtype=torch.bool, device=device)
        self._publish(observations=observations, rewards=torch.zeros(n, device=device), terminated=none,
                      truncated=none.clone())  # fmt: skip
        self._release_to_parent()

    def step(self, actions: torch.Tensor | None = None) -> None:
        """Apply ``buffers.actions``, advance one control step and write the results under the autoreset mode.

        ``actions``: in process, the caller's checked float32 batch itself instead of ``buffers.actions``. Only with
        ``check_actions``, whose NaN-free copy is what the task gets: a copy into the buffer first would be a second.
        """
        self._await_parent()
        task, mode, steps = self.task, self.spec.autoreset_mode, self.context.episode_steps
        self._step_actions = self.buffers.actions if actions is None else actions
        actions = self._step_actions.to(self.device, non_blocking=self.device.type == "cuda")
        task.apply_actions(actions.nan_to_num(0.0, posinf=0.0, neginf=0.0) if self.spec.check_actions else actions)
        task.simulate()
        steps += 1
        next_step = mode == AutoresetMode.NEXT_STEP
        # the last step's flag, long landed: a step after which no env finished resets nothing
        pending = self._needs_reset if next_step and self._flags.poll_any_done(default=True) else None
        if pending is not None:
            self._reset(pending)
        task.read_state()
        same_step = mode == AutoresetMode.SAME_STEP
        observes_once = same_step and not self.spec.final_observations  # after the resets, below
        if self.spec.cuda_graph:
            results = self._replayed_results(actions, observes_once)
        else:
            observations = None if observes_once else self._observe()
            results = self._step_results(observations, *self._rewards_and_terminated(), pending, actions)
        observations, rewards, terminated, truncated, done = (
            results.observations, results.rewards, results.terminated, results.truncated, results.done
        )  # fmt: skip
        replayed = self.spec.cuda_graph  # the results are the graph's tensors, written again by the next replay
        if next_step:
            self._flags.start()
            if replayed:
                self._needs_reset.copy_(done)
            else:
                self._needs_reset = done
        elif same_step:
            resets = self._flags.poll_any_done(default=True)  # the last step's: see the module docstring
            self._flags.start()
            resets = resets or self._flags.any_done()
            if observations is not None:
                self._publish(replayed, final_observations=observations)  # a reset's observe below makes a new one
            if resets:
                self._reset(done)
                task.read_reset_state(done)
            if resets or observations is None:
                observations = self._observe()
            if observes_once and self._flag_non_finite(observations, rewards, actions):
                self._flags.start()  # again: ALL_FINITE was written after the copy above
        assert observations is not None  # observed above unless observes_once, and then in the SAME_STEP branch
        self._publish(replayed, observations=observations, rewards=rewards, terminated=terminated, truncated=truncated)
        self._release_to_parent()

    def _step_results(
        self,
        observations: torch.Tensor | None,
        rewards: torch.Tensor,
        terminated: torch.Tensor,
        pending: torch.Tensor | None,
        actions: torch.Tensor,
    ) -> StepResults:
        """The time limit and the task's own truncation, the envs ``pending`` (reset at this step's start) given reward
        0 and not done, the step flags written (unless ``observations`` is None: then after the resets). No host
        wait, no Genesis call: captured with the hooks under ``cuda_graph``."""
        task, rows = self.task, (self.spec.num_envs,)
        truncated = self.context.episode_steps >= self._max_steps
        extra = task.compute_truncated()
        if extra is not None:
            check_output(task.name, "compute_truncated", extra, rows, torch.bool, self.device)
            truncated = truncated | extra
        if pending is not None:  # the envs reset above start over: reward 0, not done (one kernel each)
            rewards = torch.where(pending, 0.0, rewards)
            terminated = torch.where(pending, False, terminated)
            truncated = torch.where(pending, False, truncated)
        if observations is not None:
            self._flag_non_finite(observations, rewards, actions)
        done = terminated | truncated
        self._flags.count_done(done)
        return StepResults(observations, rewards, terminated, truncated, done)

    def _replayed_results(self, actions: torch.Tensor, observes_once: bool) -> StepResults:
        """``_step_results`` replayed from the CUDA graph, captured at the first step (``gs_gym.vector.capture``).

        The graph reads tensors that keep their storage: under NEXT_STEP it always masks ``_needs_reset`` (all False
        after a step in which no env finished, where the eager step skips the masking: the same values), and the
        actions it checks are ``_graph_actions``, into which actions given otherwise are copied first."""
        checked = self._graph_actions
        if self.spec.check_actions and actions is not checked:
            checked.copy_(actions)  # in process (the step's argument), or host buffers
        if self._graph is None:
            next_step = self.spec.autoreset_mode == AutoresetMode.NEXT_STEP
            pending = self._needs_reset if next_step else None

            def step_results() -> tuple[Outputs, StepResults]:
                outputs = self._hook_outputs()
                observations = None if observes_once else outputs[0]
                return outputs, self._step_results(observations, outputs[1], outputs[2], pending, checked)

            self._graph = CapturedStep.capture(self.task.name, step_results, self._hook_outputs, self.device)
        return self._graph.replay()

    def check_step(self) -> tuple[int, ...]:
        """What made the last step's ``ALL_FINITE`` flag False, from the values it left in the buffers: raise
        ``NonFiniteObservationError`` naming the hook and the envs (``check_observations``); else the global indices
        of the envs whose actions held NaN or inf (``check_actions``; the task got them as 0). Empty when every
        value is finite (a float32 overflow of a sum of finite values also clears the flag)."""
        buffers, spec = self.buffers, self.spec
        if spec.check_observations:
            pre_reset = spec.autoreset_mode == AutoresetMode.SAME_STEP and spec.final_observations
            checked = buffers.final_observations if pre_reset else buffers.observations
            self._raise_non_finite(checked, buffers.rewards)
        if not self.spec.check_actions:
            return ()
        bad = ~torch.isfinite(self._step_actions).reshape(self.spec.num_envs, -1).all(dim=1)
        return tuple(self.spec.env_offset + i for i in bad.nonzero().flatten().tolist())

    def call(self, name: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        """Call the task's method ``name``, or return its attribute when it is not callable."""
        attribute = getattr(self.task, name)
        return attribute(*args, **kwargs) if callable(attribute) else attribute

    def get_attr(self, name: str) -> Any:
        return getattr(self.task, name)

    def set_attr(self, name: str, value: Any) -> None:
        """Set the task's existing attribute ``name``. Under ``cuda_graph`` the graph is captured again at the next
        step (and its first replays checked again): the value may be a tensor the hooks read, which the graph would
        otherwise go on reading from the replaced one."""
        if not hasattr(self.task, name):
            raise AttributeError(f"task {self.task.name!r} has no attribute {name!r} to set")
        setattr(self.task, name, value)
        self._graph = None

    def set_episode_steps(self, steps: np.ndarray) -> None:
        """Overwrite ``context.episode_steps`` with ``steps`` (int64, one per env of this shard, checked by the
        parent): the next step counts from there, so an env set to ``max_episode_steps - 1`` is truncated by it."""
        self.context.episode_steps.copy_(torch.as_tensor(steps, dtype=torch.int64))

    def render(self) -> torch.Tensor | None:
        """The task's frames as a uint8 ``(num_envs, H, W, 3)`` host tensor (checked), for ``Command.RENDER``.

        In a worker (``share_buffers``) the frames go into a frame buffer in shared memory: the first render, and
        one whose frames changed size, returns that buffer, which crosses the pipe once as a file descriptor; later
        renders overwrite it and return None ("in the buffer you have"), so the pipe carries no pixels. In process
        the frames themselves come back.
        """
        frames = check_frames(self.task.name, self.task.render(), self.spec.num_envs)
        if not self.spec.share_buffers:
            return frames
        if self._frames is not None and self._frames.shape == frames.shape:
            self._frames.copy_(frames)
            return None
        self._frames = frames.clone().share_memory_()
        return self._frames

    def close(self) -> None:
        self.task.close()

    # -- helpers ---------------------------------------------------------------------------------------------

    def _task_output(self, hook: str, value: Any, shape: tuple[int, ...], dtype: torch.dtype) -> torch.Tensor:
        """What ``hook`` returned, checked, as this shard may publish it: a clone where buffers by reference would
        otherwise hold a tensor the task writes again."""
        check_output(self.task.name, hook, value, shape, dtype, self.device)
        return value.clone() if self._clone_task_outputs else value

    def _observe(self) -> torch.Tensor:
        return self._task_output("observe", self.task.observe(), self._obs_shape, torch.float32)

    def _rewards_and_terminated(self) -> tuple[torch.Tensor, torch.Tensor]:
        task, rows = self.task, (self.spec.num_envs,)
        rewards = self._task_output("compute_rewards", task.compute_rewards(), rows, torch.float32)
        return rewards, self._task_output("compute_terminated", task.compute_terminated(), rows, torch.bool)

    def _hook_outputs(self) -> Outputs:
        """The three output hooks called (in the step's order) and checked, as the graph captures them."""
        observations = self._observe()
        return (observations, *self._rewards_and_terminated())

    def _reset(self, mask: torch.Tensor) -> None:
        self.task.reset_envs(mask)
        self.context.episode_steps.masked_fill_(mask, 0)

    def _publish(self, replayed: bool = False, **outputs: torch.Tensor) -> None:
        """Make each tensor of ``outputs`` (keyed by buffer name) the content of that buffer: copied into it, or the
        buffer pointed at it (``spec.outputs_by_reference``; at copies of them when ``replayed``: the graph's
        tensors, which its next replay writes again). The four step outputs together, on the buffers' device, are
        copied by one kernel (``ShardBuffers.publish_step_outputs``, ``copy_step_outputs``)."""
        buffers = self.buffers
        if self.spec.outputs_by_reference:
            if replayed and outputs.keys() == _STEP_OUTPUTS:
                copies = buffers.copy_step_outputs(**outputs)
                outputs = dict(zip(_STEP_OUTPUT_ORDER, copies, strict=True))
            elif replayed:
                outputs = {name: value.clone() for name, value in outputs.items()}
            for name, value in outputs.items():
                setattr(buffers, name, value)
        elif outputs.keys() == _STEP_OUTPUTS and buffers.step_outputs.device == self.device:
            buffers.publish_step_outputs(**outputs)
        else:
            for name, value in outputs.items():
                getattr(buffers, name).copy_(value)

    def _flag_non_finite(self, observations: torch.Tensor, rewards: torch.Tensor, actions: torch.Tensor) -> bool:
        """Write the sum of the values the checks that are on cover at the ``ALL_FINITE`` step flag, without waiting,
        in two kernels (one ``cat``, one sum): it is finite unless one of them is NaN or inf (or finite values
        overflow float32, which ``check_step`` then clears). Returns whether any check is on (the flag was written)."""
        parts = [observations.reshape(-1), rewards] if self.spec.check_observations else []
        if self.spec.check_actions:
            parts.append(actions.reshape(-1))
        if parts:
            self._flags.sum_checked(torch.cat(parts))
        return bool(parts)

    def _raise_non_finite(self, observations: torch.Tensor, rewards: torch.Tensor | None) -> None:
        """Raise ``NonFiniteObservationError`` naming the hook and the envs (nothing when every value is finite)."""
        bad_obs = ~torch.isfinite(observations).reshape(self.spec.num_envs, -1).all(dim=1)
        if bool(bad_obs.any()):
            raise NonFiniteObservationError(self._non_finite_message("observe", bad_obs))
        if rewards is not None and not bool(torch.isfinite(rewards).all()):
            raise NonFiniteObservationError(self._non_finite_message("compute_rewards", ~torch.isfinite(rewards)))

    def _non_finite_message(self, hook: str, bad: torch.Tensor) -> str:
        local = bad.nonzero().flatten().tolist()
        shown = [self.spec.env_offset + i for i in local[:10]]
        more = f" and {len(local) - 10} more" if len(local) > 10 else ""
        what = "observations" if hook == "observe" else "rewards"
        return (
            f"non-finite {what} from task {self.task.name!r} ({hook}) in envs {shown}{more} "
            f"(global indices; local {local[:10]})"
        )

    def _await_parent(self) -> None:
        """The parent's queued work on the buffers (action copies, output reads) comes first (CUDA IPC only)."""
        if self.events is not None:
            torch.cuda.current_stream(self.device).wait_event(self.events.parent_done)

    def _release_to_parent(self) -> None:
        """Mark the end of this command's writes for the parent's stream (CUDA IPC only; no host wait)."""
        if self.events is not None:
            self.events.worker_done.record(torch.cuda.current_stream(self.device))
