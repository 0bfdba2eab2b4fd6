"""Shared fixtures. Env builds cost seconds (kernel cache warm) to minutes (cold), so envs are built once per
session and keyed by their settings; tests start with ``reset(seed=...)`` and never close a shared env."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest

from gs_gym import GenesisVectorEnv

NUM_ENVS = 7  # odd, so that two workers get an uneven split (4 + 3)
MAX_EPISODE_STEPS = 8
TASK_KWARGS = {"max_episode_steps": MAX_EPISODE_STEPS}


@pytest.fixture(scope="session")
def shared_env() -> Iterator[Callable[..., GenesisVectorEnv]]:
    """``shared_env(num_workers, autoreset_mode)``: a cartpole env on the CPU backend, built once per session."""
    built: dict[tuple[int, str], GenesisVectorEnv] = {}

    def get(num_workers: int, autoreset_mode: str = "next_step") -> GenesisVectorEnv:
        key = (num_workers, autoreset_mode)
        if key not in built:
            built[key] = GenesisVectorEnv(
                NUM_ENVS,
                "cartpole",
                backend="cpu",
                num_workers=num_workers,
                seed=0,
                autoreset_mode=autoreset_mode,
                task_kwargs=TASK_KWARGS,
            )
        return built[key]

    yield get
    for env in built.values():
        env.close()
