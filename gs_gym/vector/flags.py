"""A bool computed on the device and read on the host, with the wait as late as the caller can afford.

``start(flag)`` queues the flag's copy into pinned host memory and records an event: no wait. ``read()`` waits for
that copy only (not for work queued after it), so the host work between ``start`` and ``read`` overlaps the GPU
catching up with the step. ``poll(default)`` never waits: the flag when its copy has landed, else ``default``. On the
CPU the copy is the computation's end, and both return at once.
"""

from __future__ import annotations

import torch


class HostFlag:
    """One device bool, read on the host (see the module docstring). Starts out as ``initial`` with nothing queued."""

    def __init__(self, device: torch.device, initial: bool) -> None:
        self._cuda = device.type == "cuda"
        self._host = torch.full((), initial, dtype=torch.bool, pin_memory=self._cuda)
        self._event = torch.cuda.Event() if self._cuda else None
        self._queued = False

    def start(self, flag: torch.Tensor) -> None:
        """Queue the copy of the 0-d bool tensor ``flag`` (on the device) to the host."""
        self._host.copy_(flag, non_blocking=self._cuda)
        if self._event is not None:
            self._event.record()
        self._queued = True

    def read(self) -> bool:
        """The flag last started, waiting for its copy if need be."""
        if self._queued and self._event is not None:
            self._event.synchronize()
        self._queued = False
        return bool(self._host)

    def poll(self, default: bool) -> bool:
        """The flag last started if its copy has landed (never waits), else ``default``."""
        if self._queued and self._event is not None and not self._event.query():
            return default
        self._queued = False
        return bool(self._host)
