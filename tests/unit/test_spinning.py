"""``spin_until_readable``: returns as soon as a pipe has data, and gives up after its time when none has."""

from __future__ import annotations

import multiprocessing
import time

from gs_gym.transport.spinning import spin_until_readable


def test_returns_once_a_pipe_has_data():
    quiet_reader, _quiet_writer = multiprocessing.Pipe(duplex=False)
    reader, writer = multiprocessing.Pipe(duplex=False)
    writer.send("reply")
    start = time.perf_counter()
    spin_until_readable([quiet_reader, reader], 30.0)
    assert time.perf_counter() - start < 30.0  # it did not spin its whole time
    assert reader.recv() == "reply" and not quiet_reader.poll(0)


def test_gives_up_after_its_time_and_reads_nothing():
    reader, writer = multiprocessing.Pipe(duplex=False)
    start = time.perf_counter()
    spin_until_readable([reader], 0.02)
    assert time.perf_counter() - start >= 0.02
    writer.send(1)
    assert reader.recv() == 1  # nothing was consumed while spinning


def test_zero_seconds_or_no_pipes_return_at_once():
    reader, _writer = multiprocessing.Pipe(duplex=False)
    spin_until_readable([reader], 0.0)
    spin_until_readable([], 5.0)
