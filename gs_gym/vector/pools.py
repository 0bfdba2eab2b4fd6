"""Start the shards of a ``GenesisVectorEnv``: one spec per env range, in this process or one worker each."""

from __future__ import annotations

import os
from collections.abc import Callable

import cloudpickle
import numpy as np

from gs_gym.transport.devices import cuda_uuid
from gs_gym.transport.interface import ShardPool
from gs_gym.transport.pool import WorkerLaunch, WorkerPool
from gs_gym.transport.progress import ProgressFactory
from gs_gym.vector.in_process import InProcessPool
from gs_gym.vector.options import EnvOptions
from gs_gym.vector.shard import EnvShard, ShardSpec
from gs_gym.vector.sharding import EnvRange


def random_seed() -> int:
    """A fresh base seed from the OS's entropy (when the user gives none)."""
    return int(np.random.SeedSequence().generate_state(1, np.uint64)[0] >> np.uint64(2))


def shard_specs(options: EnvOptions, ranges: list[EnvRange], base_seed: int) -> list[ShardSpec]:
    return [
        ShardSpec(
            task_class=options.task_class,
            config=options.config,
            num_envs=shard.count,
            env_offset=shard.offset,
            backend=options.backend,
            autoreset_mode=options.autoreset_mode,
            final_observations=options.final_obs,
            cuda_graph=options.cuda_graph,
            base_seed=base_seed,
            performance_mode=options.performance_mode,
            share_buffers=options.num_workers > 0,
            host_buffers=options.host_buffers,
            check_actions=options.check_actions,
            check_observations=options.check_observations,
            genesis_logging_level=options.genesis_logging_level,
            render_mode=options.render_mode,
            outputs_by_reference=options.outputs_by_reference,
        )
        for shard in ranges
    ]


def worker_label(options: EnvOptions, index: int) -> str:
    return "cpu" if options.backend == "cpu" else f"cuda:{options.devices[index % len(options.devices)]}"


def worker_environment(options: EnvOptions, index: int) -> dict[str, str]:
    """Variables a worker must have before CUDA starts: it sees only its GPU (named by UUID), as device 0."""
    environment = {"QD_VISIBLE_DEVICE": "0"}
    if "DISPLAY" not in os.environ:
        environment["PYGLET_HEADLESS"] = "1"
    if options.backend == "cpu":
        environment["CUDA_VISIBLE_DEVICES"] = ""
    else:
        environment["CUDA_VISIBLE_DEVICES"] = f"GPU-{cuda_uuid(options.devices[index % len(options.devices)])}"
    return environment


class ShardFactory:
    """Builds the ``EnvShard`` of one worker; cloudpickled into the worker process."""

    def __init__(self, spec: ShardSpec) -> None:
        self.spec = spec

    def __call__(self, report: Callable[[str], None] | None = None) -> EnvShard:
        return EnvShard(self.spec, report)


def check_picklable(spec: ShardSpec) -> None:
    """A worker receives its spec through cloudpickle (by value for a task class defined in ``__main__`` or in a
    function): raise ``TypeError`` naming the task and the attribute or config field that cannot be pickled."""
    try:
        cloudpickle.dumps(spec)
    except Exception as error:
        task = spec.task_class
        parts = [(f"config field {name!r}", getattr(spec.config, name)) for name in vars(spec.config)]
        parts += [
            (f"attribute {task.__name__}.{name}", value)
            for name, value in vars(task).items()
            if not name.startswith("__") and name != "_abc_impl"  # pickled by cloudpickle's own means
        ]
        culprits = []
        for what, value in parts:
            try:
                cloudpickle.dumps(value)
            except Exception:
                culprits.append(f"{what} ({type(value).__name__})")
        where = f": {', '.join(culprits)} cannot be pickled" if culprits else ""
        raise TypeError(
            f"task {task.__name__!r} cannot be sent to a worker process{where} ({type(error).__name__}: {error}); "
            f"keep such objects out of the class and its config (create them in build()), or use num_workers=0"
        ) from error


def start_pool(options: EnvOptions, specs: list[ShardSpec], progress: ProgressFactory) -> ShardPool:
    """Build every shard: in this process when ``num_workers == 0``, else one worker process per spec."""
    if options.num_workers == 0:
        return InProcessPool(specs[0], progress=progress)
    check_picklable(specs[0])
    spin_wait = options.spin_wait_us * 1e-6
    launches = [
        WorkerLaunch(
            label=worker_label(options, index),
            environment=worker_environment(options, index),
            shard_factory=ShardFactory(spec),
            spin_wait=spin_wait,
        )
        for index, spec in enumerate(specs)
    ]
    return WorkerPool(
        launches,
        build_timeout=options.build_timeout,
        forward_output=options.forward_output,
        progress=progress,
        spin_wait=spin_wait,
        # CPU workers fork from a server that imported torch and Genesis once (gs_gym.transport.preload); GPU
        # workers are spawned until forking them is measured on a GPU (CUDA must not start in the server)
        start_method="forkserver" if options.backend == "cpu" else "spawn",
    )
