"""go2-walk through gs_gym against a Go2 env written the way Genesis's locomotion example writes it (issue 14, item 5).

    python bench/go2_vs_reference.py                                        # on the GPU: 4096 envs, every path
    python bench/go2_vs_reference.py --backend cpu --n-envs 64 --steps 50   # smoke run on a CPU machine

For each task and n_envs, one path after the other in this process (path c also in one worker process; with
``--apart`` each path in a process of its own, see ``measure_paths_apart``):

  a            ``Go2ReferenceEnv`` (``bench/go2_reference.py``): the example's style, same physics and terms (go2 only)
  b            ``GenesisVectorEnv(n, task, num_workers=0)`` with default options
  b-nochecks   the same with ``check_actions=False, check_observations=False``
  b-copyfalse  the same with ``copy=False`` (not run unless asked)
  b-noact      the same with ``check_actions=False`` (not run unless asked: the action check's few kernels)
  c-nochecks   path c with ``check_actions=False, check_observations=False`` (what the checks' one wait costs there)
  c-nospin     path c with ``spin_wait_us=0``: parent and worker sleep on their pipes (the default on GPUs spins
               when the machine has the cores, ``gs_gym.transport.spinning``)
  c-copyfalse  path c with ``copy=False``: the parent launches no clone of the outputs (what those copies cost)
  c            ``GenesisVectorEnv(n, task, num_workers=1)``: the default multi-process path (CUDA IPC on a GPU,
               shared memory on the CPU backend)
  d            the task's raw hooks, no resets and no wrapper: ``apply_actions, simulate, read_state, observe,
               compute_rewards, compute_terminated`` on a task built with ``Task(config, TaskContext.create(...))``,
               its episode ends lifted as in path b' (since 2026-12-07, 6e83dee's go2-walk: a tilt limit that cannot be
               passed is not checked; franka-reach without ``terminate_on_success`` never checked its success)
  b'           path b with episode ends lifted (no termination, no time limit): the same work as d plus the wrapper
               (on the command line also ``b-noends``)
  b'-nochecks  path b' with ``check_actions=False, check_observations=False``: the wrapper without its one wait
  b'-nowait    path b' with the checks on but the step's host wait for its flags taken out (not a user option: the
               env reads the flags as they are, so this path would miss a NaN): b'-nochecks to b'-nowait is what
               the checks' kernels cost, b'-nowait to b' what the wait costs (not run unless asked)
  idle         an in-process env (default options) over a task of no scene (``FreshIdleTask`` of
               ``bench/wrapper_overhead.py``, go2's spaces, episodes never end): the wrapper's own cost, alone
  d+idle       path d's step, then a step of path idle's env, in one process: whether the wrapper's cost adds to
               the task's as it is alone (d+idle - d = idle), or costs more beside a real step, as b' - d suggests
               (neither run unless asked)
  b-fused      path b with the task object's ``observe``, ``compute_rewards`` and ``compute_terminated`` patched into
               one ``torch.compile``d function (``fuse_task_outputs``; not a user option, not run unless asked): what
               fusing the task's math would save in a real step (``bench/fused_hooks.py`` costs the three alone)
  b-cudagraph  path b with ``cuda_graph=True`` (go2-walk, franka-reach): the env's own capture of the output hooks and
               its bookkeeping (the default on the GPU backend for these tasks since 68c56eb's measurement)
  c-cudagraph  path c with ``cuda_graph=True``
  b-eager      path b with ``cuda_graph=False``: the hooks called as they are (the default before)
  c-eager      path c with ``cuda_graph=False``
  b'-eager     path b' with ``cuda_graph=False`` (none of these five run unless asked)
  b-graph      path b on go2-walk with the torch math of ``read_state``, ``observe``, ``compute_rewards`` and
               ``compute_terminated`` captured once in a CUDA graph and replayed each step (``capture_task_outputs``;
               bench only, not run unless asked): what a task written for capture (state in fixed tensors) would
               save; on the CPU the same plumbing runs eagerly, which checks it against path b

Every step gets fresh random actions drawn on the env's device, uniform in the action box (``--action-scale``
shrinks it), so robots fall and episodes end and reset in a, b and c (the rate is reported). A path is built and
reset, stepped ``--warmup`` times; once every path is built, the paths are timed in ``--repeats`` interleaved
rounds of one block of ``--steps`` steps each (a slow spell of the machine hits every path alike; the host's
speed varies by 10% and more between minutes on the lent H200), the device synchronized only before and after each
timed block (torch's stream and, on the GPU, quadrants' ``qd.sync()``);
env-steps/s and us/step are the medians of the repeats; for the worker paths also the worker's own time per step
(``GenesisVectorEnv.worker_busy_seconds``: from reading the command to having its reply ready, its end-of-step wait
for the GPU included), so that us/step minus busy is what waking, the pipe and the parent cost. With
``--hook-timers`` the gs_gym paths run the task with each hook's host time recorded (``with_hook_timers``): the
same hooks in process and in a worker, to tell a slower launch on the host from a slower GPU; and after the
timing, ``--profile-steps`` steps are profiled in the process that runs the task (the worker's for path c): its
kernels, its host syncs and how long they block the host per step. Then, outside the timing:

  Genesis calls per step   the outermost calls into the public methods of Genesis's ``RigidEntity``,
                           ``RigidLink``, ``RigidJoint`` and ``Scene.step`` over ``--count-steps`` steps (the
                           methods are wrapped for those steps only; calls made inside Genesis are not counted
                           again). Path c's are those of in-process path b: its worker runs the same shard code, in
                           another process where the wrappers cannot see.
  CUDA kernels per step    kernel launches recorded by ``torch.profiler`` (``ProfilerActivity.CUDA``, CUPTI) over
                           ``--profile-steps`` steps, split into torch's own kernels and the others (quadrants', which
                           Genesis launches through the CUDA driver; path d also profiles one bare ``scene.step()``
                           to show whether they are seen). For c these are the parent's launches only (the worker's
                           are b's). None on the CPU backend.
  GPU busy us per step     the summed duration of those kernels and copies: far below us/step, the host is the
                           bottleneck (Python and launch overhead), near it the GPU is
  host syncs per step      calls that make the host wait for the device (``cudaStreamSynchronize`` and kin, which
                           ``.item()``, ``.tolist()`` and blocking host-to-device copies of index lists make)

Prints a table and the ratios b/a, c/b, b'/d (and b'-eager/d when run), and writes JSON to ``--out`` after every path
(a run cut short keeps what it measured): ``{"machine": ..., "settings": ..., "tasks": {task: {n_envs: {"paths":
{name: {...}}, "ratios": {"in_process_vs_reference": b/a, "default_vs_in_process": c/b, "no_ends_vs_raw": b'/d,
"no_ends_eager_vs_raw": b'-eager/d}, "paired_ratios": {the same keys}}}}}``: ``ratios`` divides the paths' median
speeds, ``paired_ratios`` takes the median over rounds of the two paths' ratio within each round (robust to the host's
drift between rounds). A path that fails is recorded with its error and the run goes on.
"""

