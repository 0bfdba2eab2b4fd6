"""Checks on user input, done in the parent before anything is sent, so a rejected call changes nothing.

Action values are the exception: whether they are finite is known only on their device, so the shards flag it
during the step and ``step_wait`` reads the flag with the step's one wait (``ShardSpec.check_actions``)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import torch

Seeds = int | list[int | None] | None


def as_action_tensor(actions: Any, expected_shape: tuple[int, ...], name: str = "actions") -> torch.Tensor:
    """Return ``actions`` as a float32 tensor (on its own device) after checking type, shape and dtype; errors call
    it ``name``. Values are not looked at here (that would wait for the device): NaN and inf are the shards'
    ``check_actions``."""
    if isinstance(actions, (list, tuple)):
        actions = _list_as_array(actions, name, "a rectangular nested list of numbers")
    if isinstance(actions, np.ndarray):
        return _numpy_actions(actions, expected_shape, name)
    if not isinstance(actions, torch.Tensor):
        raise TypeError(f"{name}: expected a torch.Tensor or numpy.ndarray, got {type(actions).__name__}")
    if missing := _missing_data(actions):
        raise ValueError(f"{name}: expected a dense tensor with data, got {missing}")
    if actions.dtype == torch.bool or actions.is_complex():
        raise ValueError(f"{name}: expected a real-valued tensor, got dtype {actions.dtype}")
    _check_shape(name, tuple(actions.shape), expected_shape)
    if actions.requires_grad:  # the env's buffers never join the caller's graph
        actions = actions.detach()
    return actions if actions.dtype == torch.float32 else actions.to(torch.float32)


def _numpy_actions(actions: np.ndarray, expected_shape: tuple[int, ...], name: str) -> torch.Tensor:
    # kinds f/i/u of at most 8 bytes: what torch converts (numpy also calls timedelta64 an integer, and
    # longdouble a float, which torch cannot take)
    if actions.dtype.kind not in "fiu" or actions.dtype.itemsize > 8:
        raise ValueError(f"{name}: expected a real-valued array, got dtype {actions.dtype}")
    _check_shape(name, actions.shape, expected_shape)  # before the copy below, which makes a 0-d array 1-d
    return torch.from_numpy(np.ascontiguousarray(actions)).to(torch.float32)


def _list_as_array(values: list[Any] | tuple[Any, ...], name: str, expected: str) -> np.ndarray:
    """``np.asarray(values)``, numpy's refusal (ragged nesting, entries it cannot hold in one array) named."""
    try:
        return np.asarray(values)
    except (ValueError, TypeError) as error:
        raise ValueError(f"{name}: expected {expected}, got one numpy refuses ({error})") from error


def _missing_data(tensor: torch.Tensor) -> str | None:
    """What keeps ``tensor`` from being read as dense values (a meta or sparse tensor), or None."""
    if tensor.is_meta:
        return "a meta tensor (no data)"
    if tensor.layout != torch.strided:
        return f"layout {tensor.layout}"
    return None


def _check_shape(name: str, shape: tuple[int, ...], expected_shape: tuple[int, ...]) -> None:
    if shape != expected_shape:
        raise ValueError(f"{name}: expected shape {expected_shape}, got {shape}")


def non_finite_actions_error(envs: Sequence[int]) -> ValueError:
    """What ``step_wait`` raises when the shards report non-finite actions for ``envs`` (global indices)."""
    more = f" and {len(envs) - 10} more" if len(envs) > 10 else ""
    return ValueError(
        f"actions: expected finite values, got NaN or inf for env(s) {list(envs[:10])}{more} "
        "(the step ran with them as 0)"
    )


def check_seed(seed: Any, num_envs: int) -> Seeds:
    """Accept None, a non-negative int, or a list of ``num_envs`` non-negative ints / None."""
    if seed is None:
        return None
    if isinstance(seed, (int, np.integer)) and not isinstance(seed, bool):
        if seed < 0:
            raise ValueError(f"seed: expected a non-negative int, got {seed}")
        return int(seed)
    if isinstance(seed, Sequence) and not isinstance(seed, str):
        if len(seed) != num_envs:
            raise ValueError(f"seed: expected a list of num_envs={num_envs} seeds, got length {len(seed)}")
        checked: list[int | None] = []
        for value in seed:
            if value is not None and (isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 0):
                raise ValueError(f"seed: expected non-negative ints or None in the list, got {value!r}")
            checked.append(None if value is None else int(value))
        return checked
    raise TypeError(f"seed: expected None, an int or a list of ints, got {type(seed).__name__}")


