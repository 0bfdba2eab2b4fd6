"""Stable-Baselines3 ``VecEnv`` over a ``GenesisVectorEnv``.

SB3 algorithms drive a ``VecEnv``: numpy arrays in and out, ``dones`` instead of ``terminated``/``truncated``,
one info dict per env, automatic resets that report the last observation of an episode as
``infos[i]["terminal_observation"]``, and seeds applied at the next ``reset()``. ``Sb3VecEnv`` provides exactly
that over a ``GenesisVectorEnv`` built with ``output="numpy"`` and ``autoreset_mode=SAME_STEP`` (the mode whose
step returns the new episode's first observation together with the true final observation of the old one)::

    from stable_baselines3 import PPO
    from gs_gym.adapters.sb3 import Sb3VecEnv

    env = Sb3VecEnv.make(16, task="cartpole", backend="cpu", seed=0)
    PPO("MlpPolicy", env).learn(100_000)
    env.close()

Per-env methods (``get_attr``, ``set_attr``, ``env_method``) reach the *task* of the worker that holds the env.
A task is batched: one object serves every env of its worker, so an attribute read returns the worker's value for
each index, a method runs once per worker touched by ``indices`` (every index gets its worker's result), and
``set_attr`` refuses indices that cover only part of a worker's envs (it would change the others as well).
``render_mode`` is answered by the vector env itself.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np

try:
    from stable_baselines3.common.vec_env.base_vec_env import VecEnv, VecEnvIndices, VecEnvObs, VecEnvStepReturn
except ImportError as error:  # pragma: no cover - exercised only without the extra
    raise ImportError(
        "gs_gym.adapters.sb3 needs stable-baselines3, which is not installed; "
        'install the extra with: pip install "gs-gym[sb3]"'
    ) from error

from gs_gym.adapters.requirements import AdapterRequirements
from gs_gym.errors import WorkerError
from gs_gym.vector.env import GenesisVectorEnv

__all__ = ["Sb3VecEnv"]

_REQUIREMENTS = AdapterRequirements(
    adapter="Sb3VecEnv",
    output="numpy",
    output_reason="SB3 works on numpy arrays",
    mode_reason="SB3 expects the reset observation in the same step as terminal_observation",
)
_VECTOR_LEVEL_ATTRIBUTES = frozenset({"render_mode"})
"""Attributes that belong to the vector env, not to a task; ``get_attr`` answers them from ``GenesisVectorEnv``."""


class Sb3VecEnv(VecEnv):
    """A Stable-Baselines3 ``VecEnv`` over ``venv``, a ``GenesisVectorEnv`` with ``output="numpy"`` and
    ``autoreset_mode=SAME_STEP`` (see :meth:`make` to build both at once).

    The adapter owns ``venv``: :meth:`close` closes it.
    """

    def __init__(self, venv: GenesisVectorEnv) -> None:
        _REQUIREMENTS.check_venv(venv)
        self.venv = venv  # set before VecEnv.__init__, which reads get_attr("render_mode")
        super().__init__(venv.num_envs, venv.single_observation_space, venv.single_action_space)
        # VecEnv.__init__ rebuilt metadata from render_mode alone; keep the vector env's render modes.
        self.metadata = {**self.metadata, "render_modes": list(venv.metadata.get("render_modes", []))}

    @classmethod
    def make(cls, num_envs: int, **env_kwargs: Any) -> Sb3VecEnv:
        """Build ``GenesisVectorEnv(num_envs, output="numpy", autoreset_mode=SAME_STEP, **env_kwargs)`` and wrap it.

        ``output`` and ``autoreset_mode`` may be given only with those values.
        """
        venv = GenesisVectorEnv(num_envs, **_REQUIREMENTS.make_kwargs(env_kwargs))
        try:
            return cls(venv)
        except BaseException:
            venv.close()
            raise

    # -- stepping ------------------------------------------------------------------------------------------------

    def reset(self) -> VecEnvObs:
        """Reset every env with the seeds of the last :meth:`seed` call (then forgotten, as in SB3)."""
        if any(self._options):
            raise ValueError(f"Sb3VecEnv.reset: GenesisVectorEnv tasks take no reset options, got {self._options}")
        obs, info = self.venv.reset(seed=self._pending_seed())
        self._reset_seeds()
        self._reset_options()
        self.reset_infos = self._split_info(info)
        return self._own(obs)

    def step_async(self, actions: np.ndarray) -> None:
        self.venv.step_async(actions)

    def step_wait(self) -> VecEnvStepReturn:
        obs, rewards, terminated, truncated, info = self.venv.step_wait()
        dones = np.logical_or(terminated, truncated)
        infos = self._split_info({k: v for k, v in info.items() if k not in ("final_obs", "_final_obs")})
        time_limit = np.logical_and(truncated, np.logical_not(terminated))
        for index, entry in enumerate(infos):
            entry["TimeLimit.truncated"] = bool(time_limit[index])
        if dones.any():
            final_obs = info["final_obs"]
            for done_index in np.flatnonzero(dones):
                infos[done_index]["terminal_observation"] = final_obs[done_index]
        return self._own(obs), np.asarray(rewards, dtype=np.float32), dones, infos

    def close(self) -> None:
        self.venv.close()

    # -- seeding and options -------------------------------------------------------------------------------------

    def set_options(self, options: list[dict] | dict | None = None) -> None:
        if options:
            values = options if isinstance(options, list) else [options]
            if any(values):
                raise ValueError(f"Sb3VecEnv.set_options: GenesisVectorEnv tasks take no reset options, got {options}")
        super().set_options(options)

    def _pending_seed(self) -> int | list[int | None] | None:
        """``self._seeds`` in the form ``GenesisVectorEnv.reset`` takes: an int when they run ``s, s+1, ...``."""
        seeds = self._seeds
        if all(s is None for s in seeds):
            return None
        first = seeds[0]
        if first is not None and all(s == first + i for i, s in enumerate(seeds)):
            return int(first)
        return [None if s is None else int(s) for s in seeds]

    # -- per-env access ------------------------------------------------------------------------------------------

    def get_attr(self, attr_name: str, indices: VecEnvIndices = None) -> list[Any]:
        """The task attribute ``attr_name`` for each env of ``indices`` (its worker's value)."""
        env_indices = self._indices(indices)
        if attr_name in _VECTOR_LEVEL_ATTRIBUTES:
            return [getattr(self.venv, attr_name) for _ in env_indices]
        workers = self._workers_of(env_indices)
        values = dict(zip(workers, self._attribute_errors(self.venv.get_attr, attr_name, workers=workers), strict=True))
        return [values[self._worker_of(i)] for i in env_indices]

    def set_attr(self, attr_name: str, value: Any, indices: VecEnvIndices = None) -> None:
        """Set the task attribute ``attr_name`` in the workers of ``indices``, which must hold no other envs."""
        env_indices = self._indices(indices)
        if attr_name in _VECTOR_LEVEL_ATTRIBUTES:
            raise AttributeError(f"Sb3VecEnv.set_attr: {attr_name!r} is fixed when the GenesisVectorEnv is built")
        workers = self._workers_of(env_indices)
        chosen = set(env_indices)
        for worker in workers:
            shard = self.venv.env_ranges[worker]
            if not chosen.issuperset(range(shard.offset, shard.stop)):
                raise ValueError(
                    f"Sb3VecEnv.set_attr: envs {shard.offset}..{shard.stop - 1} share worker {worker}'s task, so "
                    f"{attr_name!r} can only be set for all of them; indices {sorted(chosen)} cover only part"
                )
        self._attribute_errors(self.venv.set_attr, attr_name, value, workers=workers)

    def env_method(
        self, method_name: str, *method_args: Any, indices: VecEnvIndices = None, **method_kwargs: Any
    ) -> list[Any]:
        """Call the task method ``method_name`` once per worker of ``indices``; each env gets its worker's result."""
        env_indices = self._indices(indices)
        workers = self._workers_of(env_indices)
        results = self._attribute_errors(self.venv.call_workers, workers, method_name, *method_args, **method_kwargs)
        values = dict(zip(workers, results, strict=True))
        return [values[self._worker_of(i)] for i in env_indices]

    def env_is_wrapped(self, wrapper_class: type, indices: VecEnvIndices = None) -> list[bool]:
        """Always False: the envs are batched Genesis scenes, not ``gymnasium.Env`` objects that wrappers wrap."""
        return [False for _ in self._indices(indices)]

    # -- helpers -------------------------------------------------------------------------------------------------

    def _own(self, array: np.ndarray) -> np.ndarray:
        """``array``, copied when the vector env hands out its reused output buffers (``copy=False``)."""
        return array if self.venv.copy else np.array(array, copy=True)

    def _indices(self, indices: VecEnvIndices) -> list[int]:
        env_indices = [int(i) for i in self._get_indices(indices)]
        bad = [i for i in env_indices if not 0 <= i < self.num_envs]
        if bad:
            raise IndexError(f"Sb3VecEnv: env indices {bad} out of range for num_envs={self.num_envs}")
        return env_indices

    def _worker_of(self, env_index: int) -> int:
        for worker, shard in enumerate(self.venv.env_ranges):
            if shard.offset <= env_index < shard.stop:
                return worker
        raise IndexError(f"Sb3VecEnv: env index {env_index} out of range for num_envs={self.num_envs}")

    def _workers_of(self, env_indices: Iterable[int]) -> list[int]:
        return sorted({self._worker_of(i) for i in env_indices})

    @staticmethod
    def _attribute_errors(method: Any, *args: Any, **kwargs: Any) -> Any:
        """Call ``method``, turning a worker's AttributeError back into one (SB3's ``has_attr`` relies on it)."""
        try:
            return method(*args, **kwargs)
        except WorkerError as error:
            if error.remote_type == "AttributeError":
                raise AttributeError(str(error)) from error
            raise

    def _split_info(self, info: dict[str, Any]) -> list[dict[str, Any]]:
        """Gymnasium's vector info (``{key: batch, _key: mask}``, nested for ``final_info``) as per-env dicts.

        ``final_info`` entries are merged into the env's dict, as SB3's own ``DummyVecEnv`` reports the info of the
        step that ended the episode.
        """
        infos: list[dict[str, Any]] = [{} for _ in range(self.num_envs)]

        def add(source: dict[str, Any]) -> None:
            for key, value in source.items():
                if key.startswith("_"):
                    continue
                mask = source.get(f"_{key}")
                if key == "final_info" and isinstance(value, dict):
                    add(value)
                    continue
                for index in range(self.num_envs):
                    if mask is None or mask[index]:
                        infos[index][key] = _item(value, index)

        add(info)
        return infos


def _item(value: Any, index: int) -> Any:
    if isinstance(value, dict):
        return {k: _item(v, index) for k, v in value.items() if not k.startswith("_")}
    if isinstance(value, (np.ndarray, Sequence)) and not isinstance(value, (str, bytes)):
        return value[index]
    return value
