"""Cameras for ``render_mode="rgb_array"``: one frame per env, from a camera that follows each env's subject.

What Genesis 1.4.5's rasterizer does with a batched scene (``scene.build(n_envs=n)``, read in
``genesis/vis/camera.py`` and ``rasterizer.py`` and tried on the CPU backend):

- by default (``VisOptions(split_envs=False)``) a camera is bound to one env (``rendered_envs_idx[0]``) and draws
  every rendered env into one image, each shifted by its ``envs_offset``; gs_gym builds with Genesis' default
  ``env_spacing=(0, 0)``, so the robots of all envs are drawn on top of each other in that one image.
- with ``VisOptions(split_envs=True)`` a camera holds one pose per rendered env and ``render()`` draws each env alone,
  returning a ``(len(rendered_envs_idx), H, W, 3)`` uint8 stack (also for ``n_envs=1``), at the cost of one
  rasterizer pass per env (about 10 ms for a 320x240 cart-pole frame on 2 CPU cores).

So a task renders split, every env: ``render()`` returns one ``(H, W, 3)`` uint8 frame per env, which is what
Gymnasium's vector API defines (``SyncVectorEnv.render`` returns a tuple of per-env frames; its vector
``RecordVideo`` and ``HumanRendering`` tile them and check there are ``num_envs``). Tiling stays with whoever shows
the frames. Nothing here runs without a render mode: no camera is added and the scene keeps Genesis' default
visual options, so rendering off costs nothing.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np
import torch

RGB_ARRAY = "rgb_array"
"""The render mode every built-in task supports."""


def vis_options(render_mode: str | None) -> Any:
    """``vis_options`` for ``gs.Scene``: split rendering (one image per env) with a render mode, else None (Genesis'
    defaults, as without rendering)."""
    if render_mode is None:
        return None
    import genesis as gs

    return gs.options.VisOptions(split_envs=True)


@dataclasses.dataclass(frozen=True)
class CameraSpec:
    """Where a follow camera sits: at ``subject + offset``, looking at ``subject + lookat_offset``."""

    offset: tuple[float, float, float]
    lookat_offset: tuple[float, float, float] = (0.0, 0.0, 0.0)
    fov: float = 40.0
    """Vertical field of view (degrees)."""
    width: int = 320
    height: int = 240


class FollowCamera:
    """A Genesis camera with one pose per env, moved to each env's subject before every render.

    Create it between adding the entities and ``scene.build`` (Genesis adds cameras before the build only).
    """

    def __init__(self, scene: Any, spec: CameraSpec) -> None:
        self.spec = spec
        self._offset = np.asarray(spec.offset, dtype=np.float64)
        self._lookat_offset = np.asarray(spec.lookat_offset, dtype=np.float64)
        self.camera = scene.add_camera(
            res=(spec.width, spec.height),
            pos=tuple(self._lookat_offset + self._offset),
            lookat=tuple(self._lookat_offset),
            fov=spec.fov,
        )

    def render(self, subjects: torch.Tensor) -> np.ndarray:
        """``(num_envs, H, W, 3)`` uint8 frames, env ``i`` seen from its subject ``subjects[i]`` (world frame)."""
        lookat = subjects.detach().to("cpu", torch.float64).numpy() + self._lookat_offset
        self.camera.set_pose(pos=lookat + self._offset, lookat=lookat)
        rgb = self.camera.render(rgb=True)[0]
        frames = np.asarray(rgb.cpu() if isinstance(rgb, torch.Tensor) else rgb)
        return np.ascontiguousarray(frames, dtype=np.uint8)
