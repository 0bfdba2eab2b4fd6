"""The one place that calls ``gs.init``: once per process, for the backend a shard asks for."""

from __future__ import annotations

import os

_initialized_with: tuple[str, bool] | None = None


def init_genesis(backend: str, *, performance_mode: bool = False, logging_level: str = "warning") -> None:
    """Initialize Genesis for ``backend`` ("cpu" or "gpu") unless this process already did with the same settings."""
    global _initialized_with
    wanted = (backend, performance_mode)
    if _initialized_with is not None:
        if _initialized_with != wanted:
            raise RuntimeError(
                f"Genesis is already initialized in this process with backend={_initialized_with[0]!r}, "
                f"performance_mode={_initialized_with[1]}; cannot switch to backend={backend!r}, "
                f"performance_mode={performance_mode} (use worker processes, num_workers >= 1)"
            )
        return
    if "DISPLAY" not in os.environ:
        os.environ.setdefault("PYGLET_HEADLESS", "1")
    import genesis as gs

    gs.init(
        backend=gs.cpu if backend == "cpu" else gs.gpu,
        precision="32",
        logging_level=logging_level,
        performance_mode=performance_mode,
    )
    _initialized_with = wanted
