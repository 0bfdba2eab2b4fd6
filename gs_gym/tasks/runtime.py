"""The one place that calls ``gs.init``: once per process, for the backend a shard asks for."""

from __future__ import annotations

import logging
import os
from pathlib import Path

_initialized_with: tuple[str, bool] | None = None
KERNEL_CACHE = Path(os.environ.get("QD_OFFLINE_CACHE_FILE_PATH", Path.home() / ".cache" / "quadrants"))
"""Where quadrants keeps the kernels Genesis compiled (a first build of a scene fills it; later builds load them)."""
GENESIS_LOGGING_LEVELS = {
    "debug": logging.DEBUG,
    "info": logging.INFO,
    "warning": logging.WARNING,
    "error": logging.ERROR,
    "critical": logging.CRITICAL,
}
"""The level names ``gs.init(logging_level=...)`` is given, and their ``logging`` numbers."""


def resolve_genesis_logging_level(level: str | int | None) -> str:
    """The level name for ``gs.init``: ``level`` by name (any case) or ``logging`` number, or when None the effective
    level of the ``gs_gym`` logger (WARNING unless the application set one). Numbers round down to a named level
    (below DEBUG: "debug")."""
    if level is None:
        level = logging.getLogger("gs_gym").getEffectiveLevel()
    if isinstance(level, str) and level.lower() in GENESIS_LOGGING_LEVELS:
        return level.lower()
    if isinstance(level, int) and not isinstance(level, bool) and level >= 0:
        reached = [name for name, number in GENESIS_LOGGING_LEVELS.items() if number <= level]  # ascending
        return reached[-1] if reached else "debug"
    raise ValueError(
        f"genesis_logging_level: expected one of {list(GENESIS_LOGGING_LEVELS)}, a logging level number or None, "
        f"got {level!r}"
    )


def init_genesis(backend: str, *, performance_mode: bool = False, logging_level: str = "warning") -> None:
    """Initialize Genesis for ``backend`` ("cpu" or "gpu") unless this process already did with the same settings
    (``logging_level`` is not one of them: the first call's level stays)."""
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

    if getattr(gs, "_initialized", False):  # by the user's own gs.init: fine when it is on the backend asked for
        if (gs.backend == gs.cpu) != (backend == "cpu"):
            raise RuntimeError(
                f"Genesis is already initialized in this process with backend {gs.backend}; cannot build a "
                f"{backend!r} shard here (use worker processes, num_workers >= 1)"
            )
        _initialized_with = wanted
        return
    gs.init(
        backend=gs.cpu if backend == "cpu" else gs.gpu,
        precision="32",
        logging_level=logging_level,
        performance_mode=performance_mode,
    )
    _initialized_with = wanted
