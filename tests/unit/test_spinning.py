"""``spin_until_readable`` returns the pipes that have data (or lost their writer) as soon as one has, and nothing
after its time when none has; who spins by default."""

from __future__ import annotations

import multiprocessing
import select
import time

import pytest

from gs_gym.transport.spinning import GPU_SPIN_WAIT_US, default_spin_wait_us, spin_until_readable
from gs_gym.vector.options import EnvOptions


@pytest.fixture(params=["select.poll", "Connection.poll"])
def poller(request, monkeypatch):
    """Both ways of polling: ``select.poll``, and the fallback where it is missing (Windows)."""
    if request.param == "Connection.poll":
        monkeypatch.delattr(select, "poll")
    return request.param


def test_returns_the_pipes_with_data_once_one_has_some(poller):
    quiet_reader, _quiet_writer = multiprocessing.Pipe(duplex=False)
    reader, writer = multiprocessing.Pipe(duplex=False)
    writer.send("reply")
    start = time.perf_counter()
    assert spin_until_readable([quiet_reader, reader], 30.0) == [reader]
    assert time.perf_counter() - start < 30.0  # it did not spin its whole time
    assert reader.recv() == "reply" and not quiet_reader.poll(0)


def test_a_pipe_whose_writer_closed_is_returned_and_reads_eof(poller):
    reader, writer = multiprocessing.Pipe(duplex=False)
    writer.close()  # a worker that died: the caller learns it from recv
    assert spin_until_readable([reader], 30.0) == [reader]
    with pytest.raises(EOFError):
        reader.recv()


def test_gives_up_after_its_time_and_reads_nothing(poller):
    reader, writer = multiprocessing.Pipe(duplex=False)
    start = time.perf_counter()
    assert spin_until_readable([reader], 0.02) == []
    assert time.perf_counter() - start >= 0.02
    writer.send(1)
    assert reader.recv() == 1  # nothing was consumed while spinning


def test_zero_seconds_or_no_pipes_return_at_once():
    reader, writer = multiprocessing.Pipe(duplex=False)
    writer.send(1)
    assert spin_until_readable([reader], 0.0) == []  # not even a look
    assert spin_until_readable([], 5.0) == []


def test_default_spins_only_for_gpu_workers_with_two_cores_each():
    assert default_spin_wait_us(on_gpu=True, num_workers=1, cores=4) == GPU_SPIN_WAIT_US == 20_000.0
    assert default_spin_wait_us(on_gpu=True, num_workers=8, cores=18) == GPU_SPIN_WAIT_US
    assert default_spin_wait_us(on_gpu=True, num_workers=8, cores=17) == 0.0  # 9 processes, 17 cores
    assert default_spin_wait_us(on_gpu=True, num_workers=1, cores=3) == 0.0
    assert default_spin_wait_us(on_gpu=True, num_workers=0, cores=64) == 0.0  # in-process: no pipe to wait on
    assert default_spin_wait_us(on_gpu=False, num_workers=1, cores=64) == 0.0  # the cores are the simulation's


def test_options_resolve_the_default_and_keep_a_given_value():
    assert EnvOptions.parse(4, "cartpole", backend="cpu").spin_wait_us == 0.0
    assert EnvOptions.parse(4, "cartpole", backend="cpu", spin_wait_us=250).spin_wait_us == 250.0