from __future__ import annotations

import argparse
import collections
import concurrent.futures
import contextlib
import dataclasses
import gc
import importlib.metadata
import json
import math
import os
import platform
import statistics
import subprocess
import sys
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

# before torch: else torch.compile's C++ build (path b-fused, CPU backend) on Python 3.11 trips setuptools' distutils
import setuptools  # noqa: F401
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout without installing
sys.path.insert(0, str(Path(__file__).resolve().parent))

from go2_reference import Go2ReferenceEnv, check_same_scene_options

from gs_gym.tasks import resolve_task
from gs_gym.tasks.base import TaskContext
from gs_gym.tasks.runtime import init_genesis

PATH_LABELS = {
    "a": "reference env (Genesis example style)",
    "b": "gs_gym in-process (num_workers=0)",
    "b-nochecks": "in-process, check_actions/observations off",
    "b-copyfalse": "in-process, copy=False",
    "b-noact": "in-process, check_actions off",
    "c-nochecks": "1 worker, check_actions/observations off",
    "c-nospin": "1 worker, spin_wait_us=0",
    "c-copyfalse": "1 worker, copy=False",
    "b-samestep": "in-process, autoreset_mode=SAME_STEP (what the RL library adapters use)",
    "c-samestep": "1 worker, autoreset_mode=SAME_STEP",
    "b-samestep-reread": "in-process, SAME_STEP, new episodes read from Genesis (Task.read_reset_state's default)",
    "b-samestep-nofinal": "in-process, SAME_STEP with final_obs=False (what the rsl_rl adapter uses)",
    "c-samestep-nofinal": "1 worker, SAME_STEP with final_obs=False",
    "c": "gs_gym default (num_workers=1)",
    "d": "raw task hooks, no resets",
    "b'": "in-process, episode ends lifted",
    "b'-nochecks": "in-process, episode ends lifted, check_actions/observations off",
    "b'-nowait": "in-process, episode ends lifted, checks on without the step's host wait (bench only)",
    "idle": "in-process env of a task of no scene (the wrapper alone)",
    "d+idle": "raw task hooks, then a step of path idle's env",
    "b-fused": "in-process, observe/rewards/terminated as one torch.compile'd function (bench only)",
    "b-graph": "in-process, read_state's math and observe/rewards/terminated replayed from one CUDA graph (bench only)",
    "b-cudagraph": "in-process, cuda_graph=True (the output hooks and the bookkeeping replayed from one CUDA graph)",
    "c-cudagraph": "1 worker, cuda_graph=True",
    "b-eager": "in-process, cuda_graph=False (the task's hooks called as they are)",
    "b'-eager": "in-process, no episode ends, cuda_graph=False",
    "c-eager": "1 worker, cuda_graph=False",
}
PATH_ALIASES = {"b-noends": "b'", "bp": "b'"}
TASK_PATHS = {
    "go2-walk": ["a", "b", "c", "d", "b'", "b-nochecks", "c-nochecks", "c-nospin", "c-copyfalse"],
    "franka-reach": ["b", "c", "d", "b'", "c-nospin"],
}
"""The paths each task runs by default, in the order they run (the ratios' paths first)."""
NO_EPISODE_ENDS = {
    "go2-walk": {"max_episode_steps": 10**9, "max_roll": math.inf, "max_pitch": math.inf},
    "franka-reach": {"max_episode_steps": 10**9, "terminate_on_success": False},
}
"""task_kwargs of the paths in ``NO_ENDS_PATHS``: nothing terminates and nothing is truncated."""
NO_ENDS_PATHS = ("b'", "b'-nochecks", "b'-nowait", "b'-eager")
VECTOR_ENV_OPTIONS: dict[str, dict[str, Any]] = {
    "b": {"num_workers": 0},
    "b-nochecks": {"num_workers": 0, "check_actions": False, "check_observations": False},
    "b-copyfalse": {"num_workers": 0, "copy": False},
    "b-noact": {"num_workers": 0, "check_actions": False},
    "c-nochecks": {"num_workers": 1, "check_actions": False, "check_observations": False},
    "c-nospin": {"num_workers": 1, "spin_wait_us": 0},
    "c-copyfalse": {"num_workers": 1, "copy": False},
    "b-samestep": {"num_workers": 0, "autoreset_mode": "same_step"},
    "c-samestep": {"num_workers": 1, "autoreset_mode": "same_step"},
    "b-samestep-reread": {"num_workers": 0, "autoreset_mode": "same_step"},
    "b-samestep-nofinal": {"num_workers": 0, "autoreset_mode": "same_step", "final_obs": False},
    "c-samestep-nofinal": {"num_workers": 1, "autoreset_mode": "same_step", "final_obs": False},
    "c": {"num_workers": 1},
    "b'": {"num_workers": 0},
    "b'-nochecks": {"num_workers": 0, "check_actions": False, "check_observations": False},
    "b'-nowait": {"num_workers": 0},
    "b-fused": {"num_workers": 0, "cuda_graph": False},  # these two patch the task's hooks themselves
    "b-graph": {"num_workers": 0, "cuda_graph": False},
    "b-cudagraph": {"num_workers": 0, "cuda_graph": True},
    "c-cudagraph": {"num_workers": 1, "cuda_graph": True},
    "b-eager": {"num_workers": 0, "cuda_graph": False},
    "b'-eager": {"num_workers": 0, "cuda_graph": False},
    "c-eager": {"num_workers": 1, "cuda_graph": False},
}
RATIOS = {
    "in_process_vs_reference": ("b", "a"),
    "default_vs_in_process": ("c", "b"),
    "no_ends_vs_raw": ("b'", "d"),
    "no_ends_eager_vs_raw": ("b'-eager", "d"),  # d calls the hooks eagerly, as b' did before the CUDA graph
}
ISSUE_RATIOS = ("in_process_vs_reference", "default_vs_in_process", "no_ends_vs_raw")
"""The ratios issue 14 asks for: printed always, "-" when a path is missing (the others only when measured)."""


# -- the device ------------------------------------------------------------------------------------------------


def synchronize(device: torch.device) -> None:
    """Wait for everything queued on the device: torch's work and quadrants' (Genesis's kernels)."""
    if device.type == "cuda":
        genesis = sys.modules.get("genesis")
        if genesis is not None and getattr(genesis, "_initialized", False):  # not in a parent of workers only
            import quadrants

            quadrants.sync()
        torch.cuda.synchronize(device)


