"""The messages that cross a worker's pipe: one ``Request`` in, one ``Ok`` or ``Err`` out (and, while a worker
builds, any number of ``Status`` messages before its handshake).

Per step the pipe carries ``Request(Command.STEP, seq)`` and ``Ok(seq)``: the data itself sits in buffers that
were shared once at start-up. ``seq`` lets the parent reject a stale reply instead of misreading it.
"""

from __future__ import annotations

import dataclasses
import enum
import pickle
import traceback
from multiprocessing.connection import Connection
from typing import Any


class Command(enum.IntEnum):
    STEP = 1
    RESET = 2
    CALL = 3
    GET_ATTR = 4
    SET_ATTR = 5
    CLOSE = 6
    SET_EPISODE_STEPS = 7
    """Overwrite the shard's per-env episode step counters; args: one value per env of the shard."""
    RENDER = 8
    """Render the shard's frames into its shared frame buffer; the reply carries the buffer when it is new."""
    CHECK_STEP = 9
    """Name what made the last step's ``ALL_FINITE`` flag False (raise, or reply with the envs of bad actions)."""


class ErrorKind(enum.IntEnum):
    EXCEPTION = 1
    """A command raised."""
    BUILD = 2
    """The shard could not be constructed (task construction or scene build)."""


@dataclasses.dataclass(frozen=True)
class Request:
    command: Command
    seq: int
    args: tuple[Any, ...] = ()

    @property
    def plain(self) -> bool:
        """Nothing in it needs multiprocessing's pickler (``send_message``): no arguments (STEP, CLOSE)."""
        return not self.args


@dataclasses.dataclass(frozen=True)
class Ok:
    seq: int
    value: Any = None
    seconds: float = 0.0
    """Time the worker spent executing the command (what the parent's wait adds on top is transport)."""

    @property
    def plain(self) -> bool:
        """Nothing in it needs multiprocessing's pickler (``send_message``): no value (STEP, RESET, CLOSE)."""
        return self.value is None


@dataclasses.dataclass(frozen=True)
class Err:
    seq: int
    kind: ErrorKind
    error_type: str
    message: str
    traceback: str
    plain = True
    """Strings and numbers only (``send_message``)."""

    @classmethod
    def from_exception(cls, seq: int, kind: ErrorKind, error: BaseException) -> Err:
        """Capture ``error`` with its formatted traceback (exceptions themselves may not pickle)."""
        formatted = "".join(traceback.format_exception(type(error), error, error.__traceback__))
        return cls(seq, kind, type(error).__name__, f"{type(error).__name__}: {error}", formatted)


@dataclasses.dataclass(frozen=True)
class Status:
    """Sent by a worker while it builds, before its handshake (``Ok(0)`` or ``Err(0)``): the stage it reached, as
    the parent's progress display shows it. Not a reply: it answers no request and carries no ``seq``."""

    stage: str
    plain = True
    """Strings only (``send_message``)."""


Reply = Ok | Err


def send_message(conn: Connection, message: Request | Reply | Status) -> None:
    """Send ``message`` as ``conn.send`` would (``conn.recv`` reads both the same), with the standard pickler when
    it is ``plain``: ``conn.send``'s pickler, which shares tensors and file descriptors by reference, copies its table
    of reducers for every message, twice the cost of a step's request or reply (~5 us each on a CPU core)."""
    if message.plain:
        conn.send_bytes(pickle.dumps(message, pickle.HIGHEST_PROTOCOL))
    else:
        conn.send(message)
