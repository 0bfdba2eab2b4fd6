"""``check_vector_env``: a conformance check of the Gymnasium 1.x ``VectorEnv`` contract, for any vector env.

Gymnasium's ``check_env`` covers single envs only. ``check_vector_env(env)`` drives a vector env for a short
episode-crossing rollout and raises :class:`VectorEnvCheckError` (an ``AssertionError``) naming the first thing that
does not conform::

    import gymnasium as gym
    from gs_gym.testing import check_vector_env

    check_vector_env(gym.make_vec("CartPole-v1", num_envs=4, vectorization_mode="sync"), close_must_raise=False)

It works for numpy outputs and for torch outputs (tensors on any device; the checker copies them to the host to
compare) and checks, in order:

1. ``env`` is a ``gymnasium.vector.VectorEnv`` with a positive ``num_envs``; ``observation_space`` and
   ``action_space`` are the batched (``gymnasium.vector.utils.batch_space``) ``single_*`` spaces;
   ``metadata["autoreset_mode"]`` is an ``AutoresetMode``.
2. ``reset(seed=s)`` returns ``(obs, info)`` with ``info`` a dict and ``obs`` of the observation space's shape and
   dtype, inside the space; calling it again with the same seed returns equal observations.
3. ``step`` returns ``(obs, rewards, terminated, truncated, info)``: obs as above, rewards ``(num_envs,)`` real
   numbers, terminated/truncated ``(num_envs,)`` bool, all of one array type (and device), ``info`` a dict whose
   ``_key`` masks are ``(num_envs,)`` bool.
4. The declared autoreset mode behaves as declared, after the first step where some env is done (random actions
   from ``action_space``, seeded, for up to ``max_steps`` steps):
   ``NEXT_STEP``: the next step resets those envs (a new observation), with reward 0 and neither terminated nor
   truncated;
   ``SAME_STEP``: ``info`` has ``final_obs`` with ``_final_obs`` equal to the done mask (rows of done envs inside
   the single observation space and different from the returned, reset, observations) and ``final_info`` with
   ``_final_info``; steps without a done have no ``_final_obs`` set;
   ``DISABLED``: ``reset(options={"reset_mask": done})`` (a numpy bool mask) leaves the other envs' observations
   unchanged and changes those of the reset envs, and stepping goes on.
5. (``check_close``) ``close()`` sets ``closed``, a second ``close()`` is harmless, and (``close_must_raise``)
   ``step`` and ``reset`` on the closed env raise.

The env is closed at the end unless ``check_close=False``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import numpy as np
from gymnasium import spaces
from gymnasium.vector import AutoresetMode, VectorEnv
from gymnasium.vector.utils import batch_space

__all__ = ["CheckResult", "VectorEnvCheckError", "check_vector_env"]

_ARRAY_SPACES = (spaces.Box, spaces.Discrete, spaces.MultiDiscrete, spaces.MultiBinary)


class VectorEnvCheckError(AssertionError):
    """A vector env failed a check; the message names the check (``"check_vector_env: <check>: <details>"``)."""

    def __init__(self, check: str, details: str) -> None:
        super().__init__(f"check_vector_env: {check}: {details}")
        self.check = check
        self.details = details


@dataclasses.dataclass(frozen=True)
class CheckResult:
    """What the checker saw: the array type of the outputs, steps taken and episode ends checked."""

    array_type: str
    autoreset_mode: AutoresetMode
    steps: int
    episode_ends: int


def _fail(check: str, details: str) -> VectorEnvCheckError:
    return VectorEnvCheckError(check, details)


def _torch():
    try:
        import torch
    except ImportError:  # pragma: no cover - numpy-only installs
        return None
    return torch


def _array_type(value: Any) -> str | None:
    if isinstance(value, np.ndarray):
        return "numpy"
    torch = _torch()
    if torch is not None and isinstance(value, torch.Tensor):
        return "torch"
    return None


def _host(value: Any) -> np.ndarray:
    """A host numpy copy of a numpy array or tensor (outputs may be buffers the env overwrites)."""
    if _array_type(value) == "torch":
        return value.detach().cpu().numpy().copy()
    return np.array(value, copy=True)


def _dtype(value: Any) -> np.dtype:
    if _array_type(value) == "torch":
        torch = _torch()
        return np.dtype(torch.empty(0, dtype=value.dtype).numpy().dtype)
    return value.dtype


def _device(value: Any) -> str | None:
    return str(value.device) if _array_type(value) == "torch" else None


def _check_output(check: str, value: Any, kind: str, device: str | None, shape: tuple[int, ...]) -> np.ndarray:
    """``value`` must be an array of type ``kind`` (on ``device``) and ``shape``; returns its host copy."""
    found = _array_type(value)
    if found is None:
        raise _fail(check, f"expected a {kind} array, got {type(value).__name__}")
    if found != kind:
        raise _fail(check, f"expected a {kind} array like the observations of reset(), got a {found} array")
    if _device(value) != device:
        raise _fail(check, f"expected it on device {device} like the observations of reset(), got {_device(value)}")
    if tuple(value.shape) != tuple(shape):
        raise _fail(check, f"expected shape {tuple(shape)}, got {tuple(value.shape)}")
    return _host(value)


def _check_obs(check: str, obs: Any, space: spaces.Space, kind: str, device: str | None) -> np.ndarray:
    assert space.shape is not None  # array spaces only (checked first), and those have a shape
    host = _check_output(check, obs, kind, device, space.shape)
    if _dtype(obs) != space.dtype:
        raise _fail(check, f"expected dtype {space.dtype} (the observation space's), got {_dtype(obs)}")
    if not space.contains(host):
        raise _fail(check, f"observations outside the observation space {space}: {host!r}")
    return host


def _check_info(check: str, info: Any, num_envs: int) -> None:
    if not isinstance(info, dict):
        raise _fail(check, f"expected info to be a dict, got {type(info).__name__}")
    for key, value in info.items():
        is_mask = key.startswith("_") and key[1:] in info
        if is_mask and (_array_type(value) is None or tuple(value.shape) != (num_envs,) or _dtype(value) != np.bool_):
            raise _fail(check, f"expected info[{key!r}] to be a bool mask of shape ({num_envs},), got {value!r}")
        if isinstance(value, dict):
            _check_info(f"{check} (info[{key!r}])", value, num_envs)


def _describe(space: spaces.Space) -> str:
    """A one-line description of a space (bounds only where they are all equal)."""
    text = f"{type(space).__name__}, shape {space.shape}, dtype {space.dtype}"
    if isinstance(space, spaces.Box):
        for name in ("low", "high"):
            bound = np.unique(getattr(space, name))
            text += f", {name} {bound[0]}" if bound.size == 1 else f", {name} varies"
    return text


def _envs(mask: np.ndarray) -> list[int]:
    return [int(i) for i in np.flatnonzero(mask)]


def check_vector_env(
    env: VectorEnv,
    *,
    seed: int = 0,
    max_steps: int = 1000,
    actions: Callable[[int], Any] | None = None,
    require_episode_end: bool = True,
    check_close: bool = True,
    close_must_raise: bool = True,
) -> CheckResult:
    """Check that ``env`` follows the Gymnasium 1.x vector env contract; raise :class:`VectorEnvCheckError` if not.

    Args:
        env: the vector env (or a vector wrapper) to check. It is reset and stepped, and closed at the end unless
            ``check_close`` is False.
        seed: the seed given to ``reset`` and to ``action_space``.
        max_steps: steps allowed for some env to finish an episode (its autoreset behaviour is checked then).
        actions: ``actions(step)`` returns the actions of a step (default: ``action_space.sample()``, converted to
            a tensor on the observations' device when the env returns tensors).
        require_episode_end: fail when no episode ends within ``max_steps`` (else the autoreset checks are skipped).
        check_close: close the env at the end and check ``closed`` and that a second ``close()`` does not raise.
        close_must_raise: with ``check_close``, ``step`` and ``reset`` after ``close()`` must raise (Gymnasium's own
            ``SyncVectorEnv`` does not: pass False for it).

    Returns:
        A :class:`CheckResult` summary.
    """
    # -- 1. type, spaces, metadata ---------------------------------------------------------------------------------
    if not isinstance(env, VectorEnv):
        raise _fail("type", f"expected a gymnasium.vector.VectorEnv, got {type(env).__name__}")
    num_envs = env.num_envs
    if isinstance(num_envs, bool) or not isinstance(num_envs, (int, np.integer)) or num_envs < 1:
        raise _fail("num_envs", f"expected a positive int, got {num_envs!r}")
    num_envs = int(num_envs)
    for name in ("observation", "action"):
        single, batched = getattr(env, f"single_{name}_space", None), getattr(env, f"{name}_space", None)
        if not isinstance(single, spaces.Space) or not isinstance(batched, spaces.Space):
            raise _fail(f"{name} spaces", f"expected gymnasium spaces, got {single!r} and {batched!r}")
        expected = batch_space(single, num_envs)
        if batched != expected:
            raise _fail(
                f"{name} spaces",
                f"{name}_space ({_describe(batched)}) is not the batched single_{name}_space: expected "
                f"batch_space(single_{name}_space, {num_envs}) ({_describe(expected)})",
            )
    obs_space = env.observation_space
    if not isinstance(env.single_observation_space, _ARRAY_SPACES):
        raise NotImplementedError(
            f"check_vector_env: only array observation spaces ({', '.join(s.__name__ for s in _ARRAY_SPACES)}) are "
            f"supported, got {env.single_observation_space}"
        )
    metadata = env.metadata
    if not isinstance(metadata, dict) or "autoreset_mode" not in metadata:
        raise _fail("metadata", f"expected a dict with 'autoreset_mode', got {metadata!r}")
    mode = metadata["autoreset_mode"]
    if not isinstance(mode, AutoresetMode):
        raise _fail("metadata", f"expected metadata['autoreset_mode'] to be an AutoresetMode, got {mode!r}")

    # -- 2. reset and seeding --------------------------------------------------------------------------------------
    result: object = env.reset(seed=seed)  # the env under check may return anything
    if not isinstance(result, tuple) or len(result) != 2:
        raise _fail("reset", f"expected a tuple (observations, info), got {type(result).__name__}")
    obs, info = result
    kind = _array_type(obs)
    if kind is None:
        raise _fail("reset observations", f"expected a numpy array or a torch tensor, got {type(obs).__name__}")
    device = _device(obs)
    first = _check_obs("reset observations", obs, obs_space, kind, device)
    _check_info("reset info", info, num_envs)
    again = _check_obs("reset observations", env.reset(seed=seed)[0], obs_space, kind, device)
    if not np.array_equal(first, again, equal_nan=True):
        raise _fail("seeding", f"reset(seed={seed}) twice gave different observations:\n{first}\n{again}")

    # -- 3./4. stepping and autoreset ------------------------------------------------------------------------------
    env.action_space.seed(seed)
    if actions is None:

        def actions(step: int) -> Any:
            sample = env.action_space.sample()
            if kind == "torch":
                return _torch().as_tensor(sample, device=device)
            return sample

    prev_done = np.zeros(num_envs, dtype=bool)
    prev_obs = again
    episode_ends = 0
    steps = 0
    for steps in range(1, max_steps + 1):
        check = f"step {steps}"
        result = env.step(actions(steps))
        if not isinstance(result, tuple) or len(result) != 5:
            raise _fail(check, "expected a tuple (observations, rewards, terminated, truncated, info)")
        obs, rewards, terminated, truncated, info = result
        host_obs = _check_obs(f"{check} observations", obs, obs_space, kind, device)
        host_rewards = _check_output(f"{check} rewards", rewards, kind, device, (num_envs,))
        if not (np.issubdtype(host_rewards.dtype, np.floating) or np.issubdtype(host_rewards.dtype, np.integer)):
            raise _fail(f"{check} rewards", f"expected real numbers, got dtype {host_rewards.dtype}")
        host_term = _check_output(f"{check} terminated", terminated, kind, device, (num_envs,))
        host_trunc = _check_output(f"{check} truncated", truncated, kind, device, (num_envs,))
        for name, flags in (("terminated", host_term), ("truncated", host_trunc)):
            if flags.dtype != np.bool_:
                raise _fail(f"{check} {name}", f"expected dtype bool, got {flags.dtype}")
        _check_info(f"{check} info", info, num_envs)
        done = host_term | host_trunc

        if mode == AutoresetMode.NEXT_STEP and prev_done.any():
            envs = _envs(prev_done)
            if np.any(host_rewards[prev_done] != 0):
                raise _fail(
                    "NEXT_STEP autoreset",
                    f"env(s) {envs} finished an episode at step {steps - 1}, so step {steps} must reset them with "
                    f"reward 0, got rewards {host_rewards[prev_done].tolist()}",
                )
            if np.any(done[prev_done]):
                raise _fail(
                    "NEXT_STEP autoreset",
                    f"env(s) {envs} finished an episode at step {steps - 1}, so step {steps} (their reset step) must "
                    f"be neither terminated nor truncated, got terminated={host_term[prev_done].tolist()} "
                    f"truncated={host_trunc[prev_done].tolist()}",
                )
            unchanged = [i for i in envs if np.array_equal(host_obs[i], prev_obs[i], equal_nan=True)]
            if unchanged:
                raise _fail(
                    "NEXT_STEP autoreset",
                    f"env(s) {unchanged} finished an episode at step {steps - 1}, but step {steps} returned their "
                    "final observation again instead of a reset observation",
                )
            episode_ends += 1

        if mode == AutoresetMode.SAME_STEP:
            _check_same_step(check, info, done, host_obs, env.single_observation_space, num_envs)
            if done.any():
                episode_ends += 1

        if mode == AutoresetMode.DISABLED and done.any():
            host_obs = _check_disabled_reset(check, env, done, host_obs, obs_space, kind, device)
            episode_ends += 1

        prev_done, prev_obs = done, host_obs
        if episode_ends and not prev_done.any():
            break

    if episode_ends == 0 and require_episode_end:
        raise _fail(
            "autoreset",
            f"no episode ended within max_steps={max_steps} steps, so the {mode} behaviour could not be checked "
            "(raise max_steps, shorten the episodes, or pass require_episode_end=False)",
        )

    # -- 5. close --------------------------------------------------------------------------------------------------
    if check_close:
        env.close()
        if not env.closed:
            raise _fail("close", "env.closed is False after close()")
        try:
            env.close()
        except Exception as error:
            raise _fail("close", f"a second close() raised {type(error).__name__}: {error}") from error
        if close_must_raise:
            for name, call in (("step", lambda: env.step(actions(steps + 1))), ("reset", lambda: env.reset())):
                try:
                    call()
                except Exception:  # any exception is a refusal; its type is the env's choice
                    continue
                raise _fail("use after close", f"{name}() on a closed env returned instead of raising")
    return CheckResult(kind, mode, steps, episode_ends)


def _check_same_step(
    check: str, info: dict[str, Any], done: np.ndarray, obs: np.ndarray, single: spaces.Space, num_envs: int
) -> None:
    name = "SAME_STEP autoreset"
    if not done.any():
        if "_final_obs" in info and _host(info["_final_obs"]).any():
            raise _fail(name, f"{check}: no env is done, but info['_final_obs'] is set: {_host(info['_final_obs'])}")
        return
    envs = _envs(done)
    for key in ("final_obs", "_final_obs", "final_info", "_final_info"):
        if key not in info:
            raise _fail(name, f"{check}: env(s) {envs} are done, but info has no {key!r} (keys: {sorted(info)})")
    for key in ("_final_obs", "_final_info"):
        mask = _host(info[key])
        if mask.shape != (num_envs,) or not np.array_equal(mask.astype(bool), done):
            raise _fail(name, f"{check}: info[{key!r}] must equal the done mask {done.tolist()}, got {mask.tolist()}")
    if not isinstance(info["final_info"], dict):
        raise _fail(name, f"{check}: info['final_info'] must be a dict, got {type(info['final_info']).__name__}")
    final_obs = info["final_obs"]
    for index in envs:
        row = final_obs[index]
        if row is None or _array_type(row) is None:
            raise _fail(name, f"{check}: info['final_obs'][{index}] must be the final observation, got {row!r}")
        host_row = _host(row)
        if _dtype(row) != single.dtype or not single.contains(host_row):
            raise _fail(name, f"{check}: info['final_obs'][{index}] is outside {single}: {host_row!r}")
        if np.array_equal(host_row, obs[index]):
            raise _fail(
                name,
                f"{check}: env {index} is done but its observation equals info['final_obs'][{index}]: it was not "
                "reset in the same step",
            )


def _check_disabled_reset(
    check: str, env: VectorEnv, done: np.ndarray, obs: np.ndarray, space: spaces.Space, kind: str, device: str | None
) -> np.ndarray:
    name = "DISABLED reset_mask"
    result = env.reset(options={"reset_mask": done.copy()})
    if not isinstance(result, tuple) or len(result) != 2:
        raise _fail(name, f"{check}: reset(options={{'reset_mask': ...}}) must return (observations, info)")
    reset_obs = _check_obs(f"{name} observations", result[0], space, kind, device)
    kept = ~done
    if not np.array_equal(reset_obs[kept], obs[kept], equal_nan=True):
        changed = [i for i in _envs(kept) if not np.array_equal(reset_obs[i], obs[i], equal_nan=True)]
        raise _fail(name, f"{check}: reset_mask {done.tolist()} also changed the observations of env(s) {changed}")
    unchanged = [i for i in _envs(done) if np.array_equal(reset_obs[i], obs[i], equal_nan=True)]
    if unchanged:
        raise _fail(name, f"{check}: reset_mask {done.tolist()} left the observations of env(s) {unchanged} unchanged")
    return reset_obs