# -- one path: something that steps ------------------------------------------------------------------------------


class Stepper:
    """A built path: ``step(actions)`` runs one env step; ``ends(result)`` the bool envs whose episode ended in it
    (None where episodes do not end); ``close()`` frees it."""

    def __init__(
        self,
        step: Callable[[torch.Tensor], Any],
        device: torch.device,
        close: Callable[[], None],
        ends: Callable[[Any], torch.Tensor | None] = lambda result: None,
        scene: Any = None,
        busy: Callable[[], float] | None = None,
        hooks: Callable[[], dict[str, float]] | None = None,
        call: Callable[..., tuple[Any, ...]] | None = None,
    ) -> None:
        self.step, self.device, self.close, self.ends, self.scene = step, device, close, ends, scene
        self.busy = busy
        """Seconds the workers have spent on commands so far (the busiest one's); None in process."""
        self.hooks = hooks
        """Host seconds per task hook so far (the first shard's; ``--hook-timers`` only)."""
        self.call = call
        """The vector env's ``call``: a task method run where the task runs (``--hook-timers`` only)."""


def build_reference(task: str, n_envs: int, backend: str) -> Stepper:
    if task != "go2-walk":
        raise ValueError(f"path a exists for go2-walk only, not {task!r}")
    init_genesis(backend)
    env = Go2ReferenceEnv(n_envs)
    env.reset()
    return Stepper(env.step, env.device, env.close, ends=lambda result: result[2], scene=env.scene)


HOOKS = (
    "apply_actions",
    "simulate",
    "reset_envs",
    "read_state",
    "observe",
    "compute_rewards",
    "compute_terminated",
    "compute_truncated",
)


def with_hook_timers(task_class: type) -> type:
    """``task_class`` whose hooks add their host time (seconds, the call's wall time: launching, not the GPU's
    work) to ``self.hook_seconds``; built by value, so that workers unpickle it without this module."""

    def timed(name: str) -> Callable:
        original = getattr(task_class, name)

        def hook(self: Any, *args: Any) -> Any:
            start = time.perf_counter()
            try:
                return original(self, *args)
            finally:
                self.hook_seconds[name] = self.hook_seconds.get(name, 0.0) + time.perf_counter() - start

        return hook

    def init(self: Any, *args: Any, **kwargs: Any) -> None:
        task_class.__init__(self, *args, **kwargs)
        self.hook_seconds = {}

    def profiler_start(self: Any) -> None:
        """Start torch.profiler in the process that runs this task (a worker's, for worker paths)."""
        from torch.profiler import ProfilerActivity, profile

        cuda = torch.cuda.is_available()
        self.profiler = profile(activities=[ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else []))
        self.profiler.__enter__()

    def profiler_stop(self: Any, steps: int) -> dict[str, Any]:
        """Stop it and summarize ``steps`` steps as ``profile_kernels`` does, seen from the task's process."""
        if torch.cuda.is_available():
            torch.cuda.synchronize()
        self.profiler.__exit__(None, None, None)
        return summarize_profile(self.profiler.events(), steps)

    namespace = {name: timed(name) for name in HOOKS}
    methods = {"__init__": init, "profiler_start": profiler_start, "profiler_stop": profiler_stop}
    return type(f"HookTimed{task_class.__name__}", (task_class,), {**methods, **namespace})


def make_vector_env(task: str, n_envs: int, backend: str, path: str, hook_timers: bool = False) -> Any:
    from gs_gym import GenesisVectorEnv  # here, so that path a runs while the vector env is being rewritten

    task_kwargs = NO_EPISODE_ENDS[task] if path in NO_ENDS_PATHS else {}
    task_class = with_hook_timers(resolve_task(task)) if hook_timers else task
    return GenesisVectorEnv(
        n_envs, task_class, backend=backend, seed=0, task_kwargs=task_kwargs, verbose=False, **VECTOR_ENV_OPTIONS[path]
    )


def fuse_task_outputs(task: Any) -> None:
    """Path b-fused: ``task``'s ``observe``, ``compute_rewards`` and ``compute_terminated`` computed together by one
    ``torch.compile``d function (``bench/fused_hooks.py`` costs it alone), run by ``observe``; the other two hand
    out what it computed. Valid where the shard calls the three in that order each step (NEXT_STEP); a reset's
    ``observe`` computes all three. Patches this task object only: gs_gym itself is unchanged."""
    observe, rewards, terminated = task.observe, task.compute_rewards, task.compute_terminated
    fused = torch.compile(lambda: (observe(), rewards(), terminated()), dynamic=False)
    outputs: list[torch.Tensor] = []

    def fused_observe() -> torch.Tensor:
        outputs[:] = fused()
        return outputs[0]

    task.observe = fused_observe
    task.compute_rewards = lambda: outputs[1]
    task.compute_terminated = lambda: outputs[2]


def capture_task_outputs(task: Any, device: torch.device) -> None:
    """Path b-graph (go2-walk): ``read_state``'s torch math and the three output hooks replayed from one CUDA graph.

    go2-walk reads the robot's state through live views of Genesis's arrays (``gs_gym.tasks.state_views``), which a
    graph can read where they lie; but it replaces its other tensors (``actions``, ``last_actions``, ``commands``,
    ``state``) instead of writing into them, so each step copies those three into fixed ones (three copies),
    replays, and clones the three outputs (the env hands them out by reference, and the next replay overwrites the
    graph's). The command draw stays outside the graph (a quadrants launch). On the CPU nothing is captured: the
    same function runs eagerly, so the plumbing can be checked against path b. Patches this task object only: gs_gym
    itself is unchanged. (Its first GPU run, before the live views, also copied the two Genesis reads.)"""
    from fused_hooks import captured_graph  # here: it imports gs_gym's vector env, which path a does not need

    if task.randomizer.obs_noise is not None:
        raise ValueError("b-graph: observation noise is not handled (its tensor is replaced by each draw)")
    if task._read_qpos() is not task._read_qpos():
        raise ValueError("b-graph: needs Genesis's zero-copy views (gs.use_zerocopy), not its getters' copies")
    fixed = {name: getattr(task, name).clone() for name in ("actions", "last_actions", "commands")}
    read_state, draw = task.read_state, task._draw_due_commands
    observe, rewards, terminated = task.observe, task.compute_rewards, task.compute_terminated

    def compute() -> tuple[Any, tuple[torch.Tensor, ...]]:
        own = {name: getattr(task, name) for name in fixed}
        task._draw_due_commands = lambda: None
        task.__dict__.update(fixed)
        try:
            read_state()
            return task.state, (observe(), rewards(), terminated())
        finally:
            task._draw_due_commands = draw
            task.__dict__.update(own)

    replay = captured_graph(compute, device) if device.type == "cuda" else compute
    outputs: list[torch.Tensor] = []

    def patched_read_state() -> None:
        draw()
        for name, tensor in fixed.items():
            tensor.copy_(getattr(task, name))
        state, computed = replay()
        task.state = state
        outputs[:] = [value.clone() for value in computed]

    task.read_state = patched_read_state
    task.observe = lambda: outputs[0]
    task.compute_rewards = lambda: outputs[1]
    task.compute_terminated = lambda: outputs[2]


