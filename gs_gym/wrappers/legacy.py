"""``LegacyFinalInfo``: Gymnasium 0.29's ``final_observation`` / ``final_info`` for scripts written against 0.29.

Before Gymnasium 1.0, a vector env reset finished envs inside the step that ended their episode and reported the
episode's last observation and info per env::

    info["final_observation"]   # object array: the last observation of env i where it finished, None elsewhere
    info["_final_observation"]  # bool mask of the finished envs
    info["final_info"]          # object array: env i's info dict of its last step where it finished, None elsewhere
    info["_final_info"]         # bool mask

Many scripts (CleanRL's, for instance) still read episode statistics with
``for info in infos["final_info"]: if info and "episode" in info: ...`` and bootstrap truncated episodes from
``infos["final_observation"]``. Gymnasium 1.x's ``SAME_STEP`` autoreset mode has the same timing but another layout
(``info["final_obs"]``, and ``info["final_info"]`` as a dict of batched arrays); this wrapper rewrites the latter
into the former::

    envs = GenesisVectorEnv(16, task="cartpole", output="numpy", autoreset_mode="same_step")
    envs = LegacyFinalInfo(gymnasium.wrappers.vector.RecordEpisodeStatistics(envs))

Each ``final_info[i]`` holds every entry of the step's info that applies to env ``i`` (its mask, if the key has
one, is True at ``i``), for example the ``"episode"`` statistics of a ``RecordEpisodeStatistics`` wrapped *inside*
this one, merged with the entries of the 1.x ``final_info`` for env ``i``. The 1.x keys ``final_obs``/``_final_obs``
are replaced; every other key is passed on unchanged.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from gymnasium.vector import AutoresetMode, VectorEnv, VectorWrapper

__all__ = ["LegacyFinalInfo"]

_REPLACED = ("final_obs", "_final_obs", "final_info", "_final_info")


def _host_bool(value: Any) -> np.ndarray:
    """A bool array on the host from a numpy array or a tensor (CPU or device)."""
    if hasattr(value, "detach"):  # torch.Tensor, without importing torch
        value = value.detach().cpu().numpy()
    return np.asarray(value, dtype=bool)


class _PerEnv:
    """Splits one step's Gymnasium 1.x vector info into per-env dicts (each mask copied to the host once)."""

    def __init__(self, num_envs: int) -> None:
        self.num_envs = num_envs
        self._masks: dict[int, np.ndarray] = {}

    def info(self, info: dict[str, Any], index: int | np.integer) -> dict[str, Any]:
        """The entries of ``info`` that apply to env ``index`` (no mask, or its mask is True there)."""
        entries: dict[str, Any] = {}
        for key, value in info.items():
            if key.startswith("_"):
                continue
            mask = info.get(f"_{key}")
            if mask is not None and not self._mask(mask)[index]:
                continue
            entries[key] = self.row(value, index)
        return entries

    def row(self, value: Any, index: int | np.integer) -> Any:
        """Env ``index``'s element of a batched value (copied: the env may reuse its buffers); other values as is."""
        if isinstance(value, dict):
            return self.info(value, index)
        batched = isinstance(value, np.ndarray) or hasattr(value, "detach")
        if not batched or value.ndim == 0 or len(value) != self.num_envs:
            return value  # not batched per env (e.g. a list of restarted workers)
        row = value[index]
        if hasattr(row, "detach"):
            return row.detach().clone()
        if isinstance(row, np.ndarray):
            return row.copy()
        return row

    def _mask(self, mask: Any) -> np.ndarray:
        key = id(mask)
        if key not in self._masks:
            self._masks[key] = _host_bool(mask)
        return self._masks[key]


class LegacyFinalInfo(VectorWrapper):
    """Adds Gymnasium 0.29's ``final_observation`` and ``final_info`` (object arrays) to a ``SAME_STEP`` vector env.

    The keys appear only in steps where some env finished, as in 0.29. Works with numpy and torch outputs (the
    per-env entries are then tensor rows); the masks are numpy bool arrays either way.

    Raises:
        ValueError: the env's autoreset mode is not ``SAME_STEP`` (0.29 scripts expect the reset observation in
            the same step as the final one; build the env with ``autoreset_mode="same_step"``).
    """

    def __init__(self, env: VectorEnv) -> None:
        super().__init__(env)
        mode = self.env.metadata.get("autoreset_mode")
        if mode != AutoresetMode.SAME_STEP:
            raise ValueError(
                "LegacyFinalInfo: the env must use AutoresetMode.SAME_STEP (Gymnasium 0.29 reset finished envs in "
                f"the step that ended them, and reported the last observation in info), got {mode!r}; build it "
                "with autoreset_mode='same_step'"
            )

    def step(self, actions: Any):
        obs, rewards, terminated, truncated, info = self.env.step(actions)
        done = _host_bool(terminated) | _host_bool(truncated)
        out = {key: value for key, value in info.items() if key not in _REPLACED}
        if done.any():
            if "final_obs" not in info:
                raise RuntimeError(
                    "LegacyFinalInfo: some env finished but the SAME_STEP env put no 'final_obs' in info"
                )
            final_obs, new_info = info["final_obs"], info.get("final_info", {})
            final_observation = np.full(self.num_envs, None, dtype=object)
            final_info = np.full(self.num_envs, None, dtype=object)
            per_env = _PerEnv(self.num_envs)
            for index in np.flatnonzero(done):
                final_observation[index] = per_env.row(final_obs, index)
                final_info[index] = {**per_env.info(out, index), **per_env.info(new_info, index)}
            out["final_observation"] = final_observation
            out["_final_observation"] = done
            out["final_info"] = final_info
            out["_final_info"] = done.copy()
        return obs, rewards, terminated, truncated, out
