"""The Gymnasium id ``GenesisMultiGPU-v0``.

Gymnasium 1.x no longer loads ``gymnasium.envs`` entry points, so the wheel ships ``gs_gym_autoregister.pth``:
at interpreter start it installs ``_gs_gym_hook``, which registers the id right after ``gymnasium`` is imported
(without importing gs_gym, torch or Genesis). Importing ``gs_gym`` registers it too.
"""

from __future__ import annotations

from typing import Any

ENV_ID = "GenesisMultiGPU-v0"
VECTOR_ENTRY_POINT = "gs_gym.registration:make_vector_env"


def make_vector_env(num_envs: int, **kwargs: Any):
    """``gym.make_vec`` entry point: ``GenesisVectorEnv(num_envs, **kwargs)``."""
    from gs_gym.vector.env import GenesisVectorEnv

    return GenesisVectorEnv(num_envs, **kwargs)


def register_envs() -> None:
    """Register ``GenesisMultiGPU-v0`` with Gymnasium unless it already is."""
    import gymnasium

    if ENV_ID not in gymnasium.registry:
        gymnasium.register(id=ENV_ID, vector_entry_point=VECTOR_ENTRY_POINT)