def build_vector_env(
    task: str, n_envs: int, backend: str, path: str, env: Any = None, hook_timers: bool = False
) -> Stepper:
    """Path ``path``'s env (``env``: already constructed by ``start_worker_builds``), reset."""
    if env is None:
        env = make_vector_env(task, n_envs, backend, path, hook_timers)
    if path == "b-samestep-reread":  # what the task's own read_reset_state saves
        local_task = env.local_task
        local_task.read_reset_state = lambda mask: local_task.read_state()
    if path == "b'-nowait":  # the in-process pool's shard without the event its step_flags waits for
        pool = env._client.pool
        pool.shards = [dataclasses.replace(shard, flags_landed=None) for shard in pool.shards]
    if path == "b-fused":
        fuse_task_outputs(env.local_task)
    if path == "b-graph":
        capture_task_outputs(env.local_task, env.main_device)
    env.reset(seed=0)
    busy = (lambda: max(env.worker_busy_seconds)) if env.num_workers else None
    hooks = (lambda: dict(env.get_attr("hook_seconds")[0])) if hook_timers else None
    call = env.call if hook_timers else None
    return Stepper(
        env.step,
        env.main_device,
        env.close,
        ends=lambda result: result[2] | result[3],
        busy=busy,
        hooks=hooks,
        call=call,
    )


def build_raw_hooks(task_name: str, n_envs: int, backend: str) -> Stepper:
    init_genesis(backend)
    import genesis as gs

    device = torch.device(gs.device)
    task_class = resolve_task(task_name)
    # episode ends lifted as in b': where a limit cannot be passed the task skips its check (go2-walk's tilt, franka-
    # reach's success), and d must do the work b' does
    config = task_class.make_config(**NO_EPISODE_ENDS[task_name])
    task = task_class(config, TaskContext.create(n_envs, 0, device, base_seed=0))
    task.build()
    task.reset_envs(torch.ones(n_envs, dtype=torch.bool, device=device))

    def step(actions: torch.Tensor) -> None:
        task.apply_actions(actions)
        task.simulate()
        task.read_state()
        task.observe()
        task.compute_rewards()
        task.compute_terminated()

    def close() -> None:
        task.close()
        task.scene.destroy()

    return Stepper(step, device, close, scene=task.scene)


def build_idle_env(n_envs: int, backend: str) -> Stepper:
    """Path idle: gs_gym in process, default options, over a task whose hooks return preallocated tensors; it steps
    with its own zero actions whatever it is given (go2's 12 per env), so that it can follow any task's step."""
    from wrapper_overhead import FreshIdleTask

    from gs_gym import GenesisVectorEnv

    env = GenesisVectorEnv(
        n_envs, FreshIdleTask, backend=backend, seed=0, verbose=False, num_workers=0,
        task_kwargs={"max_episode_steps": 10**9},
    )  # fmt: skip
    env.reset(seed=0)
    zeros = torch.zeros(n_envs, *env.single_action_space.shape, device=env.main_device)
    return Stepper(lambda actions: env.step(zeros), env.main_device, env.close)


def build_raw_hooks_then_idle(task: str, n_envs: int, backend: str) -> Stepper:
    """Path d+idle: path d's step, then path idle's, in this one process."""
    raw, idle = build_raw_hooks(task, n_envs, backend), build_idle_env(n_envs, backend)

    def step(actions: torch.Tensor) -> None:
        raw.step(actions)
        idle.step(actions)

    def close() -> None:
        idle.close()
        raw.close()

    return Stepper(step, raw.device, close, scene=raw.scene)


def build_path(task: str, n_envs: int, backend: str, path: str, env: Any = None, hook_timers: bool = False) -> Stepper:
    if path == "a":
        return build_reference(task, n_envs, backend)
    if path == "d":
        return build_raw_hooks(task, n_envs, backend)
    if path == "idle":
        return build_idle_env(n_envs, backend)
    if path == "d+idle":
        return build_raw_hooks_then_idle(task, n_envs, backend)
    return build_vector_env(task, n_envs, backend, path, env, hook_timers)


def start_worker_builds(
    pool: concurrent.futures.Executor, task: str, n_envs: int, backend: str, paths: list[str], hook_timers: bool
) -> dict[str, concurrent.futures.Future]:
    """Construct the worker paths' envs in threads, so that their workers compile at the same time as each other and
    as this process builds the in-process paths (a cold run then pays one compilation, not one per path). Each
    future gives ``(env, seconds)``."""

    def timed(path: str) -> tuple[Any, float]:
        start = time.perf_counter()
        return make_vector_env(task, n_envs, backend, path, hook_timers), time.perf_counter() - start

    worker_paths = [p for p in paths if VECTOR_ENV_OPTIONS.get(p, {}).get("num_workers", 0) > 0]
    return {path: pool.submit(timed, path) for path in worker_paths}


# -- measuring ---------------------------------------------------------------------------------------------------


class RandomActions:
    """Fresh actions each call, uniform in ``scale`` times the action box, drawn on the device into one buffer."""

    def __init__(self, task: str, n_envs: int, device: torch.device, scale: float) -> None:
        task_class = resolve_task(task)
        space = task_class.spaces(task_class.make_config())[1]
        low = torch.as_tensor(space.low, dtype=torch.float32, device=device)
        high = torch.as_tensor(space.high, dtype=torch.float32, device=device)
        middle, half = (high + low) / 2, (high - low) / 2 * scale
        self.buffer = torch.empty(n_envs, *space.shape, device=device)
        self.scalar = bool((middle == middle.flatten()[0]).all() and (half == half.flatten()[0]).all())
        self.low, self.high = (middle - half), (middle + half)
        self.bounds = (float(self.low.flatten()[0]), float(self.high.flatten()[0])) if self.scalar else None

    def __call__(self) -> torch.Tensor:
        if self.bounds is not None:
            return self.buffer.uniform_(*self.bounds)
        return (
            torch.rand(self.buffer.shape, out=self.buffer, device=self.buffer.device)
            .mul_(self.high - self.low)
            .add_(self.low)
        )


