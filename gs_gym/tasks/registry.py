"""Task registry: names users pass as ``task=...`` mapped to ``Task`` subclasses."""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from gs_gym.tasks.base import Task

_TASKS: dict[str, type[Task]] = {}
TaskT = TypeVar("TaskT", bound=type[Task])


def register_task(name: str) -> Callable[[TaskT], TaskT]:
    """Class decorator that registers a task under ``name`` (and sets its ``name`` attribute)."""

    def decorator(cls: TaskT) -> TaskT:
        if name in _TASKS and _TASKS[name] is not cls:
            raise ValueError(f"task name {name!r} is already registered to {_TASKS[name].__qualname__}")
        cls.name = name
        _TASKS[name] = cls
        return cls

    return decorator


def available_tasks() -> list[str]:
    """Names of every registered task, sorted."""
    return sorted(_TASKS)


def resolve_task(task: str | type[Task]) -> type[Task]:
    """Look a task up by name, or accept a ``Task`` subclass as it is."""
    if isinstance(task, type) and issubclass(task, Task):
        return task
    if isinstance(task, str):
        if task not in _TASKS:
            raise ValueError(f"task: unknown task {task!r}; expected one of {available_tasks()}")
        return _TASKS[task]
    raise TypeError(f"task: expected a registered task name or a Task subclass, got {type(task).__name__}")
