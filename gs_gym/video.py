"""MP4 videos of a vector env: the frames of its first ``k`` envs tiled into one picture, each captioned with its
episode return, written as the env steps. Used by ``examples/play.py``, ``examples/train_ppo.py --capture-video``
and ``gs-gym demo --video``; needs the ``video`` extra (``pip install 'gs-gym[video]'``). The env must be built with
``render_mode="rgb_array"``; its ``render()`` draws every env (about one rasterizer pass each), so record from a small
env of its own rather than from a training batch.

Why imageio with imageio-ffmpeg rather than Gymnasium's ``gymnasium.wrappers.vector.RecordVideo`` (Gymnasium 1.x):
RecordVideo keeps every frame of a recording in memory and then hands them to moviepy (an extra dependency, which
runs the ffmpeg that imageio finds anyway), names its files itself (``<prefix>-episode-<n>.mp4`` in a folder, so a
script cannot be told ``--video out.mp4``), shows all envs or only the first, and has no place for the episode
return. imageio's ffmpeg writer pipes each frame to ffmpeg as it comes (memory stays flat however long the video),
and imageio-ffmpeg ships a static ffmpeg in its wheel: no system ffmpeg and no display needed. Captions are drawn
with Pillow, which imageio depends on.

    video = record(env, policy, "out.mp4", steps=200, envs=4, seed=0)   # or, in a loop of your own:
    with EpisodeVideo("out.mp4", envs=4) as video:
        obs, _ = env.reset(seed=0)
        video.add(env.render())
        for _ in range(200):
            obs, reward, terminated, truncated, _ = env.step(policy(obs))
            video.add(env.render(), reward, terminated | truncated)
    print(video.frames, video.returns)   # 201 frames; per shown env, the returns of its episodes that ended
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from pathlib import Path
from types import TracebackType
from typing import Any

import numpy as np
import torch

FPS = 50.0
"""Default frames per second: the built-in tasks step at ``dt = 0.02`` s, so one frame per step plays in real time."""


def tile(frames: Sequence[np.ndarray]) -> np.ndarray:
    """``frames`` (equal ``(H, W, 3)`` arrays) in a grid of ``ceil(sqrt(n))`` columns, row by row; cells left over
    stay black. One frame is returned as it is."""
    if len(frames) == 1:
        return np.asarray(frames[0])
    cols = math.ceil(math.sqrt(len(frames)))
    rows = math.ceil(len(frames) / cols)
    height, width, channels = frames[0].shape
    grid = np.zeros((rows * height, cols * width, channels), dtype=frames[0].dtype)
    for i, frame in enumerate(frames):
        row, col = divmod(i, cols)
        grid[row * height : (row + 1) * height, col * width : (col + 1) * width] = frame
    return grid


def _floats(values: Any, count: int) -> list[float]:
    """The first ``count`` entries of a tensor, array or sequence, as Python floats."""
    head = values[:count]
    return [float(v) for v in (head.tolist() if hasattr(head, "tolist") else head)]


class EpisodeVideo:
    """An MP4 of the first ``envs`` envs (tiled by :func:`tile`), each tile captioned ``env i  return R``, where
    ``R`` is the env's return so far in its current episode. Frames go to ffmpeg as they are added.

    Args:
        path: the file to write (H.264 in an MP4 container, whatever the suffix); its folder is created.
        envs: how many envs to show: the first ``envs`` frames of each ``render()``.
        fps: frames per second of the video.
    """

    def __init__(self, path: str | Path, envs: int = 1, fps: float = FPS) -> None:
        if envs < 1:
            raise ValueError(f"EpisodeVideo: envs must be >= 1, got {envs}")
        try:
            import imageio.v2 as imageio
            from PIL import ImageFont
        except ImportError as error:
            raise ImportError("videos need imageio and imageio-ffmpeg: pip install 'gs-gym[video]'") from error
        self.path, self.envs = Path(path), envs
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._font = ImageFont.load_default(size=14)
        self._writer = imageio.get_writer(self.path, format="FFMPEG", fps=fps, ffmpeg_log_level="error")
        self._running = [0.0] * envs
        self.returns: list[list[float]] = [[] for _ in range(envs)]
        """Per shown env, the returns of the episodes that ended while recording."""
        self.frames = 0
        """Frames written so far."""

    def add(self, frames: Sequence[np.ndarray], rewards: Any = None, dones: Any = None) -> None:
        """Append one frame made of ``frames[:envs]`` (``render()``'s tuple). ``rewards`` and ``dones`` are those of
        the step that led to these frames (tensors, arrays or sequences over all envs; leave them out after a reset):
        they add to each caption's return, and a done env's caption shows its final return once, then starts again
        from 0."""
        if len(frames) < self.envs:
            raise ValueError(f"EpisodeVideo: {self.envs} env(s) shown but render() gave {len(frames)} frame(s)")
        rewards = [0.0] * self.envs if rewards is None else _floats(rewards, self.envs)
        dones = [False] * self.envs if dones is None else [bool(d) for d in _floats(dones, self.envs)]
        tiles = []
        for i in range(self.envs):
            self._running[i] += rewards[i]
            text = f"env {i}  return {self._running[i]:.2f}"
            if dones[i]:
                self.returns[i].append(self._running[i])
                self._running[i], text = 0.0, text + " (ended)"
            tiles.append(self._caption(np.asarray(frames[i], dtype=np.uint8), text))
        self._writer.append_data(tile(tiles))
        self.frames += 1

    def _caption(self, frame: np.ndarray, text: str) -> np.ndarray:
        """``frame`` with ``text`` in white on a black band along its top."""
        from PIL import Image, ImageDraw

        image = Image.fromarray(frame)
        draw = ImageDraw.Draw(image)
        bottom = draw.textbbox((4, 2), text, font=self._font)[3] + 3
        draw.rectangle((0, 0, image.width, bottom), fill=(0, 0, 0))
        draw.text((4, 2), text, fill=(255, 255, 255), font=self._font)
        return np.asarray(image)

    def close(self) -> None:
        """Finish the file (idempotent)."""
        self._writer.close()

    def __enter__(self) -> EpisodeVideo:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, traceback: TracebackType | None
    ) -> None:
        self.close()


def record(
    env: Any,
    act: Callable[[Any], Any],
    path: str | Path,
    steps: int,
    envs: int = 1,
    seed: int | None = None,
    fps: float = FPS,
) -> EpisodeVideo:
    """Reset ``env`` with ``seed``, step it ``steps`` times with ``act(obs)`` (under ``torch.no_grad``) and write the
    first ``envs`` envs to ``path``: ``steps + 1`` frames, the first after the reset. Returns the closed
    :class:`EpisodeVideo` (``frames``, ``returns``)."""
    obs = env.reset(seed=seed)[0]
    with EpisodeVideo(path, envs=envs, fps=fps) as video:
        video.add(env.render())
        for _ in range(steps):
            with torch.no_grad():
                obs, reward, terminated, truncated, _ = env.step(act(obs))
            video.add(env.render(), reward, terminated | truncated)
    return video
