"""Torch-native counterparts of Gymnasium's ``RecordEpisodeStatistics`` and ``NormalizeObservation`` vector wrappers.

Gymnasium's vector wrappers work on numpy arrays; a ``GenesisVectorEnv`` built with ``output="torch"`` returns
tensors on its ``main_device`` (a GPU in training). These wrappers keep all of their state in tensors on that device
and never copy to the host during ``step``: no ``.item()``, no ``bool(tensor)``, no boolean indexing (which waits for
the device to count the selected elements). Their outputs follow Gymnasium's layout, so code written for the numpy
wrappers reads them the same way::

    envs = TorchRecordEpisodeStatistics(GenesisVectorEnv(4096, task="cartpole"))
    obs, rewards, terminated, truncated, info = envs.step(actions)
    done = info["_episode"]                        # bool tensor, every step (all False when no episode ended)
    returns, lengths = info["episode"]["r"][done], info["episode"]["l"][done]   # host sync only where *you* ask

Unlike Gymnasium's wrapper, ``info["episode"]`` and ``info["_episode"]`` are present after every step (the mask
says which entries are real), because deciding whether any episode ended would need a host sync.
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np
import torch
from gymnasium.error import InvalidBound
from gymnasium.logger import warn
from gymnasium.spaces import Box
from gymnasium.vector import AutoresetMode, VectorEnv, VectorWrapper
from gymnasium.vector.utils import batch_space

__all__ = ["TorchNormalizeObservation", "TorchRecordEpisodeStatistics", "TorchRunningMeanStd"]


def _autoreset_mode(env: VectorEnv, wrapper: str) -> AutoresetMode:
    """``env.metadata["autoreset_mode"]``, or NEXT_STEP with a warning when it is missing (as Gymnasium does)."""
    if "autoreset_mode" not in env.metadata:
        warn(f"{wrapper}: the env's metadata has no 'autoreset_mode'; assuming AutoresetMode.NEXT_STEP")
        return AutoresetMode.NEXT_STEP
    mode = env.metadata["autoreset_mode"]
    if not isinstance(mode, AutoresetMode):
        raise TypeError(f"{wrapper}: expected env.metadata['autoreset_mode'] to be an AutoresetMode, got {mode!r}")
    return mode


def _env_device(env: VectorEnv, device: str | torch.device | None) -> torch.device:
    """``device``, else the env's ``main_device`` (``GenesisVectorEnv``), else the CPU (moved if outputs differ)."""
    if device is not None:
        return torch.device(device)
    main_device = getattr(env.unwrapped, "main_device", None)
    return torch.device(main_device) if main_device is not None else torch.device("cpu")


def _require_tensor(value: Any, what: str, wrapper: str, numpy_wrapper: str) -> torch.Tensor:
    if not isinstance(value, torch.Tensor):
        raise TypeError(
            f"{wrapper}: expected the env's {what} to be a torch.Tensor, got {type(value).__name__} "
            f"(for numpy outputs use gymnasium.wrappers.vector.{numpy_wrapper})"
        )
    return value


def _mask_tensor(mask: Any, num_envs: int, device: torch.device, wrapper: str) -> torch.Tensor:
    """A ``reset_mask`` (numpy or torch bool array) as a bool tensor on ``device``."""
    if isinstance(mask, np.ndarray):
        mask = torch.from_numpy(mask)
    if not isinstance(mask, torch.Tensor) or mask.dtype != torch.bool or tuple(mask.shape) != (num_envs,):
        raise TypeError(f"{wrapper}: options['reset_mask'] must be a bool array of shape ({num_envs},), got {mask!r}")
    return mask.to(device)