def time_block(stepper: Stepper, actions: RandomActions, steps: int) -> float:
    """Seconds per step over ``steps`` steps, the device synchronized at the ends of the block only."""
    synchronize(stepper.device)
    start = time.perf_counter()
    for _ in range(steps):
        stepper.step(actions())
    synchronize(stepper.device)
    return (time.perf_counter() - start) / steps


class GenesisCallCounter:
    """Counts, by method name, the outermost calls into the public methods of Genesis's rigid entities, links and
    joints, and ``Scene.step``, while active (``with counter:``); calls Genesis makes from inside those methods are
    not counted again."""

    def __init__(self) -> None:
        from genesis.engine.entities.rigid_entity import RigidEntity, RigidJoint, RigidLink
        from genesis.engine.scene import Scene

        self.targets: list[tuple[type, str]] = [(Scene, "step")]
        for cls in (RigidEntity, RigidLink, RigidJoint):
            for name in dir(cls):
                if not name.startswith("_") and callable(getattr(cls, name, None)) and _is_plain_function(cls, name):
                    self.targets.append((cls, name))
        self.counts: collections.Counter[str] = collections.Counter()
        self._depth = 0
        self._saved: list[tuple[type, str, Any, bool]] = []

    def __enter__(self) -> GenesisCallCounter:
        for cls, name in self.targets:
            own = name in cls.__dict__
            original = cls.__dict__[name] if own else getattr(cls, name)
            self._saved.append((cls, name, original, own))
            setattr(cls, name, self._wrap(f"{cls.__name__}.{name}", original))
        return self

    def __exit__(self, *exc_info: object) -> None:
        for cls, name, original, own in reversed(self._saved):
            if own:
                setattr(cls, name, original)
            else:
                delattr(cls, name)
        self._saved.clear()

    def _wrap(self, label: str, function: Callable) -> Callable:
        counter = self

        def counted(*args: Any, **kwargs: Any) -> Any:
            if counter._depth == 0:
                counter.counts[label] += 1
            counter._depth += 1
            try:
                return function(*args, **kwargs)
            finally:
                counter._depth -= 1

        return counted


def _is_plain_function(cls: type, name: str) -> bool:
    """A method defined with ``def`` in ``cls`` or a base (not a property, staticmethod or classmethod)."""
    for klass in cls.__mro__:
        if name in klass.__dict__:
            return callable(klass.__dict__[name]) and not isinstance(klass.__dict__[name], (staticmethod, classmethod))
    return False


def count_genesis_calls(stepper: Stepper, actions: RandomActions, steps: int) -> dict[str, Any]:
    counter = GenesisCallCounter()
    with counter:
        for _ in range(steps):
            stepper.step(actions())
    synchronize(stepper.device)
    per_method = {name: count / steps for name, count in sorted(counter.counts.items())}
    return {"genesis_calls_per_step": sum(counter.counts.values()) / steps, "genesis_calls": per_method}


SYNC_CALLS = frozenset(
    {
        "cudaStreamSynchronize",
        "cudaDeviceSynchronize",
        "cudaEventSynchronize",
        "cuStreamSynchronize",
        "cuCtxSynchronize",
        "cuEventSynchronize",
    }
)


def is_torch_kernel(name: str) -> bool:
    return any(mark in name for mark in ("at::", "at_cuda_detail", "cub::", "cutlass", "gemm", "triton", "elementwise"))


def profile_kernels(run: Callable[[], None], steps: int) -> dict[str, Any]:
    """CUDA kernel launches (and copies) per step of ``run`` over ``steps`` calls, seen by torch.profiler."""
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as profiler:
        for _ in range(steps):
            run()
        torch.cuda.synchronize()
    return summarize_profile(profiler.events(), steps)


def summarize_profile(events: Any, steps: int) -> dict[str, Any]:
    """Per step: CUDA kernels and copies, host syncs and the host's time blocked in them, GPU busy time."""
    from torch.autograd import DeviceType

    names = [event.name for event in events if event.device_type == DeviceType.CUDA]
    # The host side: launches through CUDA's runtime API (torch) and its driver API (quadrants), where recorded, and
    # CUDA graph replays (cudaGraphLaunch: one call for every kernel of the graph).
    launches = collections.Counter(
        event.name
        for event in events
        if event.device_type == DeviceType.CPU and ("LaunchKernel" in event.name or "GraphLaunch" in event.name)
    )
    copies = [n for n in names if n.startswith(("Memcpy", "Memset"))]
    kernels = [n for n in names if not n.startswith(("Memcpy", "Memset"))]
    torch_kernels = [n for n in kernels if is_torch_kernel(n)]
    others = [n for n in kernels if not is_torch_kernel(n)]
    # Host waits: explicit synchronizations (``.item()``, ``.tolist()``, blocking copies such as an index list sent
    # to the device) are recorded as these runtime/driver calls.
    syncs = collections.Counter(
        event.name for event in events if event.device_type == DeviceType.CPU and event.name in SYNC_CALLS
    )
    busy_us = sum(event.time_range.elapsed_us() for event in events if event.device_type == DeviceType.CUDA)
    waited_us = sum(
        event.time_range.elapsed_us()
        for event in events
        if event.device_type == DeviceType.CPU and event.name in SYNC_CALLS
    )
    return {
        "host_syncs_per_step": sum(syncs.values()) / steps,
        "host_sync_wait_us_per_step": waited_us / steps,
        "host_sync_calls_per_step": {name: count / steps for name, count in sorted(syncs.items())},
        "gpu_busy_us_per_step": busy_us / steps,
        "copy_kinds_per_step": {name: count / steps for name, count in collections.Counter(copies).most_common()},
        "cuda_kernels_per_step": len(kernels) / steps,
        "torch_kernels_per_step": len(torch_kernels) / steps,
        "other_kernels_per_step": len(others) / steps,
        "copies_per_step": len(copies) / steps,
        "other_kernel_names": [name for name, _ in collections.Counter(others).most_common(8)],
        "launch_calls_per_step": {name: count / steps for name, count in sorted(launches.items())},
    }


