"""Start a worker process as multiprocessing's spawn does, except that the child never imports the parent's
``__main__``.

Why: before it unpickles the process object, a spawned child applies the "preparation data" the parent made with
``multiprocessing.spawn.get_preparation_data``. Two of its entries, ``init_main_from_path`` and
``init_main_from_name``, make the child run the parent's main script or module again (as ``__mp_main__``). A script
with no ``if __name__ == "__main__":`` guard then builds its env again inside every worker, and code fed through
``python -`` or some notebook kernels cannot be re-run at all. A gs_gym worker needs nothing from ``__main__``: what
it runs arrives pickled by cloudpickle, which sends ``__main__``'s functions and classes by value.

How: CPython's ``Popen`` classes for spawn and forkserver (``popen_spawn_posix``, ``popen_forkserver``) make that
data in ``_launch``, calling ``spawn.get_preparation_data`` through the global name ``spawn`` of their module (3.10
to 3.13 alike). Our ``Popen`` subclasses run that very ``_launch`` code, rebound to a private copy of its module's
globals in which ``spawn`` is a stand-in: it drops the two entries and hands everything else to the real module. So
nothing process-wide is patched (no window in which another thread, or another user of multiprocessing in
the process, sees a changed module or ``sys.modules["__main__"]``), and the rest of the data (``sys.path``, working
directory, authkey, logging) still reaches the child. The processes are ordinary multiprocessing processes: sentinel,
``exitcode``, ``join``, ``terminate``, ``kill``, ``Connection`` arguments and daemon clean-up at exit all work as
usual.

Should a future ``_launch`` stop fitting (no ``spawn.get_preparation_data`` call, or a closure), the standard process
is used and a ``RuntimeWarning`` says so. The fork start method never imports ``__main__`` and is left as it is, as
is Windows (its spawn makes the data elsewhere).
"""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import sys
import threading
import types
import warnings
from collections.abc import Callable, Iterator
from multiprocessing import spawn
from multiprocessing.process import BaseProcess
from typing import Any

from gs_gym.transport import preload

_MAIN_ENTRIES = ("init_main_from_path", "init_main_from_name")
_ENVIRON_LOCK = threading.Lock()


@contextlib.contextmanager
def applied_environment(overrides: dict[str, str]) -> Iterator[None]:
    """Apply ``overrides`` to os.environ while a child is spawned, so it starts with them before any import."""
    with _ENVIRON_LOCK:
        saved = {key: os.environ.get(key) for key in overrides}
        os.environ.update(overrides)
        try:
            yield
        finally:
            for key, value in saved.items():
                if value is None:
                    os.environ.pop(key, None)
                else:
                    os.environ[key] = value


class _SpawnWithoutMain:
    """What ``_launch`` sees as the ``spawn`` module: the real one, less the entries that re-run ``__main__``."""

    def __getattr__(self, name: str) -> Any:
        return getattr(spawn, name)

    @staticmethod
    def get_preparation_data(name: str) -> dict[str, Any]:
        data = spawn.get_preparation_data(name)
        for key in _MAIN_ENTRIES:
            data.pop(key, None)
        return data


def _popen_without_main(popen_class: type, **stand_ins: Any) -> type | None:
    """A subclass of ``popen_class`` whose ``_launch`` sees ``_SpawnWithoutMain`` as ``spawn`` (and each of
    ``stand_ins`` under its name); None if it does not fit (then a ``RuntimeWarning``)."""
    launch = popen_class.__dict__.get("_launch")
    fits = (
        isinstance(launch, types.FunctionType)
        and not launch.__closure__
        and launch.__globals__.get("spawn") is spawn
        and {"spawn", "get_preparation_data", *stand_ins} <= set(launch.__code__.co_names)
        and all(name in launch.__globals__ for name in stand_ins)
    )
    if not fits:
        warnings.warn(
            f"gs_gym: {popen_class.__module__}.Popen does not fit gs_gym.transport.launch; its workers will import "
            "__main__ as multiprocessing does",
            RuntimeWarning,
            stacklevel=2,
        )
        return None
    assert isinstance(launch, types.FunctionType)  # part of ``fits``
    namespace = dict(launch.__globals__)
    namespace["spawn"] = _SpawnWithoutMain()
    namespace.update(stand_ins)
    rebound = types.FunctionType(launch.__code__, namespace, launch.__name__, launch.__defaults__)
    rebound.__kwdefaults__ = launch.__kwdefaults__
    rebound.__qualname__ = launch.__qualname__
    return type(popen_class.__name__, (popen_class,), {"_launch": rebound, "__module__": __name__})


_PROCESS_CLASSES: dict[str, type[BaseProcess]] = {}
"""Per start method, the process class to use instead of the context's."""
_ForkServerPopen: type | None = None

if sys.platform != "win32":
    from multiprocessing import context, popen_forkserver, popen_spawn_posix

    _SpawnPopen = _popen_without_main(popen_spawn_posix.Popen)
    _ForkServerPopen = _popen_without_main(popen_forkserver.Popen, forkserver=preload.SERVER)

    # module-level classes: the child unpickles the process object, so it must find its class by name
    class _SpawnProcess(context.SpawnProcess):
        @staticmethod
        def _Popen(process_obj: BaseProcess) -> Any:
            assert _SpawnPopen is not None  # the class is registered below only then
            return _SpawnPopen(process_obj)

    class _ForkServerProcess(context.ForkServerProcess):
        @staticmethod
        def _Popen(process_obj: BaseProcess) -> Any:
            assert _ForkServerPopen is not None  # the class is registered below only then
            return _ForkServerPopen(process_obj)

    if _SpawnPopen is not None:
        _PROCESS_CLASSES["spawn"] = _SpawnProcess
    if _ForkServerPopen is not None:
        _PROCESS_CLASSES["forkserver"] = _ForkServerProcess


def start_process(
    ctx: Any, *, target: Callable[..., Any], args: tuple[Any, ...], name: str, environment: dict[str, str]
) -> BaseProcess:
    """Start ``target(*args)`` in a daemon process of ``ctx``'s start method, with ``environment`` applied to
    os.environ around the start; with spawn and forkserver, the child does not import the parent's ``__main__``.
    The forkserver method forks from ``preload.SERVER`` (torch and Genesis imported) when it serves this start's
    environment, else spawns."""
    method = ctx.get_start_method()
    with applied_environment(environment):
        if method == "forkserver" and (_ForkServerPopen is None or not preload.SERVER.serves(os.environ)):
            method = "spawn"
        process_class = _PROCESS_CLASSES.get(method, multiprocessing.get_context(method).Process)
        process = process_class(target=target, args=args, name=name, daemon=True)
        process.start()
    return process
