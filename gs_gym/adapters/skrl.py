"""skrl over a ``GenesisVectorEnv``: skrl's own Gymnasium wrapper, given the env it needs.

skrl wraps a Gymnasium vector env with ``skrl.envs.wrappers.torch.wrap_env(env)`` (its ``GymnasiumWrapper``),
which resets the vector env once and from then on relies on autoreset: every step's observation becomes the next
step's input, and its agents add every step's reward and a step to the running episode, closing the episode where
``terminated | truncated``. That is ``AutoresetMode.SAME_STEP``. Under gs_gym's default ``NEXT_STEP`` the step after
a done is the reset step (reward 0, the action ignored): skrl would count it as the first step of the next episode
(lengths one too long) and learn from a transition whose action did nothing. So build the env with ``make_env``::

    from skrl.trainers.torch import SequentialTrainer
    from gs_gym.adapters.skrl import make_env

    env = make_env(64, task="cartpole", backend="cpu", seed=0)   # skrl's GymnasiumWrapper over the vector env
    agent = PPO(models=..., memory=..., cfg=..., observation_space=env.observation_space,
                action_space=env.action_space, device=env.device)
    SequentialTrainer(env=env, agents=agent, cfg={"timesteps": 10_000}).train()

or check an env you built yourself with ``wrap_env(venv)``. Outputs are torch tensors on the env's ``main_device``,
which skrl reads as ``env.device``. ``render()`` (called by skrl's trainers unless ``headless=True``) gives one
``None`` per env without a render mode.
"""

from __future__ import annotations

from typing import Any

try:
    from skrl.envs.wrappers.torch import wrap_env as _skrl_wrap_env
except ImportError as error:  # pragma: no cover - exercised only without the extra
    raise ImportError(
        'gs_gym.adapters.skrl needs skrl, which is not installed; install the extra with: pip install "gs-gym[skrl]"'
    ) from error

from gs_gym.adapters.requirements import AdapterRequirements
from gs_gym.vector.env import GenesisVectorEnv

__all__ = ["make_env", "wrap_env"]

_REQUIREMENTS = AdapterRequirements(
    adapter="gs_gym.adapters.skrl.wrap_env",
    output="torch",
    output_reason="skrl's agents work on torch tensors on the env's device",
    mode_reason="skrl's wrapper resets the vector env once and counts every step towards an episode",
    maker="gs_gym.adapters.skrl.make_env",
)


def wrap_env(venv: GenesisVectorEnv, verbose: bool = False) -> Any:
    """skrl's ``GymnasiumWrapper`` over ``venv``, a ``GenesisVectorEnv`` built with ``output="torch"`` and
    ``autoreset_mode=SAME_STEP`` (``TypeError``/``ValueError`` naming what to change otherwise).

    The wrapper's ``close()`` closes ``venv``. ``verbose`` is skrl's (it logs the wrapper it chose).
    """
    _REQUIREMENTS.check_venv(venv)
    return _skrl_wrap_env(venv, wrapper="gymnasium", verbose=verbose)


def make_env(num_envs: int, verbose: bool = False, **options: Any) -> Any:
    """``GenesisVectorEnv(num_envs, output="torch", autoreset_mode=SAME_STEP, **options)`` in skrl's wrapper.

    ``output`` and ``autoreset_mode`` may be given only with those values; every other option is the env's.
    """
    venv = GenesisVectorEnv(num_envs, **_REQUIREMENTS.make_kwargs(options))
    try:
        return wrap_env(venv, verbose=verbose)
    except BaseException:
        venv.close()
        raise
