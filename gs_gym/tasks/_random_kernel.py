"""Quadrants kernels for :class:`gs_gym.tasks.random.EnvRandom`: one launch per draw, counters included, with
arguments that quadrants can cache (:class:`KernelDraws`).

Each is the torch code of :mod:`gs_gym.tasks.random` transcribed operation for operation (same integers, same float
roundings), so that the two give bit-identical numbers; see that module for why this holds. Import this module only
once Genesis is initialized: it imports quadrants, whose kernels compile for the backend Genesis chose (on the first
launch; quadrants' offline cache keeps them for later processes).

Every kernel has one top-level loop, over envs, so it is one GPU kernel: an env's thread computes all its elements,
then advances its own counter when its mask is set, so no other thread reads a counter while it changes. The loop's
bound is a compile-time ``num_envs`` (a kernel is compiled once per shard size): a bound known only at run time,
even an argument or an array's shape, makes quadrants launch a second, serial GPU kernel before the loop to compute
it. Quadrants also copies its launch arguments to the GPU before each launch (one host-to-device copy).

Arguments: ``state`` is the ``(num_envs, 2)`` int64 array of keys and counters, ``mask`` the ``(num_envs,)`` bool
array, ``out`` a ``(num_envs, count)`` float32 array to fill; bounds and stds are flat float32 arrays of ``count``
elements. ``num_envs`` is ``state.shape[0]``. ``serial`` (compile-time) runs the loop on the calling thread: pass
True on the CPU backend, where handing a parallel loop to quadrants' thread pool costs about 70 us per launch (more
than the draw itself), False on a GPU.
"""

import math
import sys
from collections.abc import Sequence

import quadrants as qd
import torch
from quadrants.lang import impl

from gs_gym.tasks.random import (
    _MIX_MUL_1,
    _MIX_MUL_2,
    COS_SERIES_Q31,
    LN2_Q31,
    LOG_SERIES_Q31,
    UNIT_BITS,
    _flat_float32,
)


@qd.func
def _mix32(x: qd.u32) -> qd.u32:
    x ^= x >> 16
    x *= qd.u32(_MIX_MUL_1)
    x ^= x >> 15
    x *= qd.u32(_MIX_MUL_2)
    x ^= x >> 16
    return x


@qd.func
def _stream(key: qd.i64, counter: qd.i64) -> qd.u32:
    return _mix32(_mix32(qd.cast(key, qd.u32) ^ qd.cast(counter, qd.u32)) ^ qd.cast(counter >> 32, qd.u32))


@qd.func
def _word(stream: qd.u32, element: qd.i32) -> qd.i64:
    """The hash word of ``element`` as a ``UNIT_BITS``-bit integer."""
    return qd.cast(_mix32(_mix32(stream ^ qd.cast(element, qd.u32))) >> (32 - UNIT_BITS), qd.i64)


@qd.func
def _uniform(word: qd.i64, low: qd.f32, high: qd.f32) -> qd.f32:
    unit = qd.cast(word, qd.f64) * qd.f64(2.0**-UNIT_BITS)
    value = qd.cast(qd.cast(low, qd.f64) + qd.cast(high - low, qd.f64) * unit, qd.f32)
    if value == high:
        value = low
    return value


@qd.func
def _gaussian(radius_bits: qd.i64, angle_bits: qd.i64) -> qd.f32:
    """``reference_normal`` for one element, before the std: ``neg_log_unit_q31``, ``cos_quarter_q31``, then floats."""
    m = radius_bits + 1
    e = (qd.bit_cast(qd.cast(m, qd.f32), qd.i32) >> 23) - 127
    f_q24 = m << qd.cast(24 - e, qd.i64)
    t_q31 = ((f_q24 - qd.i64(2**24)) << qd.i64(31)) // (f_q24 + qd.i64(2**24))
    t2_q31 = (t_q31 * t_q31) >> qd.i64(31)
    series = qd.i64(LOG_SERIES_Q31[0])
    for c in qd.static(LOG_SERIES_Q31[1:]):
        series = qd.i64(c) + ((series * t2_q31) >> qd.i64(31))
    neg_log_u_q31 = qd.cast(24 - e, qd.i64) * qd.i64(LN2_Q31) - ((t_q31 * series) >> qd.i64(30))

    x = angle_bits & qd.i64(0x7FFFFF)
    x2_q31 = (x * x) >> qd.i64(15)
    cos_q31 = qd.i64(COS_SERIES_Q31[0])
    for c in qd.static(COS_SERIES_Q31[1:]):
        cos_q31 = qd.i64(c) + ((cos_q31 * x2_q31) >> qd.i64(31))

    radius = qd.sqrt(qd.cast(neg_log_u_q31, qd.f64) * qd.f64(2.0**-30))
    z = radius * (qd.cast(cos_q31, qd.f64) * qd.f64(2.0**-31))
    if (angle_bits >> qd.i64(23)) == 1:
        z = -z
    return qd.cast(z, qd.f32)


@qd.kernel
def uniform_array_bounds(
    state: qd.types.ndarray(),
    mask: qd.types.ndarray(),
    out: qd.types.ndarray(),
    low: qd.types.ndarray(),
    high: qd.types.ndarray(),
    num_envs: qd.template(),
    serial: qd.template(),
):
    qd.loop_config(serialize=serial)
    for i in range(num_envs):
        stream = _stream(state[i, 0], state[i, 1])
        for j in range(out.shape[1]):
            out[i, j] = _uniform(_word(stream, j), low[j], high[j])
        if mask[i]:
            state[i, 1] = state[i, 1] + 1  # a plain store: no other thread touches row i


