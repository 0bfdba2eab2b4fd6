"""What an adapter needs of the ``GenesisVectorEnv`` it wraps (output type, SAME_STEP autoreset), checked in one
place for the adapter's constructor and its ``make`` with messages that say what to do instead."""

from __future__ import annotations

import dataclasses
from typing import Any

from gymnasium.vector import AutoresetMode

from gs_gym.vector.env import GenesisVectorEnv

_MODE = AutoresetMode.SAME_STEP


@dataclasses.dataclass(frozen=True)
class AdapterRequirements:
    adapter: str
    """The adapter's class name, which starts every message."""
    output: str
    """The ``output`` the adapter needs (``"numpy"`` or ``"torch"``)."""
    output_reason: str
    """Why, e.g. "SB3 works on numpy arrays"."""
    mode_reason: str
    """Why SAME_STEP autoreset, in the library's terms."""
    maker: str = ""
    """What builds the env as the adapter needs (``"gs_gym.adapters.skrl.make_env"``); default ``<adapter>.make``."""

    @property
    def _maker(self) -> str:
        return self.maker or f"{self.adapter}.make"

    def check_venv(self, venv: Any) -> None:
        """Raise ``TypeError``/``ValueError`` unless ``venv`` is a ``GenesisVectorEnv`` built as the adapter needs."""
        instead = f"or use {self._maker}(num_envs, ...)"
        if not isinstance(venv, GenesisVectorEnv):
            raise TypeError(
                f"{self.adapter}: expected a gs_gym.GenesisVectorEnv, got {type(venv).__name__} "
                f"(pass the unwrapped vector env, {instead})"
            )
        if venv.output != self.output:
            raise ValueError(
                f"{self.adapter}: the GenesisVectorEnv must be built with output={self.output!r}, got "
                f"output={venv.output!r} ({self.output_reason}; {instead})"
            )
        if venv.autoreset_mode != _MODE:
            raise ValueError(
                f"{self.adapter}: the GenesisVectorEnv must be built with autoreset_mode=AutoresetMode.SAME_STEP, "
                f"got {venv.autoreset_mode} ({self.mode_reason}; {instead})"
            )

    def make_kwargs(self, env_kwargs: dict[str, Any]) -> dict[str, Any]:
        """``env_kwargs`` for ``make``, with ``output`` and ``autoreset_mode`` set; given ones must agree."""
        kwargs = dict(env_kwargs)
        output = kwargs.pop("output", self.output)
        if output != self.output:
            raise ValueError(f"{self._maker}: output must be {self.output!r} ({self.output_reason}), got {output!r}")
        mode = kwargs.pop("autoreset_mode", _MODE)
        if mode not in (_MODE, _MODE.value, _MODE.name, _MODE.name.lower()):
            raise ValueError(
                f"{self._maker}: autoreset_mode must be AutoresetMode.SAME_STEP ({self.mode_reason}), got {mode!r}"
            )
        return {**kwargs, "output": self.output, "autoreset_mode": _MODE}
