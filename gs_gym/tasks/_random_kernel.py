"""Quadrants kernels for :class:`gs_gym.tasks.random.EnvRandom`: one launch per draw, counters included.

Each is the torch code of :mod:`gs_gym.tasks.random` transcribed operation for operation (same integers, same float
roundings), so that the two give bit-identical numbers; see that module for why this holds. Import this module only
once Genesis is initialized: it imports quadrants, whose kernels compile for the backend Genesis chose (on the first
launch; quadrants' offline cache keeps them for later processes).

Every kernel has one top-level loop, over envs, so it is one GPU kernel: an env's thread computes all its elements,
then advances its own counter when its mask is set, so no other thread reads a counter while it changes. The loop's
bound is a compile-time ``num_envs`` (a kernel is compiled once per shard size): a bound known only at run time,
even an argument or an array's shape, makes quadrants launch a second, serial GPU kernel before the loop to compute
it. Quadrants also copies its launch arguments to the GPU before each launch (one host-to-device copy).

Arguments: ``state`` is the ``(num_envs, 2)`` int64 tensor of keys and counters, ``mask`` the ``(num_envs,)`` bool
tensor, ``out`` a ``(num_envs, count)`` float32 tensor to fill; array bounds and stds are flat float32 tensors of
``count`` elements. All must be contiguous and on the device of Genesis's backend. ``num_envs`` is
``state.shape[0]``. ``serial`` (compile-time) runs the loop on the calling thread: pass True on the CPU backend,
where handing a parallel loop to quadrants' thread pool costs about 70 us per launch (more than the draw itself),
False on a GPU.
"""

import quadrants as qd

from gs_gym.tasks.random import (
    _MIX_MUL_1,
    _MIX_MUL_2,
    COS_SERIES_Q31,
    LN2_Q31,
    LOG_SERIES_Q31,
    UNIT_BITS,
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
def uniform_scalar_bounds(
    state: qd.types.ndarray(),
    mask: qd.types.ndarray(),
    out: qd.types.ndarray(),
    low: qd.f32,
    high: qd.f32,
    num_envs: qd.template(),
    serial: qd.template(),
):
    qd.loop_config(serialize=serial)
    for i in range(num_envs):
        stream = _stream(state[i, 0], state[i, 1])
        for j in range(out.shape[1]):
            out[i, j] = _uniform(_word(stream, j), low, high)
        if mask[i]:
            state[i, 1] = state[i, 1] + 1  # a plain store: no other thread touches row i


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
def normal_scalar_std(
    state: qd.types.ndarray(),
    mask: qd.types.ndarray(),
    out: qd.types.ndarray(),
    std: qd.f32,
    num_envs: qd.template(),
    serial: qd.template(),
):
    qd.loop_config(serialize=serial)
    for i in range(num_envs):
        stream = _stream(state[i, 0], state[i, 1])
        for j in range(out.shape[1]):
            out[i, j] = _gaussian(_word(stream, 2 * j), _word(stream, 2 * j + 1)) * std
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
