"""``render_mode="rgb_array"`` for every built-in task on the CPU backend: one uint8 ``(240, 320, 3)`` frame per env,
not blank, following the subject; the same from a worker; nothing at all without a render mode.

A first render costs ~20 s on 2 cores (building the rasterizer's buffers), so each task is built once for the module.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import numpy as np
import pytest
import torch

from gs_gym import GenesisVectorEnv

NUM_ENVS = 2
FRAME_SHAPE = (240, 320, 3)
STEPS = 20
MIN_PIXEL_VARIANCE = 20.0
"""Floor of ``pixel_variance``. A frame of the background alone is one colour: variance 0. Measured on these scenes
after ``reset(seed=0)``: cartpole 112 (rail, cart and pole on the background), go2-walk 376 (robot on a chequered
plane), franka-reach 1692 and 1889 (arm and target): the floor is over five times under the smallest."""
MIN_MEAN_CHANGE = 0.05
"""Floor of the mean absolute pixel change (0-255 scale) over ``STEPS`` steps of actions 0.5; measured: cartpole 0.53
and 0.55 (the camera follows the cart, so mostly the pole's swing shows), go2-walk 5.3, franka-reach 9.4 and 11.2:
the floor is ten times under the smallest."""


def pixel_variance(frame: np.ndarray) -> float:
    """The variance over pixels of each colour channel, averaged over the channels (0 for a one-colour frame)."""
    return float(frame.reshape(-1, 3).astype(np.float64).var(axis=0).mean())


@pytest.fixture(scope="module")
def rendering_env() -> Iterator[Callable[..., GenesisVectorEnv]]:
    """``rendering_env(task, num_workers)``: an env with ``render_mode="rgb_array"``, built once for the module.

    Genesis renders offscreen through EGL (Mesa's on a machine without a GPU): PyOpenGL binds to the platform that
    ``PYOPENGL_PLATFORM`` names when it is first imported, in this process (in-process builds) and in workers
    (which inherit the variable).
    """
    built: dict[tuple[str, int], GenesisVectorEnv] = {}
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("PYOPENGL_PLATFORM", "egl")

        def get(task: str, num_workers: int = 0) -> GenesisVectorEnv:
            key = (task, num_workers)
            if key not in built:
                built[key] = GenesisVectorEnv(
                    NUM_ENVS, task, backend="cpu", num_workers=num_workers, seed=0, render_mode="rgb_array"
                )
            return built[key]

        yield get
        for env in built.values():
            env.close()


def check_frames(frames: object) -> tuple[np.ndarray, ...]:
    assert isinstance(frames, tuple) and len(frames) == NUM_ENVS
    for frame in frames:
        assert isinstance(frame, np.ndarray)
        assert frame.dtype == np.uint8 and frame.shape == FRAME_SHAPE
    return frames


@pytest.mark.parametrize("task", ["cartpole", "go2-walk", "franka-reach"])
def test_rgb_array_gives_one_frame_per_env_following_the_subject(rendering_env, task):
    env = rendering_env(task)
    assert env.render_mode == "rgb_array" and env.metadata["render_modes"] == ["rgb_array"]
    assert len(env.local_task.scene.visualizer.cameras) == 1
    env.reset(seed=0)
    before = check_frames(env.render())
    variance = pixel_variance(before[0])
    assert variance > MIN_PIXEL_VARIANCE, f"{task}: a blank frame (pixel variance {variance:.1f})"

    actions = torch.full((NUM_ENVS, *env.single_action_space.shape), 0.5)
    for _ in range(STEPS):
        env.step(actions)
    after = check_frames(env.render())
    for i in range(NUM_ENVS):
        change = float(np.abs(after[i].astype(np.int16) - before[i]).mean())
        assert change > MIN_MEAN_CHANGE, f"{task}: env {i}'s frame hardly changed ({change:.3f}) in {STEPS} steps"


def test_a_worker_sends_its_frames_through_a_shared_buffer(rendering_env):
    """``render()`` reads the worker's shared frame buffer; ``call_workers(None, "render")`` calls the task's
    ``render`` and pickles its frames through the pipe: the same frames, so the buffer carries them exactly."""
    in_process, worker = rendering_env("cartpole", 0), rendering_env("cartpole", 1)
    in_process.reset(seed=0)
    worker.reset(seed=0)
    expected_shapes = [frame.shape for frame in check_frames(in_process.render())]
    seen = []
    for _ in range(2):  # the second render overwrites the buffer the first one sent
        frames = check_frames(worker.render())
        (piped,) = worker.call_workers(None, "render")
        assert [frame.shape for frame in frames] == expected_shapes
        np.testing.assert_array_equal(np.stack(frames), piped)
        seen.append((frames, piped))
        for _ in range(STEPS):
            worker.step(torch.full((NUM_ENVS, 1), 0.5))
    (first, first_piped), (second, _) = seen
    np.testing.assert_array_equal(np.stack(first), first_piped)  # the first frames are the caller's own copies
    assert not np.array_equal(np.stack(first), np.stack(second))
    assert [frame.shape for frame in worker.call("render")] == expected_shapes


def test_without_render_mode_there_is_no_camera(shared_env):
    env = shared_env(0)
    env.reset(seed=0)
    assert env.render_mode is None
    assert env.render() is None
    task = env.local_task
    assert task.camera is None and task.render() is None
    assert len(task.scene.visualizer.cameras) == 0
