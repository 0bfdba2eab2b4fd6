"""torchrl over a ``GenesisVectorEnv``: ``torchrl.envs.GymWrapper``, given the env it accepts.

torchrl wraps Gymnasium vector envs with ``torchrl.envs.GymWrapper(env)`` (batch size ``(num_envs,)``). It refuses
``AutoresetMode.NEXT_STEP``, gs_gym's default, because its own ``reset`` decides which envs restart. It takes:

* ``DISABLED`` (torchrl's preference, and ``make_env``'s default): a done env waits; torchrl resets the done envs
  with ``reset(options={"reset_mask": mask})``, which gs_gym supports;
* ``SAME_STEP``: torchrl reads ``info["final_obs"]`` for the true last observation (one Python loop over the envs
  on each step where some env finished).

``torchrl.envs.GymEnv("GenesisMultiGPU-v0", ...)`` cannot work: it builds envs with ``gym.make`` (one env) and turns
``num_envs`` into an ``AsyncVectorEnv`` of copies, so ``gym.make`` of the id raises ``VectorOnlyError`` naming
this module. Use::

    from torchrl.envs import RewardSum, TransformedEnv
    from gs_gym.adapters.torchrl import make_env

    env = TransformedEnv(make_env(64, task="cartpole", backend="cpu", seed=0), RewardSum())
    rollout = env.rollout(100, break_when_any_done=False)        # batch size (64, 100)

``GenesisGymWrapper`` is ``GymWrapper`` with one fix for tensor outputs: torchrl reshapes numpy rewards
``(num_envs,)`` to its reward spec ``(num_envs, 1)`` but passes tensors through as they are, and a ``RewardSum``
then broadcasts ``(num_envs, 1) + (num_envs,)`` into ``(num_envs, num_envs)``. Its device defaults to the env's
``main_device``, and reset masks stay tensors on it (``GymWrapper`` calls ``.numpy()`` on them).
"""

from __future__ import annotations

from typing import Any

import torch
from gymnasium.vector import AutoresetMode

try:
    from torchrl.envs import GymWrapper
except ImportError as error:  # pragma: no cover - exercised only without the extra
    raise ImportError(
        "gs_gym.adapters.torchrl needs torchrl, which is not installed; install the extra with: "
        'pip install "gs-gym[torchrl]"'
    ) from error

from gs_gym.vector.env import GenesisVectorEnv
from gs_gym.vector.options import as_autoreset_mode

__all__ = ["GenesisGymWrapper", "make_env", "wrap_env"]

_MODES = (AutoresetMode.DISABLED, AutoresetMode.SAME_STEP)
_OUTPUTS = ("torch", "numpy")


class GenesisGymWrapper(GymWrapper):
    """``torchrl.envs.GymWrapper`` for a ``GenesisVectorEnv``: tensor rewards take the reward spec's shape and
    reset masks stay on the env's device. Build it with :func:`wrap_env` or :func:`make_env`."""

    def read_reward(self, reward: Any) -> Any:
        if isinstance(reward, torch.Tensor):
            reward = reward.reshape(self.reward_spec.shape)
        return super().read_reward(reward)

    def _replace_reset(self, reset: torch.Tensor | None, kwargs: dict[str, Any]) -> dict[str, Any]:
        if reset is not None and self._env.autoreset_mode == AutoresetMode.DISABLED:
            kwargs.setdefault("options", {})["reset_mask"] = reset.reshape(self.batch_size)
        return kwargs


def check_venv(venv: Any) -> None:
    """Raise ``TypeError``/``ValueError`` unless ``venv`` is a ``GenesisVectorEnv`` that torchrl accepts."""
    instead = "or use gs_gym.adapters.torchrl.make_env(num_envs, ...)"
    if not isinstance(venv, GenesisVectorEnv):
        raise TypeError(
            f"gs_gym.adapters.torchrl: expected a gs_gym.GenesisVectorEnv, got {type(venv).__name__} "
            f"(pass the unwrapped vector env, {instead})"
        )
    if venv.autoreset_mode not in _MODES:
        raise ValueError(
            "gs_gym.adapters.torchrl: torchrl's GymWrapper refuses autoreset_mode=AutoresetMode.NEXT_STEP (it resets "
            'done envs itself); build the GenesisVectorEnv with autoreset_mode="disabled" (preferred) or '
            f'"same_step", {instead}'
        )
    if venv.output not in _OUTPUTS:
        raise ValueError(
            f'gs_gym.adapters.torchrl: the GenesisVectorEnv must be built with output="torch" or "numpy", got '
            f"output={venv.output!r} (torchrl's batch is one tensor per key; {instead})"
        )


def wrap_env(venv: GenesisVectorEnv, **wrapper_kwargs: Any) -> Any:
    """``GenesisGymWrapper(venv, device=venv.device, **wrapper_kwargs)`` after :func:`check_venv`.

    Under ``SAME_STEP`` torchrl returns it inside a ``TransformedEnv`` (its ``VecGymEnvTransform``); closing the
    result closes ``venv``.
    """
    check_venv(venv)
    wrapper_kwargs.setdefault("device", venv.device)
    return GenesisGymWrapper(venv, **wrapper_kwargs)


def make_env(num_envs: int, wrapper_kwargs: dict[str, Any] | None = None, **options: Any) -> Any:
    """``GenesisVectorEnv(num_envs, autoreset_mode="disabled", **options)`` wrapped by :func:`wrap_env`.

    ``autoreset_mode`` may be ``"disabled"`` (default) or ``"same_step"``, ``output`` ``"torch"`` (default) or
    ``"numpy"``; every other option is the env's. ``wrapper_kwargs`` go to ``GymWrapper`` (``device``, ...).
    """
    mode = as_autoreset_mode(options.pop("autoreset_mode", AutoresetMode.DISABLED))
    if mode not in _MODES:
        raise ValueError(
            'gs_gym.adapters.torchrl.make_env: autoreset_mode must be "disabled" (preferred) or "same_step"; '
            f"torchrl's GymWrapper refuses {mode} (it resets done envs itself)"
        )
    venv = GenesisVectorEnv(num_envs, autoreset_mode=mode, **options)
    try:
        return wrap_env(venv, **(wrapper_kwargs or {}))
    except BaseException:
        venv.close()
        raise