def check_reset_mask(options: dict[str, Any] | None, num_envs: int) -> np.ndarray | None:
    """The ``reset_mask`` of ``options`` as a host bool array, or None when absent; other keys are refused."""
    if options is None:
        return None
    if not isinstance(options, dict):
        raise TypeError(f"options: expected a dict or None, got {type(options).__name__}")
    unknown = sorted(set(options) - {"reset_mask"}, key=repr)  # keys of any types, ordered alike every time
    if unknown:
        raise ValueError(f"options: unknown key(s) {unknown}; expected only 'reset_mask'")
    if "reset_mask" not in options:
        return None
    mask = options["reset_mask"]
    if isinstance(mask, torch.Tensor):
        if missing := _missing_data(mask):
            raise TypeError(f"options['reset_mask']: expected a dense bool tensor with data, got {missing}")
        if mask.dtype != torch.bool:
            raise TypeError(f"options['reset_mask']: expected dtype torch.bool, got {mask.dtype}")
        mask = mask.detach().cpu().numpy()
    elif isinstance(mask, np.ndarray):
        if mask.dtype != np.bool_:
            raise TypeError(f"options['reset_mask']: expected dtype bool, got {mask.dtype}")
    else:
        raise TypeError(f"options['reset_mask']: expected a numpy or torch bool array, got {type(mask).__name__}")
    if mask.shape != (num_envs,):
        raise ValueError(f"options['reset_mask']: expected shape ({num_envs},), got {mask.shape}")
    if not mask.any():
        raise ValueError("options['reset_mask']: expected at least one True entry, got none")
    return mask.copy()


_INTEGER_TENSOR_DTYPES = (
    torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64, torch.uint16, torch.uint32, torch.uint64,
)  # fmt: skip


def check_episode_steps(steps: Any, num_envs: int, max_episode_steps: int) -> np.ndarray:
    """``steps`` as a host int64 array of ``num_envs`` episode step counters in ``[0, max_episode_steps)``.

    Accepts a torch tensor (any device; copied to the host), a numpy array, or a list/tuple of ints; the dtype must
    be an integer one (not bool). Raises ``TypeError`` for the type or dtype and ``ValueError`` for the shape or
    for values out of range (naming up to 10 envs, global indices)."""
    if isinstance(steps, (list, tuple)):
        if any(isinstance(value, (bool, np.bool_)) for value in steps):
            raise TypeError("steps: expected ints, got a bool in the list")
        steps = _list_as_array(steps, "steps", f"a flat list of num_envs={num_envs} ints")
    if isinstance(steps, torch.Tensor):
        if missing := _missing_data(steps):
            raise TypeError(f"steps: expected a dense integer tensor with data, got {missing}")
        integral = steps.dtype in _INTEGER_TENSOR_DTYPES
    elif isinstance(steps, np.ndarray):
        integral = steps.dtype.kind in "iu"  # not bool ("b") nor timedelta64 ("m")
    else:
        raise TypeError(f"steps: expected a torch.Tensor, numpy.ndarray or list of ints, got {type(steps).__name__}")
    _check_shape("steps", tuple(steps.shape), (num_envs,))
    if not integral:
        raise TypeError(f"steps: expected an integer dtype, got {steps.dtype}")
    values = steps.detach().cpu().numpy() if isinstance(steps, torch.Tensor) else steps
    bad = np.flatnonzero((values < 0) | (values >= max_episode_steps))
    if bad.size:
        shown = ", ".join(f"env {env}: {values[env]}" for env in bad[:10].tolist())
        more = f" and {bad.size - 10} more" if bad.size > 10 else ""
        raise ValueError(f"steps: expected values in [0, max_episode_steps={max_episode_steps}), got {shown}{more}")
    return values.astype(np.int64)
