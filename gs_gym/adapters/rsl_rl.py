"""rsl_rl ``VecEnv`` over a ``GenesisVectorEnv`` (written against ``rsl-rl-lib`` 5.x).

rsl_rl's ``OnPolicyRunner`` drives a ``rsl_rl.env.VecEnv``: torch tensors on ``env.device``, observations as a
``TensorDict`` of observation groups, ``dones`` instead of ``terminated``/``truncated`` with the time-limit part in
``extras["time_outs"]`` (PPO bootstraps those), and envs that reset themselves inside the step that ends them.
``RslRlVecEnv`` provides that over a ``GenesisVectorEnv`` built with ``output="torch"`` and
``autoreset_mode=SAME_STEP``::

    from rsl_rl.runners import OnPolicyRunner
    from gs_gym.adapters.rsl_rl import RslRlVecEnv

    if __name__ == "__main__":
        env = RslRlVecEnv.make(4096, task="cartpole", seed=0)
        runner = OnPolicyRunner(env, train_cfg, log_dir="runs/cartpole", device=str(env.device))
        runner.learn(num_learning_iterations=300)
        env.close()

The observations are one group, ``"policy"`` by default (``obs_group``), so ``train_cfg["obs_groups"]`` is
``{"actor": ["policy"], "critic": ["policy"]}``. Actions are clipped to the action space's bounds unless
``clip_actions=False`` (rsl_rl's Gaussian policies are unbounded).

``episode_length_buf`` mirrors the env's per-env episode step counters, which a ``GenesisVectorEnv`` keeps inside
its workers: the adapter follows them from the dones. Assigning a buffer (``OnPolicyRunner.learn(...,
init_at_random_ep_len=True)`` assigns random lengths in ``[0, max_episode_length)``) sets the env's counters with
``GenesisVectorEnv.set_episode_steps``, so those envs reach the time limit earlier and episode ends spread over the
batch; writing into the tensor in place changes nothing in the env.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
from gymnasium.spaces import Box

try:
    from rsl_rl.env import VecEnv
    from tensordict import TensorDict
except ImportError as error:  # pragma: no cover - exercised by a test that hides rsl_rl
    raise ImportError(
        "gs_gym.adapters.rsl_rl needs rsl_rl (the rsl-rl-lib package) and tensordict, which are not installed; "
        'install the extra with: pip install "gs-gym[rsl-rl]"'
    ) from error

from gs_gym.adapters.requirements import AdapterRequirements
from gs_gym.vector.env import GenesisVectorEnv

__all__ = ["RslRlVecEnv"]

_REQUIREMENTS = AdapterRequirements(
    adapter="RslRlVecEnv",
    output="torch",
    output_reason="rsl_rl works on torch tensors",
    mode_reason="rsl_rl expects finished envs to be reset in the step that ends them",
)


class RslRlVecEnv(VecEnv):
    """An rsl_rl ``VecEnv`` over ``venv``, a ``GenesisVectorEnv`` with ``output="torch"`` and
    ``autoreset_mode=SAME_STEP`` (see :meth:`make` to build both at once). The adapter owns ``venv``.

    The env is reset once here (with ``seed``), because ``OnPolicyRunner`` starts with :meth:`get_observations`.

    Attributes (rsl_rl's ``VecEnv`` interface):
        num_envs, num_actions: batch size and flattened action size.
        max_episode_length: the task's ``max_episode_steps``.
        episode_length_buf: ``(num_envs,)`` int64 steps of the current episodes, on ``device``; assigning it sets
            the env's counters (``init_at_random_ep_len=True``).
        device: the env's ``main_device``; observations, rewards and dones live there.
        cfg: the task's config (a frozen dataclass).
    """

    def __init__(
        self,
        venv: GenesisVectorEnv,
        *,
        obs_group: str = "policy",
        clip_actions: bool = True,
        seed: int | None = None,
    ) -> None:
        _REQUIREMENTS.check_venv(venv)
        action_space = venv.single_action_space
        if not isinstance(action_space, Box):
            raise TypeError(f"RslRlVecEnv: rsl_rl needs a continuous (Box) action space, got {action_space}")
        self.venv = venv
        self.obs_group = obs_group
        self.num_envs = venv.num_envs
        self.num_actions = int(np.prod(action_space.shape))
        self.max_episode_length = int(venv.task_config.max_episode_steps)
        self.device = venv.main_device
        self.cfg = venv.task_config
        self._action_shape = (venv.num_envs, *action_space.shape)
        self._clip = None
        if clip_actions:
            low = torch.as_tensor(action_space.low, dtype=torch.float32, device=self.device)
            high = torch.as_tensor(action_space.high, dtype=torch.float32, device=self.device)
            self._clip = (low, high)
        self._episode_length_buf = torch.zeros(self.num_envs, dtype=torch.int64, device=self.device)
        self._observations = self.reset(seed=seed)

    @classmethod
    def make(
        cls,
        num_envs: int,
        *,
        obs_group: str = "policy",
        clip_actions: bool = True,
        final_obs: bool = False,
        **env_kwargs: Any,
    ) -> RslRlVecEnv:
        """Build ``GenesisVectorEnv(num_envs, output="torch", autoreset_mode=SAME_STEP, final_obs=final_obs,
        **env_kwargs)`` and wrap it.

        ``output`` and ``autoreset_mode`` may be given only with those values; ``seed`` also seeds the first reset.
        ``final_obs`` is off by default: rsl_rl never reads the observations that finished envs ended on (its PPO
        bootstraps time-outs from the value of the step's own observations), and without them a step that resets
        observes once instead of twice (``EnvOptions.final_obs``). With ``final_obs=True`` they come in
        ``extras["final_obs"]``.
        """
        venv = GenesisVectorEnv(num_envs, final_obs=final_obs, **_REQUIREMENTS.make_kwargs(env_kwargs))
        try:
            return cls(venv, obs_group=obs_group, clip_actions=clip_actions, seed=env_kwargs.get("seed"))
        except BaseException:
            venv.close()
            raise

    # -- rsl_rl VecEnv ---------------------------------------------------------------------------------------------

    @property
    def episode_length_buf(self) -> torch.Tensor:
        return self._episode_length_buf

    @episode_length_buf.setter
    def episode_length_buf(self, value: torch.Tensor) -> None:
        """Set the env's episode step counters to ``value`` (``num_envs`` ints in ``[0, max_episode_length)``; see
        ``GenesisVectorEnv.set_episode_steps`` for the accepted types and the errors)."""
        self.venv.set_episode_steps(value)
        self._episode_length_buf.copy_(torch.as_tensor(value, device=self.device))

    def get_observations(self) -> TensorDict:
        """The observations of the last ``reset``/``step``, as ``TensorDict({obs_group: (num_envs, obs_dim)})``."""
        return self._observations

    def step(self, actions: torch.Tensor) -> tuple[TensorDict, torch.Tensor, torch.Tensor, dict[str, Any]]:
        """Step every env; finished envs are reset in the same step (their new first observation is returned).

        Returns ``(observations, rewards, dones, extras)``: rewards float32 ``(num_envs,)``, dones int64
        ``(num_envs,)`` (1 where terminated or truncated), ``extras["time_outs"]`` bool ``(num_envs,)`` (truncated
        and not terminated: PPO bootstraps these) and, when the vector env reports them (``final_obs=True``),
        ``extras["final_obs"]`` (the pre-reset observations, present in steps where some env finished).
        """
        actions = actions.reshape(self._action_shape)
        if self._clip is not None:
            actions = torch.clamp(actions.to(self.device), *self._clip)
        obs, rewards, terminated, truncated, info = self.venv.step(actions)
        dones = terminated | truncated
        self._episode_length_buf += 1
        self._episode_length_buf.masked_fill_(dones, 0)
        extras: dict[str, Any] = {"time_outs": truncated & ~terminated}
        if "final_obs" in info:
            extras["final_obs"] = self._own(info["final_obs"]).reshape(self.num_envs, -1)
        self._observations = self._wrap(obs)
        return self._observations, self._own(rewards), dones.to(torch.int64), extras

    # -- beyond rsl_rl's interface ---------------------------------------------------------------------------------

    def reset(self, seed: int | None = None) -> TensorDict:
        """Reset every env (``seed``: env ``i`` gets ``seed + i``) and return the observations."""
        obs, _ = self.venv.reset(seed=seed)
        self._episode_length_buf.zero_()
        self._observations = self._wrap(obs)
        return self._observations

    def close(self) -> None:
        self.venv.close()

    def _wrap(self, obs: torch.Tensor) -> TensorDict:
        obs = self._own(obs).reshape(self.num_envs, -1)
        return TensorDict({self.obs_group: obs}, batch_size=[self.num_envs], device=self.device)

    def _own(self, tensor: torch.Tensor) -> torch.Tensor:
        """``tensor``, cloned when the vector env hands out its reused output buffers (``copy=False``)."""
        return tensor if self.venv.copy else tensor.clone()
