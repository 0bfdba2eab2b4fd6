"""``send_message`` sends what needs no more than the standard pickler with it, and the rest with multiprocessing's;
``Connection.recv`` reads both alike."""

from __future__ import annotations

import multiprocessing

import pytest
import torch

from gs_gym.transport.protocol import Command, Err, ErrorKind, Ok, Request, Status, send_message


@pytest.mark.parametrize(
    ("message", "plain"),
    [
        (Request(Command.STEP, 7), True),
        (Request(Command.CLOSE, 8, ()), True),
        (Request(Command.CALL, 9, ("num_envs", (), {})), False),
        (Ok(7, None, 0.25), True),
        (Ok(9, 64), False),
        (Err(3, ErrorKind.EXCEPTION, "ValueError", "ValueError: bad", "Traceback ..."), True),
        (Status("building scene"), True),
    ],
)
def test_messages_arrive_equal_whichever_pickler_sent_them(message, plain):
    reader, writer = multiprocessing.Pipe(duplex=False)
    assert message.plain is plain
    send_message(writer, message)
    assert reader.recv() == message


def test_a_tensor_argument_crosses_by_reference():
    """Only multiprocessing's pickler (torch registers its reducers there) shares a tensor's memory: a message with
    arguments must go through it."""
    reader, writer = multiprocessing.Pipe(duplex=False)
    values = torch.arange(4.0)
    send_message(writer, Request(Command.SET_ATTR, 2, ("weights", values)))
    received = reader.recv()
    assert received.args[1].is_shared() and torch.equal(received.args[1], values)
    received.args[1][0] = 10.0  # the same memory as the sender's tensor, moved to shared memory by the send
    assert values[0].item() == 10.0
