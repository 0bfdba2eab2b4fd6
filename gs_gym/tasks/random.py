"""Per-env random numbers that do not depend on how envs are split over workers.

Every env owns a 32-bit key (derived from its seed) and a 64-bit counter of draws. Element ``j`` of a draw is a hash
of (key, counter, j), so env ``i`` sees the same numbers whether it lives in-process, on worker 0 of 1 or on worker 1
of 2, and whatever other envs are drawn beside it. Draws take a boolean mask: every env gets values (so that no host
sync is needed to find the masked ones), but only the masked envs' counters advance, and the other rows must not be
used.

The hash is a 32-bit sponge whose permutation is the "lowbias32" integer mixer: absorb the seed's two 32-bit words
(done once, at seed time, giving the key), then the counter's two words, then the element index, and mix once more.

A draw has two implementations that give bit-identical numbers:

- a quadrants kernel (:mod:`gs_gym.tasks._random_kernel`), used once Genesis is initialized on the CPU or CUDA
  backend and the streams live on that backend's device: one launch per draw, counters included (from the first
  such draw on, the keys and counters live in an array of Genesis's quadrants runtime, so that quadrants can reuse
  the launch: see ``KernelDraws``);
- the torch code below (about a hundred small ops per draw), used otherwise, e.g. in unit tests without Genesis.

Identity holds because nothing depends on how a compiler rounds (quadrants compiles with fast math on): the hash is
integer arithmetic (emulated here in int64 below 2**63, native u32/i64 in the kernel), the Box-Muller logarithm and
cosine are fixed-point integer polynomials, and the few float operations left are each correctly rounded and immune
to fast-math rewriting (multiplications by powers of two, products exact in float64, one sqrt, one rounding to
float32). The exception would be float32 results below 1.2e-38 (absurd bounds or stds), which fast math may flush.
"""

from __future__ import annotations

import math
import sys
from collections.abc import Sequence
from types import ModuleType
from typing import TYPE_CHECKING

import torch

if TYPE_CHECKING:
    from gs_gym.tasks._random_kernel import KernelDraws

_MASK32 = 0xFFFFFFFF
_MIX_MUL_1 = 0x7FEB352D
_MIX_MUL_2 = 0x846CA68B
_SPONGE_IV = 0x9E3779B9

UNIT_BITS = 24
"""Uniforms are multiples of 2**-24; a normal uses two 24-bit words (radius and angle)."""

LN2_Q31 = round(math.log(2.0) * 2**31)
LOG_SERIES_Q31 = tuple(round(2**31 / (2 * k + 1)) for k in range(7, -1, -1))
"""atanh series of ln: ln f = 2 t (1 + t^2/3 + t^4/5 + ...), t = (f - 1) / (f + 1), coefficients highest first."""
COS_SERIES_Q31 = tuple(
    round((-1) ** k * (math.pi / 2) ** (2 * k) / math.factorial(2 * k) * 2**31) for k in range(7, -1, -1)
)
"""Taylor series of cos(pi/2 x) in x^2 up to x^14 (error < 1e-10 for x in [0, 1)), coefficients highest first."""


def _mul_mod32(x: torch.Tensor, c: int) -> torch.Tensor:
    """(x * c) mod 2**32 for 32-bit ``x`` and constant ``c`` without int64 overflow."""
    lo = x & 0xFFFF
    hi = x >> 16
    return (lo * c + (((hi * (c & 0xFFFF)) & 0xFFFF) << 16)) & _MASK32


def mix32(x: torch.Tensor) -> torch.Tensor:
    """The bijective 32-bit 'lowbias32' mixer on int64 tensors holding values in [0, 2**32)."""
    x = x ^ (x >> 16)
    x = _mul_mod32(x, _MIX_MUL_1)
    x = x ^ (x >> 15)
    x = _mul_mod32(x, _MIX_MUL_2)
    return x ^ (x >> 16)