class TorchRecordEpisodeStatistics(VectorWrapper):
    """Per-env episode returns and lengths, accumulated in tensors on the env's device.

    After every ``step``, ``info[stats_key]`` is ``{"r": returns, "l": lengths, "t": seconds}`` (one entry per env;
    zero where no episode ended) and ``info["_" + stats_key]`` the bool mask of envs whose episode ended in this
    step, as in ``gymnasium.wrappers.vector.RecordEpisodeStatistics``. Returns are summed in ``dtype`` (float64 by
    default, like Gymnasium's wrapper, so both give identical values for the same rewards); lengths are int64.

    Autoreset modes are handled as Gymnasium's wrapper handles them: with ``NEXT_STEP`` (and ``DISABLED``) the step
    after a done is the reset step, whose reward (0) and step do not count towards the next episode; with
    ``SAME_STEP`` every step counts and the statistics restart right after a done.

    The last ``buffer_length`` finished episodes are kept in device ring buffers; :attr:`return_queue`,
    :attr:`length_queue`, :attr:`time_queue` (oldest first) and :attr:`episode_count` read them, which copies to
    the host: read them when logging, not per step.

    Args:
        env: a vector env whose rewards and dones are torch tensors.
        buffer_length: how many finished episodes the queues keep.
        stats_key: the info key (``"episode"``).
        device: where the statistics live; default the env's ``main_device`` (else the CPU). If the env's outputs
            arrive on another device, the statistics move there once.
        dtype: floating dtype of the returns (float64; use float32 on devices without float64).
    """

    def __init__(
        self,
        env: VectorEnv,
        buffer_length: int = 100,
        stats_key: str = "episode",
        device: str | torch.device | None = None,
        dtype: torch.dtype = torch.float64,
    ) -> None:
        super().__init__(env)
        if isinstance(buffer_length, bool) or not isinstance(buffer_length, int) or buffer_length < 1:
            raise ValueError(f"TorchRecordEpisodeStatistics: buffer_length must be an int >= 1, got {buffer_length!r}")
        self._stats_key = stats_key
        self._autoreset_mode = _autoreset_mode(self.env, type(self).__name__)
        self._buffer_length = buffer_length
        self._dtype = dtype
        self._allocate(_env_device(self.env, device))

    def _allocate(self, device: torch.device) -> None:
        n, size = self.num_envs, self._buffer_length + 1  # the extra slot takes the writes of envs that are not done
        self.device = device
        self.episode_returns = torch.zeros(n, dtype=self._dtype, device=device)
        self.episode_lengths = torch.zeros(n, dtype=torch.int64, device=device)
        self.episode_start_times = torch.full((n,), time.perf_counter(), dtype=torch.float64, device=device)
        self.prev_dones = torch.zeros(n, dtype=torch.bool, device=device)
        self._return_ring = torch.zeros(size, dtype=self._dtype, device=device)
        self._length_ring = torch.zeros(size, dtype=torch.int64, device=device)
        self._time_ring = torch.zeros(size, dtype=torch.float64, device=device)
        self._episodes = torch.zeros((), dtype=torch.int64, device=device)

    def _move_to(self, device: torch.device) -> None:
        if device == self.device:
            return
        for name in (
            "episode_returns",
            "episode_lengths",
            "episode_start_times",
            "prev_dones",
            "_return_ring",
            "_length_ring",
            "_time_ring",
            "_episodes",
        ):
            setattr(self, name, getattr(self, name).to(device))
        self.device = device

    # -- Gymnasium API -----------------------------------------------------------------------------------------------

    def reset(self, *, seed: Any = None, options: dict[str, Any] | None = None):
        """Reset the env; the statistics of the reset envs (all, or those of ``options["reset_mask"]``) restart."""
        obs, info = self.env.reset(seed=seed, options=options)
        now = time.perf_counter()
        mask = None if options is None else options.get("reset_mask")
        if mask is None:
            self.episode_returns.zero_()
            self.episode_lengths.zero_()
            self.episode_start_times.fill_(now)
            self.prev_dones.zero_()
        else:
            mask = _mask_tensor(mask, self.num_envs, self.device, type(self).__name__)
            self.episode_returns.masked_fill_(mask, 0)
            self.episode_lengths.masked_fill_(mask, 0)
            self.episode_start_times.masked_fill_(mask, now)
            self.prev_dones.masked_fill_(mask, False)
        return obs, info

    def step(self, actions: Any):
        obs, rewards, terminated, truncated, info = self.env.step(actions)
        name = type(self).__name__
        rewards = _require_tensor(rewards, "rewards", name, "RecordEpisodeStatistics")
        terminated = _require_tensor(terminated, "terminated flags", name, "RecordEpisodeStatistics")
        truncated = _require_tensor(truncated, "truncated flags", name, "RecordEpisodeStatistics")
        if not isinstance(info, dict):
            raise TypeError(f"{name}: expected the env's info to be a dict, got {type(info).__name__}")
        key, mask_key = self._stats_key, f"_{self._stats_key}"
        if key in info or mask_key in info:
            raise ValueError(f"{name}: info already has the key {key!r} or {mask_key!r}: {sorted(info)}")
        self._move_to(rewards.device)
        now = time.perf_counter()

        if self._autoreset_mode == AutoresetMode.SAME_STEP:
            self.episode_returns = self.episode_returns + rewards
            self.episode_lengths = self.episode_lengths + 1
        else:  # the step after a done reset the env: it neither ends nor starts an episode's statistics
            counts = ~self.prev_dones
            self.episode_returns = torch.where(counts, self.episode_returns + rewards, 0)
            self.episode_lengths = torch.where(counts, self.episode_lengths + 1, 0)
            self.episode_start_times = torch.where(counts, self.episode_start_times, now)

        dones = (terminated | truncated).to(self.device)
        elapsed = torch.round(now - self.episode_start_times, decimals=6)
        stats = {
            "r": torch.where(dones, self.episode_returns, 0),
            "l": torch.where(dones, self.episode_lengths, 0),
            "t": torch.where(dones, elapsed, 0),
        }
        self._record(dones, stats)
        if self._autoreset_mode == AutoresetMode.SAME_STEP:
            self.episode_returns = self.episode_returns.masked_fill(dones, 0)
            self.episode_lengths = self.episode_lengths.masked_fill(dones, 0)
            self.episode_start_times = self.episode_start_times.masked_fill(dones, now)
        self.prev_dones = dones
        info = {**info, key: stats, mask_key: dones}
        return obs, rewards, terminated, truncated, info

    # -- finished episodes ------------------------------------------------------------------------------------------

    def _record(self, dones: torch.Tensor, stats: dict[str, torch.Tensor]) -> None:
        """Write this step's finished episodes into the ring buffers, in env order, without a host sync."""
        size = self._buffer_length
        rank = torch.cumsum(dones.to(torch.int64), 0) - 1  # position of each done env among this step's dones
        count = rank[-1] + 1
        kept = dones & (rank >= count - size)  # more dones than slots: only the last `size` are kept
        slot = torch.where(kept, (self._episodes + rank) % size, size)
        self._return_ring.scatter_(0, slot, stats["r"].to(self._dtype))
        self._length_ring.scatter_(0, slot, stats["l"])
        self._time_ring.scatter_(0, slot, stats["t"])
        self._episodes = self._episodes + count

    def _queue(self, ring: torch.Tensor) -> torch.Tensor:
        total = int(self._episodes)
        kept = min(total, self._buffer_length)
        return ring[torch.arange(total - kept, total, device=self.device) % self._buffer_length]

    @property
    def episode_count(self) -> int:
        """Episodes finished since the wrapper was made (copies one number to the host)."""
        return int(self._episodes)

    @property
    def return_queue(self) -> torch.Tensor:
        """Returns of the last ``buffer_length`` finished episodes, oldest first (on the device; reading syncs)."""
        return self._queue(self._return_ring)

    @property
    def length_queue(self) -> torch.Tensor:
        """Lengths of the last ``buffer_length`` finished episodes, oldest first."""
        return self._queue(self._length_ring)

    @property
    def time_queue(self) -> torch.Tensor:
        """Wall-clock durations (s) of the last ``buffer_length`` finished episodes, oldest first."""
        return self._queue(self._time_ring)


