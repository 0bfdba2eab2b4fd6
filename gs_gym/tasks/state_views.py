"""A robot's joint-space state read straight from Genesis's own arrays, without a getter call per step.

Genesis 1.4.5's getters (``get_qpos``, ``get_dofs_position``, ``get_dofs_velocity``) copy the solver's whole array
(every entity, every env) on each call and hand back the entity's columns of the copy: a kernel and some Python each
time, in every step's ``read_state``. With zero-copy on (``gs.use_zerocopy``, Genesis's default on its CPU and CUDA
backends) those arrays are torch tensors that Genesis updates in place, so a task can take a view of its entity's
columns once, at build, and read it for nothing. A reader made here returns that view, or calls the getter where no
view exists (zero-copy off, or arrays Genesis cannot share), with the same values either way.

A view is live: unlike a getter's copy, it changes with the next ``scene.step`` or setter (a reset's ``set_qpos``).
The step order reads it before either runs (``read_state`` and the output hooks come after ``simulate`` and the
resets); a value kept across them (to compare two steps, say) must be cloned, and a hook must not return a view as
its output.

Built on Genesis internals, the solver's arrays and an entity's offsets into them, pinned with genesis-world 1.4.5;
``tests/tasks/test_state_views.py`` holds the views to the getters' values through steps and resets.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

StateReader = Callable[[], torch.Tensor]
"""Returns an ``(num_envs, n)`` tensor of the entity's current state: a live view, or a getter's fresh copy."""


def qpos_reader(entity: Any) -> StateReader:
    """``entity.get_qpos()``: every generalized coordinate of the entity (a free base's position and quaternion, then
    the joints)."""
    solver = entity._solver
    return _reader(lambda: solver.qpos, range(entity._q_start, entity._q_start + entity.n_qs), entity.get_qpos)


def dofs_position_reader(entity: Any, dofs: range | None = None) -> StateReader:
    """``entity.get_dofs_position(dofs)`` for a range of the entity's local dof indices (None: all of them)."""
    solver = entity._solver
    return _reader(lambda: solver.dyn_state.dofs.pos, _global(entity, dofs), lambda: entity.get_dofs_position(dofs))


def dofs_velocity_reader(entity: Any, dofs: range | None = None) -> StateReader:
    """``entity.get_dofs_velocity(dofs)`` for a range of the entity's local dof indices (None: all of them)."""
    solver = entity._solver
    return _reader(lambda: solver.dyn_state.dofs.vel, _global(entity, dofs), lambda: entity.get_dofs_velocity(dofs))


def _global(entity: Any, dofs: range | None) -> range:
    """The solver's columns of the entity's local ``dofs`` (None: all of them)."""
    local = range(entity.n_dofs) if dofs is None else dofs
    if local.step != 1 or not 0 <= local.start <= local.stop <= entity.n_dofs:
        raise ValueError(f"expected a contiguous range of local dofs within 0..{entity.n_dofs}, got {dofs}")
    return range(entity._dof_start + local.start, entity._dof_start + local.stop)


def _reader(array: Callable[[], Any], columns: range, getter: StateReader) -> StateReader:
    """A reader of ``columns`` of the solver's ``array`` (batched over envs): its zero-copy view if Genesis can share
    it, else ``getter``."""
    import genesis as gs
    from genesis.utils.misc import qd_to_torch

    try:
        whole = qd_to_torch(array(), transpose=True, copy=False)  # (num_envs, all entities' columns)
    except (gs.GenesisException, ValueError, RuntimeError, TypeError):  # no view: zero-copy off, or a copied array
        return getter
    view = whole[:, columns.start : columns.stop]
    return lambda: view
