"""Fault tests: helpers, and envs built in the background while earlier tests run.

Almost every fault test needs an env of its own (a failed env only closes), and each worker start costs 10-20 s
here. So a test names the envs it uses with ``@pytest.mark.prebuilt("name", ...)`` (recipes in its module's
``RECIPES``), and a builder per module makes them in the order the module's selected tests use them, two at a time
on background threads, holding at most ``LOOKAHEAD`` of them alive at once. The ``prebuilt`` fixture hands a test its
envs and, once the last test naming an env is done, closes it.

Per module, not per session: under pytest-xdist a process runs only some of the collected tests (whole modules, with
``--dist loadfile``), so a session-wide plan would wait for envs of tests run elsewhere, and hang.
"""

from __future__ import annotations

import collections
import concurrent.futures
import contextlib
import os
import selectors
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from gs_gym import GenesisVectorEnv, Task
from tests.faults.faulty_task import FaultyCartPole

LOOKAHEAD = 3
"""Envs alive at once: the one in use and two being built."""
PARALLEL_BUILDS = 2
DEFAULTS: dict[str, Any] = {
    "backend": "cpu",
    "seed": 0,
    "forward_output": False,
    "step_timeout": 30.0,
    "build_timeout": 300.0,
}
REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "prebuilt(*names): envs (recipes of the module's RECIPES) this test uses")


def make_env(num_envs: int, task: str | type[Task] = FaultyCartPole, **kwargs: Any) -> GenesisVectorEnv:
    return GenesisVectorEnv(num_envs, task, **(DEFAULTS | kwargs))


def worker_pids(env: GenesisVectorEnv) -> list[int]:
    return env.worker_pids


class Driver:
    """A separate Python process running ``script``, which builds an env, prints ``pids <pid> ...``, and then waits
    for a line on its stdin before it starts stepping (``start``): a driver built ahead of its test (``prebuilt``)
    must not keep the machine's cores busy while earlier tests run."""

    def __init__(self, script: str, timeout: float = 600.0) -> None:
        self.process = subprocess.Popen(
            [sys.executable, "-c", script],
            cwd=REPO,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,  # its own process group, as a terminal gives a program (Ctrl-C reaches all)
        )
        self.worker_pids = [int(pid) for pid in self._read_line("pids ", timeout).split()[1:]]

    def start(self, timeout: float = 60.0) -> None:
        """Let the script go on, and return once it prints ``stepping`` (its workers are in their step loop)."""
        assert self.process.stdin is not None
        self.process.stdin.write("go\n")
        self.process.stdin.flush()
        self._read_line("stepping", timeout)

    def _read_line(self, prefix: str, timeout: float) -> str:
        deadline = time.monotonic() + timeout
        with selectors.DefaultSelector() as selector:
            selector.register(self.process.stdout, selectors.EVENT_READ)
            while time.monotonic() < deadline:
                if selector.select(max(0.0, deadline - time.monotonic())):
                    line = self.process.stdout.readline()
                    if not line:
                        break
                    if line.startswith(prefix):
                        return line
        self.close()
        raise RuntimeError(f"driver gave no {prefix!r} line; stderr:\n{self.process.stderr.read()[-4000:]}")

    def close(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
        self.process.communicate()


class Prebuilder:
    """Builds recipes in plan order on background threads; ``take`` waits for one, ``done_with`` closes it."""

    def __init__(self, plan: list[tuple[str, Callable[[], Any]]], uses: collections.Counter) -> None:
        self._futures = {name: concurrent.futures.Future() for name, _ in plan}
        self._uses = uses
        self._slots = threading.Semaphore(LOOKAHEAD)
        self._stopping = threading.Event()
        self._executor = concurrent.futures.ThreadPoolExecutor(PARALLEL_BUILDS, thread_name_prefix="prebuild")
        self._dispatcher = threading.Thread(target=self._dispatch, args=(plan,), name="prebuild-dispatch", daemon=True)
        self._dispatcher.start()

    def _dispatch(self, plan: list[tuple[str, Callable[[], Any]]]) -> None:
        for name, recipe in plan:
            self._slots.acquire()
            if self._stopping.is_set():
                self._futures[name].cancel()
                self._futures[name].set_running_or_notify_cancel()
                continue
            self._executor.submit(self._build, name, recipe)

    def _build(self, name: str, recipe: Callable[[], Any]) -> None:
        future = self._futures[name]
        if not future.set_running_or_notify_cancel():
            return
        try:
            future.set_result(recipe())
        except BaseException as error:
            future.set_exception(error)

    def take(self, name: str) -> Any:
        return self._futures[name].result()

    def done_with(self, name: str) -> None:
        self._uses[name] -= 1
        if self._uses[name] == 0:
            self._close(name)
            self._slots.release()

    def _close(self, name: str) -> None:
        future = self._futures[name]
        with contextlib.suppress(BaseException):
            future.result().close()

    def shutdown(self) -> None:
        self._stopping.set()
        for _ in self._futures:
            self._slots.release()
        self._dispatcher.join()
        for name, future in self._futures.items():
            if not future.cancelled() and self._uses[name] > 0:
                self._close(name)
        self._executor.shutdown(wait=True)


def _recipe_key(item: pytest.Item, name: str) -> str:
    return f"{item.module.__name__}:{name}"


@pytest.fixture(scope="module")
def _prebuilder(request: pytest.FixtureRequest) -> Iterator[Prebuilder]:
    plan: list[tuple[str, Callable[[], Any]]] = []
    uses: collections.Counter = collections.Counter()
    for item in request.session.items:
        if getattr(item, "module", None) is not request.module:
            continue
        for marker in item.iter_markers("prebuilt"):
            for name in marker.args:
                key = _recipe_key(item, name)
                if key not in uses:
                    plan.append((key, item.module.RECIPES[name]))
                uses[key] += 1
    builder = Prebuilder(plan, uses)
    yield builder
    builder.shutdown()


class Prebuilt:
    def __init__(self, builder: Prebuilder, item: pytest.Item) -> None:
        self._builder = builder
        self._item = item

    def __call__(self, name: str) -> Any:
        return self._builder.take(_recipe_key(self._item, name))


@pytest.fixture
def prebuilt(request: pytest.FixtureRequest, _prebuilder: Prebuilder) -> Iterator[Prebuilt]:
    """``prebuilt(name)``: the env (or driver) built from the recipe ``name``, as named by the test's marker."""
    names = [name for marker in request.node.iter_markers("prebuilt") for name in marker.args]
    yield Prebuilt(_prebuilder, request.node)
    for name in names:
        _prebuilder.done_with(_recipe_key(request.node, name))
