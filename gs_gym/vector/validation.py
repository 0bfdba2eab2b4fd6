"""Checks on user input, done in the parent before anything is sent, so a rejected call changes nothing.

Action values are the exception: whether they are finite is known only on their device, so the shards check it
with the step's one wait (``ShardSpec.check_actions``)."""

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
        actions = np.asarray(actions)
    if isinstance(actions, np.ndarray):
        if not (np.issubdtype(actions.dtype, np.floating) or np.issubdtype(actions.dtype, np.integer)):
            raise ValueError(f"{name}: expected a real-valued array, got dtype {actions.dtype}")
        actions = torch.from_numpy(np.ascontiguousarray(actions))
    elif not isinstance(actions, torch.Tensor):
        raise TypeError(f"{name}: expected a torch.Tensor or numpy.ndarray, got {type(actions).__name__}")
    if actions.dtype == torch.bool or actions.is_complex():
        raise ValueError(f"{name}: expected a real-valued tensor, got dtype {actions.dtype}")
    if tuple(actions.shape) != expected_shape:
        raise ValueError(f"{name}: expected shape {expected_shape}, got {tuple(actions.shape)}")
    return actions.detach().to(torch.float32)


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
    unknown = sorted(set(options) - {"reset_mask"})
    if unknown:
        raise ValueError(f"options: unknown key(s) {unknown}; expected only 'reset_mask'")
    if "reset_mask" not in options:
        return None
    mask = options["reset_mask"]
    if isinstance(mask, torch.Tensor):
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
