"""Vector wrappers for ``GenesisVectorEnv`` (and any Gymnasium 1.x vector env).

* ``TorchRecordEpisodeStatistics`` / ``TorchNormalizeObservation``: Gymnasium's ``RecordEpisodeStatistics`` and
  ``NormalizeObservation`` for torch outputs, state on the env's device, no host sync per step.
* ``LegacyFinalInfo``: Gymnasium 0.29's ``final_observation`` / ``final_info`` layout from a ``SAME_STEP`` env, for
  scripts written against 0.29.

For numpy outputs (``output="numpy"``) Gymnasium's own ``gymnasium.wrappers.vector`` wrappers work as they are.
"""

from gs_gym.wrappers.legacy import LegacyFinalInfo
from gs_gym.wrappers.torch_stats import TorchNormalizeObservation, TorchRecordEpisodeStatistics, TorchRunningMeanStd

__all__ = ["LegacyFinalInfo", "TorchNormalizeObservation", "TorchRecordEpisodeStatistics", "TorchRunningMeanStd"]