def seed_keys(seeds: Sequence[int], device: torch.device | str) -> torch.Tensor:
    """The int64 keys (values in [0, 2**32)) of non-negative integer seeds, which are taken modulo 2**64.

    Seeds that differ only in their low 32 bits always get different keys (the mixer is a bijection)."""
    if any(s < 0 for s in seeds):
        raise ValueError(f"seeds must be non-negative integers, got {[s for s in seeds if s < 0][:3]}")
    folded = [int(s) % 2**64 for s in seeds]
    low = torch.tensor([s & _MASK32 for s in folded], dtype=torch.int64, device=device)
    high = torch.tensor([s >> 32 for s in folded], dtype=torch.int64, device=device)
    return mix32(mix32(low ^ _SPONGE_IV) ^ high)


def reference_words(state: torch.Tensor, count: int) -> torch.Tensor:
    """``(num_envs, count)`` hash words (int64 in [0, 2**32)) of each env's current (key, counter)."""
    key, counter = state[:, 0:1], state[:, 1:2]
    stream = mix32(mix32(key ^ (counter & _MASK32)) ^ (counter >> 32))
    element = torch.arange(count, dtype=torch.int64, device=state.device)
    return mix32(mix32(stream ^ element))


def reference_uniform(state: torch.Tensor, low: torch.Tensor, high: torch.Tensor) -> torch.Tensor:
    """``(num_envs, count)`` uniforms in ``[low, high)`` from flat float32 bounds of ``count`` elements.

    ``low + (high - low) * unit`` is evaluated in float64, where the product is exact (24-bit by 24-bit), so that
    its only roundings are the sum's and the final one to float32. A value that rounds up to ``high`` (possible only
    when ``high - low`` is a few ulps of ``low``) is replaced by ``low``."""
    unit = (reference_words(state, low.numel()) >> (32 - UNIT_BITS)).double() * 2.0**-UNIT_BITS
    values = (low.double() + (high - low).double() * unit).float()
    return torch.where(values == high, low, values)


def neg_log_unit_q31(bits: torch.Tensor) -> torch.Tensor:
    """``-ln u`` times 2**31 (int64, absolute error about 1e-9) for ``u = (bits + 1) / 2**24``, 24-bit ``bits``.

    ``-ln u = (24 - e) ln 2 - ln f`` where ``bits + 1 = f * 2**e``, ``f`` in [1, 2) (``e`` is read off the exact
    float32 exponent), and ``ln f`` is the atanh series in fixed point."""
    m = bits + 1
    e = ((m.to(torch.float32).view(torch.int32) >> 23) - 127).long()
    f_q24 = m << (24 - e)
    t_q31 = ((f_q24 - 2**24) << 31) // (f_q24 + 2**24)
    t2_q31 = (t_q31 * t_q31) >> 31
    series = torch.full_like(t_q31, LOG_SERIES_Q31[0])
    for c in LOG_SERIES_Q31[1:]:
        series = c + ((series * t2_q31) >> 31)
    return (24 - e) * LN2_Q31 - ((t_q31 * series) >> 30)


def cos_quarter_q31(bits: torch.Tensor) -> torch.Tensor:
    """``cos(pi/2 * x)`` times 2**31 (int64, absolute error about 1e-9) for ``x = bits / 2**23``, 23-bit ``bits``."""
    x2_q31 = (bits * bits) >> 15
    cos_q31 = torch.full_like(x2_q31, COS_SERIES_Q31[0])
    for c in COS_SERIES_Q31[1:]:
        cos_q31 = c + ((cos_q31 * x2_q31) >> 31)
    return cos_q31


