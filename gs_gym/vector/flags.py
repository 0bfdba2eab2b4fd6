"""The step flags: two numbers a step computes on its device and the host reads, with the wait as late as the
caller can afford, in one copy per step.

``values[ALL_FINITE]`` is the sum of every value the checks that are on cover: finite unless one of them is NaN or
inf (or finite values overflow float32, which ``EnvShard.check_step`` then clears), 0 with the checks off.
``values[ANY_DONE]`` is the number of envs that finished in the step. Both are float32, so that each is written by
the reduction itself (``out=``) and the host tells finite from not: no comparison kernels.

``start()`` queues the copy of both into host memory (``ShardBuffers.step_flags``, page-locked with CUDA buffers)
and records an event: no wait. ``any_done()`` waits for that copy only (not for work queued after it), so the host
work between ``start`` and it overlaps the GPU catching up with the step; ``poll_any_done(default)`` never waits:
the flag when its copy has landed, else ``default``. On the CPU backend the device values are the host memory
itself: nothing is copied and nothing waits.
"""

from __future__ import annotations

import torch

from gs_gym.transport.buffers import ALL_FINITE, ANY_DONE


class StepFlagValues:
    """A shard's step flags: ``values`` on its device, copied to ``host`` (see the module docstring)."""

    def __init__(self, host: torch.Tensor, device: torch.device) -> None:
        """``host``: float32 ``(2,)``, the buffer the parent reads; its values at construction are the flags before
        any step."""
        self.host = host
        self.values = host if host.device == device else host.to(device)
        self._checked_sum, self._done_count = self.values[ALL_FINITE], self.values[ANY_DONE]  # views, made once
        self._host_done_count = host[ANY_DONE]
        self.landed = torch.cuda.Event() if self.values is not host and device.type == "cuda" else None
        """Recorded after each copy ``start`` queues; None where nothing is copied."""
        self._queued = False

    def count_done(self, done: torch.Tensor) -> None:
        """Write the number of True values of the bool ``(num_envs,)`` ``done`` at ``ANY_DONE``: one kernel."""
        torch.sum(done, 0, dtype=torch.float32, out=self._done_count)

    def sum_checked(self, values: torch.Tensor) -> None:
        """Write the sum of the flat float32 ``values`` at ``ALL_FINITE``: one kernel."""
        torch.sum(values, 0, out=self._checked_sum)

    def start(self) -> None:
        """Queue the copy of ``values`` to ``host`` (a copy into unpinned host memory waits for it)."""
        if self.values is self.host:
            return
        self.host.copy_(self.values, non_blocking=True)
        if self.landed is not None:
            self.landed.record()
        self._queued = True

    def any_done(self) -> bool:
        """Whether some env finished in the step last started, waiting for its copy if need be."""
        if self._queued and self.landed is not None:
            self.landed.synchronize()
        self._queued = False
        return bool(self._host_done_count)

    def poll_any_done(self, default: bool) -> bool:
        """``any_done()`` if its copy has landed (never waits), else ``default``."""
        if self._queued and self.landed is not None and not self.landed.query():
            return default
        self._queued = False
        return bool(self._host_done_count)