class Measured:
    """A path being measured: its row of results, and while it lives its stepper and actions."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.row: dict[str, Any] = {"label": PATH_LABELS[path]}
        if path in VECTOR_ENV_OPTIONS and path != "b'":
            self.row["options"] = VECTOR_ENV_OPTIONS[path]
        self.stepper: Stepper | None = None
        self.actions: RandomActions | None = None
        self.seconds: list[float] = []
        self.busy_seconds: list[float] = []
        """Per timed block: the worker's busy seconds per step (worker paths only)."""
        self.hook_seconds: list[dict[str, float]] = []
        """Per timed block: host seconds per step in each task hook (``--hook-timers``)."""
        self.scene_options: Any = None

    def fail(self, error: BaseException) -> None:
        traceback.print_exc()
        self.row = {"label": PATH_LABELS[self.path], "error": f"{type(error).__name__}: {error}"}
        self.close()

    def close(self) -> None:
        stepper, self.stepper = self.stepper, None
        if stepper is not None:
            with contextlib.suppress(Exception):
                stepper.close()


def build_and_warm(
    task: str, n_envs: int, measured: Measured, args: argparse.Namespace, early: concurrent.futures.Future | None
) -> None:
    """Build the path (or take its env from ``early``), reset it and step it ``--warmup`` times (counting episode
    ends)."""
    if measured.path in NO_ENDS_PATHS:
        # as JSON writes them: inf as "inf" (json would write Infinity, which is not JSON)
        measured.row["task_kwargs"] = {k: str(v) if v == math.inf else v for k, v in NO_EPISODE_ENDS[task].items()}
    env, construct_s = early.result() if early is not None else (None, 0.0)
    start = time.perf_counter() - construct_s  # a path built in a thread: its own construction, not the wait for it
    stepper = measured.stepper = build_path(task, n_envs, args.backend, measured.path, env, args.hook_timers)
    measured.row["build_s"] = time.perf_counter() - start
    actions = measured.actions = RandomActions(task, n_envs, stepper.device, args.action_scale)
    ends = torch.zeros((), dtype=torch.int64, device=stepper.device)
    counted = False
    for _ in range(args.warmup):
        ended = stepper.ends(stepper.step(actions()))
        if ended is not None:
            ends += ended.sum()
            counted = True
    measured.row["episode_ends_per_env_per_1000_steps"] = (
        ends.item() / n_envs / args.warmup * 1000 if counted and args.warmup else None
    )


def count_and_profile(n_envs: int, measured: Measured, args: argparse.Namespace) -> None:
    """The timing's summary, then Genesis calls and (GPU) kernels, syncs and copies per step; closes the path."""
    stepper, actions, row = measured.stepper, measured.actions, measured.row
    assert stepper is not None and actions is not None
    median = statistics.median(measured.seconds)
    row.update(
        env_steps_per_s=n_envs / median,
        us_per_step=median * 1e6,
        repeats_us=[s * 1e6 for s in measured.seconds],
        timed_steps=args.steps,
    )
    if measured.busy_seconds:
        row["worker_busy_us_per_step"] = statistics.median(measured.busy_seconds) * 1e6
    if measured.hook_seconds:
        names = sorted({name for block in measured.hook_seconds for name in block})
        hooks = {n: statistics.median(b.get(n, 0.0) for b in measured.hook_seconds) * 1e6 for n in names}
        row["hook_host_us_per_step"] = hooks
        row["hooks_total_host_us_per_step"] = sum(hooks.values())
    if measured.path.startswith("c"):
        row["genesis_calls_per_step"] = None
        row["genesis_calls_note"] = "the worker runs path b's code in its own process: see b"
    else:
        row.update(count_genesis_calls(stepper, actions, args.count_steps))
    if stepper.call is not None:  # --hook-timers: also profile the process that runs the task (the worker's)
        stepper.call("profiler_start")
        for _ in range(args.profile_steps):
            stepper.step(actions())
        row["task_process_profile"] = stepper.call("profiler_stop", args.profile_steps)[0]
    if stepper.device.type == "cuda":
        row.update(profile_kernels(lambda: stepper.step(actions()), args.profile_steps))
        if measured.path.startswith("c"):
            row["kernels_note"] = "the parent's launches only; the worker's are path b's"
        if measured.path == "d" and stepper.scene is not None:
            bare = profile_kernels(stepper.scene.step, args.profile_steps)
            row["bare_scene_step_kernels"] = bare["cuda_kernels_per_step"]
            row["bare_scene_step_kernel_names"] = bare["other_kernel_names"]
    else:
        row["cuda_kernels_per_step"] = None
    if measured.path in ("a", "d") and stepper.scene is not None:
        measured.scene_options = stepper.scene.options
    measured.close()


def time_one_block(one: Measured, args: argparse.Namespace) -> None:
    """Time one block of ``--steps`` steps of a built path (and its worker's busy time and hook times with it); a
    failure fails the path."""
    if one.stepper is None or one.actions is None:
        return
    try:
        busy_before = one.stepper.busy() if one.stepper.busy else None
        hooks_before = one.stepper.hooks() if one.stepper.hooks else None
        one.seconds.append(time_block(one.stepper, one.actions, args.steps))
        if one.stepper.busy and busy_before is not None:
            one.busy_seconds.append((one.stepper.busy() - busy_before) / args.steps)
        if one.stepper.hooks and hooks_before is not None:
            after = one.stepper.hooks()
            one.hook_seconds.append({k: (v - hooks_before.get(k, 0.0)) / args.steps for k, v in after.items()})
    except Exception as error:
        one.fail(error)


def serve_path(connection: Any, task: str, n_envs: int, path: str, args: argparse.Namespace) -> None:
    """A process of its own for one path (``--apart``): build and warm it, answer ``"time"`` with one
    timed block's seconds (None once the path failed), then ``"finish"`` with its row and scene options."""
    if VECTOR_ENV_OPTIONS.get(path, {}).get("num_workers", 0) == 0:
        init_genesis(args.backend)
    one = Measured(path)
    try:
        build_and_warm(task, n_envs, one, args, None)
    except Exception as error:
        one.fail(error)
    connection.send("built")
    while connection.recv() == "time":
        time_one_block(one, args)
        connection.send(one.seconds[-1] if one.stepper is not None else None)
    if one.stepper is not None:
        try:
            count_and_profile(n_envs, one, args)
        except Exception as error:
            one.fail(error)
    try:
        connection.send((one.row, one.scene_options))
    except Exception:  # scene options that do not pickle: the row alone
        connection.send((one.row, None))