class TorchRunningMeanStd:
    """Running mean and variance of batches (the parallel/Welford update), as tensors on ``device``.

    Starts like Gymnasium's ``RunningMeanStd``: mean 0, variance 1, count ``epsilon``.
    """

    def __init__(
        self,
        shape: tuple[int, ...],
        device: str | torch.device = "cpu",
        dtype: torch.dtype = torch.float64,
        epsilon: float = 1e-4,
    ) -> None:
        self.mean = torch.zeros(shape, dtype=dtype, device=device)
        self.var = torch.ones(shape, dtype=dtype, device=device)
        self.count = torch.tensor(epsilon, dtype=dtype, device=device)

    def update(self, batch: torch.Tensor) -> None:
        """Fold in ``batch`` (``(n, *shape)``); no host sync."""
        batch = batch.to(self.mean.dtype)
        n = batch.shape[0]
        if n == 0:
            return
        batch_mean = batch.mean(dim=0)
        batch_var = batch.var(dim=0, correction=0)
        delta = batch_mean - self.mean
        total = self.count + n
        self.mean = self.mean + delta * (n / total)
        m2 = self.var * self.count + batch_var * n + delta.square() * (self.count * n / total)
        self.var = m2 / total
        self.count = total

    def to(self, device: str | torch.device) -> TorchRunningMeanStd:
        self.mean, self.var, self.count = (t.to(device) for t in (self.mean, self.var, self.count))
        return self

    def state_dict(self) -> dict[str, torch.Tensor]:
        return {"mean": self.mean.clone(), "var": self.var.clone(), "count": self.count.clone()}

    def load_state_dict(self, state: dict[str, torch.Tensor]) -> None:
        device, dtype = self.mean.device, self.mean.dtype
        self.mean, self.var, self.count = (
            torch.as_tensor(state[k]).to(device=device, dtype=dtype).clone() for k in ("mean", "var", "count")
        )


