"""The Gymnasium id ``GenesisMultiGPU-v0``.

Gymnasium 1.x no longer loads ``gymnasium.envs`` entry points, so the wheel ships ``gs_gym_autoregister.pth``:
at interpreter start it installs ``_gs_gym_hook``, which registers the id right after ``gymnasium`` is imported
(without importing gs_gym, torch or Genesis). Importing ``gs_gym`` registers it too.

The id names a vector env: ``gym.make_vec`` builds it. Its (single-env) entry point only raises
``VectorOnlyError`` saying so, for ``gym.make`` and what calls it (torchrl's ``GymEnv``), instead of Gymnasium's
"entry_point is not specified".
"""

from __future__ import annotations

from typing import Any, NoReturn

ENV_ID = "GenesisMultiGPU-v0"
VECTOR_ENTRY_POINT = "gs_gym.registration:make_vector_env"
ENTRY_POINT = "gs_gym.registration:refuse_single_env"

VECTOR_ONLY_MESSAGE = (
    f"{ENV_ID} is a vector env (its envs step as one batch in each worker), so gym.make cannot build it: use "
    f'gym.make_vec("{ENV_ID}", num_envs=N, ...) or gs_gym.GenesisVectorEnv(N, ...). torchrl\'s GymEnv calls '
    "gym.make (and turns num_envs into an AsyncVectorEnv of single envs): use gs_gym.adapters.torchrl.make_env(N, "
    "...), which wraps the vector env in torchrl.envs.GymWrapper."
)


def make_vector_env(num_envs: int, **kwargs: Any):
    """``gym.make_vec`` entry point: ``GenesisVectorEnv(num_envs, **kwargs)``."""
    from gs_gym.vector.env import GenesisVectorEnv

    return GenesisVectorEnv(num_envs, **kwargs)


def refuse_single_env(**kwargs: Any) -> NoReturn:
    """``gym.make`` entry point: raises ``VectorOnlyError`` naming what to use instead."""
    from gs_gym.errors import VectorOnlyError

    raise VectorOnlyError(VECTOR_ONLY_MESSAGE)


def register_envs() -> None:
    """Register ``GenesisMultiGPU-v0`` with Gymnasium unless it already is."""
    import gymnasium

    if ENV_ID not in gymnasium.registry:
        gymnasium.register(id=ENV_ID, entry_point=ENTRY_POINT, vector_entry_point=VECTOR_ENTRY_POINT)