def measure_paths_apart(
    task: str, n_envs: int, paths: list[str], args: argparse.Namespace, log: Callable[[str], None]
) -> dict[str, Measured]:
    """``measure_paths`` with each path in a process of its own, as a user's training runs one scene per process:
    Genesis's rigid solver dispatches through quadrants' ``perf_dispatch``, whose fast path (the arguments of the
    last call) is one per process, so in a process of several scenes all but one can pay a hash of the solver's
    state per call (seen on the CPU backend: the scene built first pays it). The processes build at once (their
    compilations overlap), then step one at a time when told, in the same interleaved rounds."""
    import multiprocessing

    context = multiprocessing.get_context("spawn")
    measured = {path: Measured(path) for path in paths}
    links: dict[str, Any] = {}
    processes = []
    for path in paths:
        log(f"{task} {n_envs} envs: starting path {path} ({PATH_LABELS[path]}) in a process of its own")
        parent_end, child_end = context.Pipe()
        process = context.Process(target=serve_path, args=(child_end, task, n_envs, path, args))  # may have workers
        process.start()
        links[path] = parent_end
        processes.append(process)
    try:
        for path in paths:
            links[path].recv()
        for round_index in range(args.repeats):
            for path, link in links.items():
                link.send("time")
                seconds = link.recv()
                if seconds is not None:
                    measured[path].seconds.append(seconds)
            times = ", ".join(f"{p} {one.seconds[-1] * 1e6:.0f}" for p, one in measured.items() if one.seconds)
            log(f"timed round {round_index + 1} of {args.repeats} (us/step: {times})")
        for path, link in links.items():
            link.send("finish")
            measured[path].row, measured[path].scene_options = link.recv()
    finally:
        for process in processes:
            process.join(timeout=60)
            if process.is_alive():
                process.kill()
    return measured


def measure_paths(
    task: str, n_envs: int, paths: list[str], args: argparse.Namespace, log: Callable[[str], None]
) -> dict[str, Measured]:
    """Build every path, then time them in ``--repeats`` interleaved rounds (one block of ``--steps`` steps per
    path per round, so that a slow spell of the machine hits every path alike), then count and profile each."""
    measured = {path: Measured(path) for path in paths}
    with concurrent.futures.ThreadPoolExecutor() as pool:
        early = start_worker_builds(pool, task, n_envs, args.backend, paths, args.hook_timers)
        for path, one in measured.items():
            log(f"{task} {n_envs} envs: building path {path} ({PATH_LABELS[path]})")
            try:
                build_and_warm(task, n_envs, one, args, early.get(path))
            except Exception as error:
                one.fail(error)
    for round_index in range(args.repeats):
        for one in measured.values():
            time_one_block(one, args)
        times = ", ".join(f"{p} {one.seconds[-1] * 1e6:.0f}" for p, one in measured.items() if one.seconds)
        log(f"timed round {round_index + 1} of {args.repeats} (us/step: {times})")
    for one in measured.values():
        if one.stepper is not None:
            try:
                count_and_profile(n_envs, one, args)
            except Exception as error:
                one.fail(error)
    gc.collect()
    if torch.cuda.is_available():
        torch.cuda.empty_cache()
    return measured