class TorchNormalizeObservation(VectorWrapper):
    """``(obs - mean) / sqrt(var + epsilon)`` with running statistics kept in torch on the env's device.

    Like ``gymnasium.wrappers.vector.NormalizeObservation``: the statistics are updated with every observation
    batch that ``reset`` and ``step`` return, while :attr:`update_running_mean` is True (set it False to freeze them,
    e.g. for evaluation); the observation space becomes an unbounded float32 ``Box``. Beyond Gymnasium's wrapper:

    * ``SAME_STEP`` is supported: ``info["final_obs"]`` (a tensor) is normalized with the same statistics (it is not
      added to them: they see what ``step`` returns, as in the other modes);
    * a partial reset (``options["reset_mask"]``, ``DISABLED`` mode) adds only the reset envs' observations.

    Args:
        env: a vector env with a ``Box`` observation space whose observations are torch tensors.
        epsilon: added to the variance under the square root (strictly positive).
        device: where the statistics live; default the env's ``main_device`` (else the CPU).
        dtype: dtype of the statistics (float64; use float32 on devices without float64).
    """

    def __init__(
        self,
        env: VectorEnv,
        epsilon: float = 1e-8,
        device: str | torch.device | None = None,
        dtype: torch.dtype = torch.float64,
    ) -> None:
        if epsilon <= 0:
            raise InvalidBound(f"TorchNormalizeObservation: epsilon must be strictly positive, got {epsilon}")
        super().__init__(env)
        if not isinstance(self.env.single_observation_space, Box):
            raise TypeError(
                f"TorchNormalizeObservation: expected a Box observation space, got {self.env.single_observation_space}"
            )
        self._autoreset_mode = _autoreset_mode(self.env, type(self).__name__)
        shape = self.env.single_observation_space.shape
        self.single_observation_space = Box(-np.inf, np.inf, shape, np.float32)
        self.observation_space = batch_space(self.single_observation_space, self.num_envs)
        self.obs_rms = TorchRunningMeanStd(shape, _env_device(self.env, device), dtype)
        self.epsilon = epsilon
        self._update_running_mean = True

    @property
    def update_running_mean(self) -> bool:
        """Whether ``reset`` and ``step`` update the statistics (True) or only use them (False)."""
        return self._update_running_mean

    @update_running_mean.setter
    def update_running_mean(self, setting: bool) -> None:
        self._update_running_mean = bool(setting)

    def normalize(self, obs: torch.Tensor) -> torch.Tensor:
        """``obs`` normalized with the current statistics (float32, on the statistics' device)."""
        rms = self.obs_rms
        scaled = (obs.to(device=rms.mean.device, dtype=rms.mean.dtype) - rms.mean) / torch.sqrt(rms.var + self.epsilon)
        return scaled.to(torch.float32)

    def reset(self, *, seed: Any = None, options: dict[str, Any] | None = None):
        obs, info = self.env.reset(seed=seed, options=options)
        obs = self._observations(obs)
        if self._update_running_mean:
            mask = None if options is None else options.get("reset_mask")
            if mask is None:
                self.obs_rms.update(obs)
            else:  # the other envs returned the observations they already had (counted when they were returned)
                self.obs_rms.update(obs[_mask_tensor(mask, self.num_envs, obs.device, type(self).__name__)])
        return self.normalize(obs), info

    def step(self, actions: Any):
        obs, rewards, terminated, truncated, info = self.env.step(actions)
        obs = self._observations(obs)
        if self._update_running_mean:
            self.obs_rms.update(obs)
        if "final_obs" in info:
            final_obs = info["final_obs"]
            if not isinstance(final_obs, torch.Tensor):
                raise TypeError(
                    "TorchNormalizeObservation: expected info['final_obs'] to be a tensor (one row per env), got "
                    f"{type(final_obs).__name__}"
                )
            info = {**info, "final_obs": self.normalize(final_obs)}
        return self.normalize(obs), rewards, terminated, truncated, info

    def _observations(self, obs: Any) -> torch.Tensor:
        obs = _require_tensor(obs, "observations", type(self).__name__, "NormalizeObservation")
        if obs.device != self.obs_rms.mean.device:
            self.obs_rms.to(obs.device)
        return obs