def reference_normal(state: torch.Tensor, std: torch.Tensor) -> torch.Tensor:
    """``(num_envs, count)`` Gaussian samples times flat float32 ``std`` of ``count`` elements.

    Box-Muller on two 24-bit words ``a`` and ``b``: ``sqrt(-2 ln u) * cos(theta)`` with ``u = (a + 1) / 2**24``
    and ``cos(theta)`` taken as ``+-cos(phi)``, the sign from the top bit of ``b`` and ``phi`` uniform in
    ``[0, pi/2)`` from its other 23 bits (the same distribution as a full-circle angle). The fixed-point ``-ln u``
    makes the radius accurate to about 1e-8 / radius; |z| <= sqrt(48 ln 2) = 5.77."""
    count = std.numel()
    words = reference_words(state, 2 * count).view(-1, count, 2) >> (32 - UNIT_BITS)
    radius_bits, angle_bits = words[..., 0], words[..., 1]
    # radius = sqrt(2 * (-ln u)) = sqrt(neg_log_unit_q31 / 2**30)
    radius = torch.sqrt(neg_log_unit_q31(radius_bits).double() * 2.0**-30)
    z = radius * (cos_quarter_q31(angle_bits & 0x7FFFFF).double() * 2.0**-31)
    z = torch.where((angle_bits >> 23) == 1, -z, z)
    return z.float() * std


def _flat_float32(value: float | torch.Tensor, shape: Sequence[int], device: torch.device) -> torch.Tensor:
    """``value`` broadcast to ``shape`` as a contiguous flat float32 tensor on ``device`` (a view when it already is
    one; otherwise a conversion or copy, which costs kernel launches)."""
    tensor = torch.as_tensor(value, dtype=torch.float32, device=device)
    return tensor.expand(tuple(shape)).reshape(-1).contiguous()


_kernel_module: ModuleType | None = None


def _kernels_for(device: torch.device) -> ModuleType | None:
    """The quadrants kernels when Genesis is initialized on the CPU or CUDA backend of ``device``, else None.

    Checked at every draw until one uses the kernels (a few attribute reads): Genesis may be initialized after the
    streams were made, and calling a quadrants kernel while it is not initialized would initialize quadrants by
    itself."""
    global _kernel_module
    gs = sys.modules.get("genesis")
    if gs is None or not getattr(gs, "_initialized", False):
        return None
    if gs.backend == gs.cpu:
        usable = device.type == "cpu"
    elif gs.backend == gs.cuda:
        usable = device == gs.device
    else:  # Metal has no float64; the AMD GPU backend is untested
        usable = False
    if not usable:
        return None
    if _kernel_module is None:
        from gs_gym.tasks import _random_kernel

        _kernel_module = _random_kernel
    return _kernel_module