def machine_description(backend: str) -> dict[str, Any]:
    machine = {
        "python": platform.python_version(),
        "torch": torch.__version__,
        "genesis": importlib.metadata.version("genesis-world"),
        "quadrants": importlib.metadata.version("quadrants"),
        "backend": backend,
        "cpu_count": os.cpu_count(),
        "processor": platform.processor() or platform.machine(),
        "platform": platform.platform(),
    }
    if backend == "gpu" and torch.cuda.is_available():
        properties = torch.cuda.get_device_properties(0)
        machine.update(gpu=properties.name, gpu_memory_mib=properties.total_memory // 2**20, cuda=torch.version.cuda)
        with contextlib.suppress(OSError, subprocess.SubprocessError):
            machine["driver"] = subprocess.run(
                ["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                capture_output=True,
                text=True,
                timeout=10,
                check=False,
            ).stdout.strip()
    try:
        root = Path(__file__).resolve().parents[1]
        run = {"cwd": root, "capture_output": True, "text": True}
        commit = subprocess.run(["git", "rev-parse", "HEAD"], check=False, **run).stdout.strip()
        status = ["git", "status", "--porcelain", "--untracked-files=no"]
        dirty = subprocess.run(status, check=False, **run).stdout.strip()
        machine["gs_gym_commit"] = commit + (" (with uncommitted changes)" if dirty else "")
    except OSError:
        pass
    return machine


def ratios(paths: dict[str, dict[str, Any]]) -> dict[str, float | None]:
    """Each ratio of ``RATIOS`` from the paths' median env-steps/s (None where a path is missing)."""

    def speed(name: str) -> float | None:
        return paths.get(name, {}).get("env_steps_per_s")

    result = {}
    for key, (numerator, denominator) in RATIOS.items():
        top, bottom = speed(numerator), speed(denominator)
        result[key] = top / bottom if top is not None and bottom else None
    return result


def paired_ratios(paths: dict[str, dict[str, Any]]) -> dict[str, float | None]:
    """Each ratio of ``RATIOS`` as the median over rounds of the two paths' speed ratio within the round.

    The lent machine's host speed swings by 10-30% from one minute to the next, which moves the two medians of
    ``ratios`` apart at random; within one round both paths ran seconds apart, so the per-round ratio cancels most
    of the swing (a paired comparison)."""
    result = {}
    for key, (numerator, denominator) in RATIOS.items():
        pairs = round_ratios(paths, numerator, denominator)
        result[key] = statistics.median(pairs) if pairs else None
    return result


def round_ratios(paths: dict[str, dict[str, Any]], numerator: str, denominator: str) -> list[float]:
    """The two paths' speed ratio in each round (their us per step, inverted); empty where either path is missing
    or failed. ``bench/pool_runs.py`` pools these over several runs."""
    top, bottom = (paths.get(name, {}).get("repeats_us") for name in (numerator, denominator))
    return [b / t for t, b in zip(top, bottom, strict=False) if t and b] if top and bottom else []


def format_table(task: str, n_envs: int, entry: dict[str, Any]) -> str:
    def cell(value: Any, spec: str) -> str:
        return "-" if value is None else format(value, spec)

    lines = [
        f"\n{task}, {n_envs} envs",
        (
            "| path | env-steps/s | us/step | worker busy us/step | GPU busy us/step | host syncs/step "
            "| Genesis calls/step | CUDA kernels/step | ends/env/1000 steps |"
        ),
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for name, row in entry["paths"].items():
        if "error" in row:
            lines.append(f"| {name} {row['label']} | failed: {row['error'][:80]} | | | | | | | |")
            continue
        calls = row.get("genesis_calls_per_step")
        lines.append(
            f"| {name} {row['label']} | {cell(row.get('env_steps_per_s'), ',.0f')}"
            f" | {cell(row.get('us_per_step'), '.0f')}"
            f" | {cell(row.get('worker_busy_us_per_step'), '.0f')}"
            f" | {cell(row.get('gpu_busy_us_per_step'), '.0f')}"
            f" | {cell(row.get('host_syncs_per_step'), '.1f')}"
            f" | {cell(calls, '.1f') if calls is not None or name != 'c' else '(= b)'}"
            f" | {cell(row.get('cuda_kernels_per_step'), '.1f')}"
            f" | {cell(row.get('episode_ends_per_env_per_1000_steps'), '.1f')} |"
        )
    for name, row in entry["paths"].items():
        if "task_process_profile" in row:
            seen = row["task_process_profile"]
            lines.append(
                f"task process of {name}: {seen['host_syncs_per_step']:.1f} host syncs/step blocking "
                f"{seen['host_sync_wait_us_per_step']:.0f} us/step, {seen['cuda_kernels_per_step']:.0f} CUDA "
                f"kernels/step, GPU busy {seen['gpu_busy_us_per_step']:.0f} us/step"
            )
        if "hook_host_us_per_step" in row:
            hooks = ", ".join(f"{hook} {us:.0f}" for hook, us in row["hook_host_us_per_step"].items())
            lines.append(f"hooks of {name}, host us/step: {hooks} (total {row['hooks_total_host_us_per_step']:.0f})")

    def listed(values: dict[str, float | None]) -> str:
        shown = [key for key in RATIOS if key in values and (values[key] is not None or key in ISSUE_RATIOS)]
        return ", ".join(f"{'/'.join(RATIOS[key])} = {cell(values[key], '.3f')}" for key in shown)

    lines.append("ratios: " + listed(entry["ratios"]))
    lines.append("paired (median of per-round ratios): " + listed(entry.get("paired_ratios", {})))
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__.splitlines()[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--backend",
        choices=("gpu", "cpu"),
        default="gpu" if torch.cuda.is_available() else "cpu",
        help="Genesis backend (default: gpu where CUDA is available)",
    )
    parser.add_argument(
        "--n-envs",
        type=int,
        nargs="+",
        default=None,
        help="batch sizes to measure (default 4096 on the GPU, 64 on the CPU)",
    )
    parser.add_argument("--tasks", nargs="+", default=list(TASK_PATHS), choices=list(TASK_PATHS))
    parser.add_argument(
        "--paths",
        nargs="+",
        default=None,
        help=f"paths to run, among {list(PATH_LABELS)} (b-noends = b'); default: each task's own ({TASK_PATHS})",
    )
    parser.add_argument("--steps", type=int, default=200, help="steps per timed block")
    parser.add_argument(
        "--repeats",
        type=int,
        default=5,
        help="interleaved rounds, one timed block per path each (the median is reported)",
    )
    parser.add_argument("--warmup", type=int, default=50, help="steps before timing (episode ends counted here)")
    parser.add_argument("--count-steps", type=int, default=5, help="steps over which Genesis calls are counted")
    parser.add_argument("--profile-steps", type=int, default=5, help="steps under torch.profiler (GPU only)")
    parser.add_argument(
        "--hook-timers",
        action="store_true",
        help="gs_gym paths run the task with each hook's host time recorded (in-process vs in the worker)",
    )
    parser.add_argument(
        "--action-scale",
        type=float,
        default=1.0,
        help="random actions uniform in this fraction of the action box (1 = the whole box)",
    )
    parser.add_argument(
        "--out",
        default=None,
        help="JSON path (default bench/results/go2-vs-reference-h200.json on the GPU, "
        "go2-vs-reference-cpu.json on the CPU)",
    )
    parser.add_argument(
        "--apart",
        action="store_true",
        help="each path in a process of its own, as a user's training runs one scene (see measure_paths_apart)",
    )
    parser.add_argument(
        "--merge", action="store_true", help="keep the rows already in --out that this run does not measure again"
    )
    args = parser.parse_args()
    args.n_envs = args.n_envs or ([4096] if args.backend == "gpu" else [64])
    args.out = args.out or (
        "bench/results/go2-vs-reference-h200.json" if args.backend == "gpu" else "go2-vs-reference-cpu.json"
    )
    wanted = None if args.paths is None else [PATH_ALIASES.get(p, p) for p in args.paths]
    unknown = sorted(set(wanted or []) - set(PATH_LABELS))
    if unknown:
        parser.error(f"--paths: unknown {unknown}; expected some of {list(PATH_LABELS)}")

    every_path = wanted or [path for task in args.tasks for path in TASK_PATHS[task]]
    in_process = any(VECTOR_ENV_OPTIONS.get(path, {}).get("num_workers", 0) == 0 for path in every_path)
    if in_process and not args.apart:  # else each path builds in a process of its own, and this one has no scene
        init_genesis(args.backend)  # (with worker paths only it stays free of Genesis, as a user's parent of workers)
    result: dict[str, Any] = {"tasks": {}}
    if args.merge and os.path.exists(args.out):
        with open(args.out) as handle:
            result = json.load(handle)
    result["machine"] = machine_description(args.backend)
    result["settings"] = {
        key: getattr(args, key)
        for key in ("steps", "repeats", "warmup", "count_steps", "profile_steps", "action_scale", "apart")
    }
    result["settings"]["actions"] = "fresh each step, uniform in action_scale x the action box, drawn on the device"

    def write() -> None:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        with open(args.out, "w") as handle:
            json.dump(result, handle, indent=1)

    started = time.perf_counter()
    for task in args.tasks:
        paths = [p for p in TASK_PATHS[task] if wanted is None or p in wanted]
        paths += [p for p in (wanted or []) if p not in paths and p != "a"]
        for n_envs in args.n_envs:
            entry = result["tasks"].setdefault(task, {}).setdefault(str(n_envs), {"paths": {}, "ratios": {}})
            measure = measure_paths_apart if args.apart else measure_paths
            measured = measure(
                task,
                n_envs,
                paths,
                args,
                lambda text: print(f"[{time.perf_counter() - started:6.0f} s] {text}", flush=True),
            )
            for path, one in measured.items():
                entry["paths"][path] = one.row
                if "error" not in one.row:
                    print(
                        f"  {path}: built in {one.row['build_s']:.1f} s; {one.row['env_steps_per_s']:,.0f} "
                        f"env-steps/s, {one.row['us_per_step']:.0f} us/step",
                        flush=True,
                    )
            if "a" in measured and "d" in measured and measured["a"].scene_options is not None:
                differences = check_same_scene_options(measured["a"].scene_options, measured["d"].scene_options)
                entry["scene_options_differ"] = differences
                print("  scene options of a and d:", differences or "identical")
            entry["ratios"] = ratios(entry["paths"])
            entry["paired_ratios"] = paired_ratios(entry["paths"])
            write()
            print(format_table(task, n_envs, entry), flush=True)
    print(f"\nwrote {args.out} ({time.perf_counter() - started:.0f} s)")


if __name__ == "__main__":
    main()
