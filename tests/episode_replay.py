"""What an RL library did to a ``GenesisVectorEnv``, replayed through ``TorchRecordEpisodeStatistics``.

``RecordingEnv`` logs every ``reset`` and every step's actions. After the library's run, ``replay_statistics``
seeds an env built alike (the same one, or a fresh one where the library closed it) as the log's first seeded full
reset did and repeats the calls under the wrapper: rollouts are deterministic for a seed and actions, whatever the
worker count, so the wrapper sees exactly the steps the library saw, and its statistics are what the library
should have logged.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np
import torch

from gs_gym import GenesisVectorEnv
from gs_gym.wrappers import TorchRecordEpisodeStatistics


@dataclasses.dataclass(frozen=True)
class Episodes:
    """Finished episodes in the order they ended (within a step, by env index)."""

    returns: list[float]
    lengths: list[int]

    @property
    def count(self) -> int:
        return len(self.returns)

    @property
    def mean_return(self) -> float:
        return float(np.mean(np.asarray(self.returns, dtype=np.float32)))


class RecordingEnv(GenesisVectorEnv):
    """A ``GenesisVectorEnv`` that logs ``("reset", seed, mask)`` and ``("step", actions)`` calls."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self.calls: list[tuple[Any, ...]] = []
        super().__init__(*args, **kwargs)

    def reset(self, *, seed: Any = None, options: dict[str, Any] | None = None):
        mask = None if options is None else options.get("reset_mask")
        if isinstance(mask, torch.Tensor):
            mask = mask.detach().cpu().numpy()
        self.calls.append(("reset", seed, None if mask is None else np.array(mask, dtype=bool)))
        return super().reset(seed=seed, options=options)

    def step_async(self, actions: Any) -> None:
        host = actions.detach().cpu().clone() if isinstance(actions, torch.Tensor) else torch.as_tensor(actions)
        self.calls.append(("step", host))
        super().step_async(actions)


def replay_statistics(calls: list[tuple[Any, ...]], env: GenesisVectorEnv) -> Episodes:
    """The episodes ``TorchRecordEpisodeStatistics`` (float32 returns) records over ``env`` replaying ``calls``
    (a ``RecordingEnv``'s, from its first seeded full reset on)."""
    calls = list(calls)
    first = next(i for i, call in enumerate(calls) if call[0] == "reset" and call[1] is not None and call[2] is None)
    stats = TorchRecordEpisodeStatistics(env, buffer_length=100_000, dtype=torch.float32)
    for call in calls[first:]:
        if call[0] == "reset":
            _, seed, mask = call
            stats.reset(seed=seed, options=None if mask is None else {"reset_mask": mask})
        else:
            stats.step(call[1])
    assert stats.episode_count <= 100_000
    return Episodes(stats.return_queue.tolist(), stats.length_queue.tolist())