@qd.kernel
def normal_array_std(
    state: qd.types.ndarray(),
    mask: qd.types.ndarray(),
    out: qd.types.ndarray(),
    std: qd.types.ndarray(),
    num_envs: qd.template(),
    serial: qd.template(),
):
    qd.loop_config(serialize=serial)
    for i in range(num_envs):
        stream = _stream(state[i, 0], state[i, 1])
        for j in range(out.shape[1]):
            out[i, j] = _gaussian(_word(stream, 2 * j), _word(stream, 2 * j + 1)) * std[j]
        if mask[i]:
            state[i, 1] = state[i, 1] + 1  # a plain store: no other thread touches row i


class KernelDraws:
    """One ``EnvRandom``'s draws through the kernels above, every launch argument an array that quadrants owns.

    Quadrants reuses a kernel's launch context when it is called with the same argument objects, but not when one
    of them is a torch tensor or a float: those are converted again on every launch, about 100 us of Python (more
    than a draw's GPU time at 4096 envs). So the keys and counters live in a quadrants ndarray whose zero-copy torch
    view is the ``EnvRandom``'s state (``state``), and a draw copies its mask into a mask array of its own, its
    bounds or stds into arrays kept per size (only when they changed: a float by value, a tensor by identity and
    version), launches with the same objects every time (about 10 us), and clones the output. On a GPU a draw is
    then one quadrants launch and two to four torch kernels.

    The arrays belong to Genesis's quadrants runtime: once Genesis is destroyed they are gone, and ``state`` with
    them (``check_alive``).
    """

    def __init__(self, state: torch.Tensor, serial: bool) -> None:
        self.num_envs = state.shape[0]
        self.serial = serial
        self._program = impl.get_runtime().prog
        self._state, self.state = _array(qd.i64, (self.num_envs, 2))
        self.state.copy_(state)
        self._mask, self._mask_view = _array(qd.u1, (self.num_envs,))
        self._outputs: dict[int, tuple[qd.Ndarray, torch.Tensor]] = {}
        self._parameters: dict[tuple[str, tuple[int, ...]], _Parameter] = {}

    def check_alive(self) -> None:
        """Raise ``RuntimeError`` unless the quadrants runtime that holds the arrays is still the current one."""
        gs = sys.modules.get("genesis")
        if not getattr(gs, "_initialized", False) or impl.get_runtime().prog is not self._program:
            raise RuntimeError(
                "EnvRandom: its streams lived in the memory of a Genesis runtime that has since been destroyed; "
                "make a new EnvRandom (and a new task) after gs.init"
            )

    def uniform(
        self, mask: torch.Tensor, shape: Sequence[int], low: float | torch.Tensor, high: float | torch.Tensor
    ) -> torch.Tensor:
        """``(num_envs, prod(shape))`` uniforms in ``[low, high)`` (bounds broadcast to ``shape``)."""
        out, view = self._output(math.prod(shape))
        low_array, high_array = self._parameter("low", shape, low), self._parameter("high", shape, high)
        self._mask_view.copy_(mask)
        uniform_array_bounds(self._state, self._mask, out, low_array, high_array, self.num_envs, self.serial)
        return view.clone()

    def normal(self, mask: torch.Tensor, shape: Sequence[int], std: float | torch.Tensor) -> torch.Tensor:
        """``(num_envs, prod(shape))`` Gaussians times ``std`` (broadcast to ``shape``)."""
        out, view = self._output(math.prod(shape))
        std_array = self._parameter("std", shape, std)
        self._mask_view.copy_(mask)
        normal_array_std(self._state, self._mask, out, std_array, self.num_envs, self.serial)
        return view.clone()

    def _output(self, count: int) -> tuple[qd.Ndarray, torch.Tensor]:
        if count not in self._outputs:
            self._outputs[count] = _array(qd.f32, (self.num_envs, count))
        return self._outputs[count]

    def _parameter(self, role: str, shape: Sequence[int], value: float | torch.Tensor) -> qd.Ndarray:
        key = (role, tuple(shape))
        parameter = self._parameters.get(key)
        if parameter is None:
            parameter = self._parameters[key] = _Parameter(tuple(shape))
        parameter.set(value)
        return parameter.array


class _Parameter:
    """A flat float32 array that a kernel reads: a value broadcast to ``shape``, written again only when it changes."""

    def __init__(self, shape: tuple[int, ...]) -> None:
        self.shape = shape
        self.array, self._view = _array(qd.f32, (math.prod(shape),))
        self._source: float | torch.Tensor | None = None
        self._version = -1
        """The tensor source's ``_version`` when it was copied (torch bumps it on every in-place change)."""

    def set(self, value: float | torch.Tensor) -> None:
        source = self._source
        if isinstance(value, torch.Tensor):
            if value is source and value._version == self._version:
                return
            self._view.copy_(_flat_float32(value, self.shape, self._view.device))
            self._source, self._version = value, value._version  # held, so that its id is not reused
        elif isinstance(source, torch.Tensor) or source is None or value != source:
            self._view.fill_(value)
            self._source = value


def _array(dtype, shape: tuple[int, ...]) -> tuple[qd.Ndarray, torch.Tensor]:
    """A quadrants ndarray and its zero-copy torch view (same memory)."""
    array = qd.ndarray(dtype, shape=shape)
    return array, array.to_torch(copy=False)