class EnvRandom:
    """Counter-based random streams, one per env of a shard.

    ``global_offset`` is the global index of the shard's first env; it only matters for :meth:`seed_range`,
    which gives env ``g`` (global index) the seed ``base_seed + g``. A draw is a single quadrants kernel launch when
    Genesis is initialized on this device's backend (see the module docstring), torch ops otherwise; both give the
    same bits. After a kernel draw the streams live in Genesis's memory: an ``EnvRandom`` does not outlive the
    Genesis runtime it drew with (its methods then raise ``RuntimeError``).
    """

    use_kernel: bool = True
    """Set False (on an instance) to always use the torch implementation, e.g. to compare the two."""

    def __init__(self, num_envs: int, global_offset: int, device: torch.device | str) -> None:
        self.num_envs = num_envs
        self.global_offset = global_offset
        self._state = torch.zeros(num_envs, 2, dtype=torch.int64, device=device)
        """Row ``i``: env ``i``'s key and counter (one tensor, so that a kernel launch takes one argument less)."""
        self.device = self._state.device
        self._serial = self.device.type == "cpu"
        """Whether the kernels run their loop over envs on the calling thread (see :mod:`._random_kernel`)."""
        self._draws: KernelDraws | None = None
        """The ``KernelDraws`` once a draw used the kernels (``_state`` is then its state's torch view)."""

    def __deepcopy__(self, memo: dict[int, object]) -> EnvRandom:
        """An independent ``EnvRandom`` with the same streams, its state in torch memory until it draws."""
        self._check_alive()
        copied = EnvRandom(self.num_envs, self.global_offset, self.device)
        copied._state.copy_(self._state)
        copied.use_kernel = self.use_kernel
        return copied

    def seed_range(self, base_seed: int) -> None:
        """Seed every env with ``base_seed + global index`` and restart every stream."""
        self._check_alive()
        first = base_seed + self.global_offset
        self._state[:, 0] = seed_keys(range(first, first + self.num_envs), self.device)
        self._state[:, 1] = 0

    def seed(self, seeds: Sequence[int | None]) -> None:
        """Re-seed local env ``i`` with ``seeds[i]`` and restart its stream; None leaves env ``i`` as it is."""
        if len(seeds) != self.num_envs:
            raise ValueError(f"seeds: expected {self.num_envs} entries (one per env), got {len(seeds)}")
        self._check_alive()
        chosen = [i for i, s in enumerate(seeds) if s is not None]
        if chosen:
            rows = torch.tensor(chosen, dtype=torch.int64, device=self.device)
            self._state[rows, 0] = seed_keys([s for s in seeds if s is not None], self.device)
            self._state[rows, 1] = 0

    def uniform(
        self,
        mask: torch.Tensor,
        shape: Sequence[int],
        low: float | torch.Tensor = 0.0,
        high: float | torch.Tensor = 1.0,
    ) -> torch.Tensor:
        """Uniform float32 samples of shape ``(num_envs, *shape)`` in ``[low, high)``, multiples of 2**-24 of the
        width: one draw for each env where the bool ``mask`` is True (their counters advance); the other rows are not
        random numbers to use. ``low`` and ``high`` are rounded to float32 first; with the kernels they are copied to
        the device only when they changed since the last draw of this shape (a tensor changed in place counts)."""
        mask = self._checked_mask(mask)
        draws = self._kernel_draws(shape)
        if draws is not None:
            out = draws.uniform(mask, shape, low, high)
        else:
            low, high = (_flat_float32(v, shape, self.device) for v in (low, high))
            out = reference_uniform(self._state, low, high)
            self._state[:, 1] += mask
        return out.view(self.num_envs, *shape)

    def normal(self, mask: torch.Tensor, shape: Sequence[int], std: float | torch.Tensor = 1.0) -> torch.Tensor:
        """Gaussian float32 samples of shape ``(num_envs, *shape)``, zero mean and standard deviation ``std`` (a float
        or a tensor broadcastable to ``shape``), one draw for each env where ``mask`` is True (see :meth:`uniform`)."""
        mask = self._checked_mask(mask)
        draws = self._kernel_draws(shape)
        if draws is not None:
            out = draws.normal(mask, shape, std)
        else:
            out = reference_normal(self._state, _flat_float32(std, shape, self.device))
            self._state[:, 1] += mask
        return out.view(self.num_envs, *shape)

    def _kernel_draws(self, shape: Sequence[int]) -> KernelDraws | None:
        """The ``KernelDraws`` to draw with (made at the first draw that can use the kernels), or None for torch."""
        self._check_alive()
        if not self.use_kernel or math.prod(shape) == 0:
            return None
        if self._draws is None:
            kernels = _kernels_for(self.device)
            if kernels is None:
                return None
            self._draws = kernels.KernelDraws(self._state, self._serial)
            self._state = self._draws.state
        return self._draws

    def _check_alive(self) -> None:
        if self._draws is not None:
            self._draws.check_alive()

    def _checked_mask(self, mask: torch.Tensor) -> torch.Tensor:
        if mask.dtype != torch.bool or tuple(mask.shape) != (self.num_envs,):
            raise ValueError(
                f"mask: expected a bool tensor of shape ({self.num_envs},), got {mask.dtype} of shape "
                f"{tuple(mask.shape)}"
            )
        return mask.to(self.device).contiguous()
