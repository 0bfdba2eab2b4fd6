"""Worker output through ``logging`` (logger names, the fallback handler, the crash tail) and Genesis's level."""

import logging
import multiprocessing
import os
import re

import pytest

from gs_gym.tasks.runtime import resolve_genesis_logging_level
from gs_gym.transport.output import WORKER_LOGGER, FallbackHandler, OutputPump


def pump_lines(worker: int, data: bytes, forward: bool = True) -> OutputPump:
    """An ``OutputPump`` that has read ``data`` from its pipe to the end."""
    reader, writer = multiprocessing.Pipe(duplex=False)
    pump = OutputPump(reader, worker, forward)
    os.write(writer.fileno(), data)
    writer.close()
    pump.tail(wait=5.0)  # joins the reading thread: every line is logged
    return pump


def test_lines_are_info_records_of_the_workers_logger(caplog):
    caplog.set_level(logging.INFO, logger=WORKER_LOGGER)
    pump = pump_lines(3, b"first line\r\n100% done\nno newline at the end")
    records = [r for r in caplog.records if r.name.startswith(WORKER_LOGGER)]
    assert [(r.name, r.levelno, r.worker, r.getMessage()) for r in records] == [
        ("gs_gym.worker.3", logging.INFO, 3, "first line"),
        ("gs_gym.worker.3", logging.INFO, 3, "100% done"),
        ("gs_gym.worker.3", logging.INFO, 3, "no newline at the end"),
    ]
    assert pump.tail() == ["first line", "100% done", "no newline at the end"]
    pump.close()


def test_no_records_without_forwarding_but_the_tail_is_kept(caplog):
    caplog.set_level(logging.INFO, logger=WORKER_LOGGER)
    pump = pump_lines(1, b"quiet\n", forward=False)
    assert [r for r in caplog.records if r.name.startswith(WORKER_LOGGER)] == []
    assert pump.tail() == ["quiet"]
    pump.close()


def test_worker_logger_defaults_to_info_with_one_fallback_handler():
    logger = logging.getLogger(WORKER_LOGGER)
    assert logger.level == logging.INFO  # passes a root logger left at WARNING
    assert [type(h) for h in logger.handlers] == [FallbackHandler]


def test_fallback_prints_when_no_logging_is_configured(monkeypatch, capsys):
    monkeypatch.setattr(logging.root, "handlers", [])  # as in a program that configured nothing (pytest's are gone)
    pump_lines(2, b"hello from the worker\n").close()
    assert capsys.readouterr().err == "[gs_gym worker 2] hello from the worker\n"


def test_fallback_stays_quiet_once_a_handler_is_configured(monkeypatch, capsys):
    seen: list[str] = []
    handler = logging.Handler()
    handler.emit = lambda record: seen.append(f"{record.name}: {record.getMessage()}")
    monkeypatch.setattr(logging.root, "handlers", [handler])
    pump_lines(2, b"hello from the worker\n").close()
    assert seen == ["gs_gym.worker.2: hello from the worker"]
    assert capsys.readouterr().err == ""


def test_genesis_level_follows_the_gs_gym_logger(monkeypatch):
    monkeypatch.setattr(logging.root, "level", logging.WARNING)  # logging's default
    logger = logging.getLogger("gs_gym")
    saved = logger.level
    try:
        logger.setLevel(logging.NOTSET)
        assert resolve_genesis_logging_level(None) == "warning"
        logger.setLevel(logging.DEBUG)
        assert resolve_genesis_logging_level(None) == "debug"
        logger.setLevel(logging.ERROR)
        assert resolve_genesis_logging_level(None) == "error"
    finally:
        logger.setLevel(saved)


@pytest.mark.parametrize(
    ("level", "name"),
    [
        ("INFO", "info"),
        ("warning", "warning"),
        (logging.DEBUG, "debug"),
        (15, "debug"),
        (0, "debug"),
        (logging.ERROR + 5, "error"),
        (100, "critical"),
    ],
)
def test_genesis_level_by_name_or_number(level, name):
    assert resolve_genesis_logging_level(level) == name


@pytest.mark.parametrize("level", ["loud", -1, True, 1.5])
def test_genesis_level_refuses_others(level):
    message = (
        "genesis_logging_level: expected one of ['debug', 'info', 'warning', 'error', 'critical'], a logging level "
        f"number or None, got {level!r}"
    )
    with pytest.raises(ValueError, match=f"^{re.escape(message)}$"):
        resolve_genesis_logging_level(level)
