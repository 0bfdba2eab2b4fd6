"""Videos and the play script on the CPU backend, through their command lines: ``gs_gym.video``,
``examples/train_ppo.py --capture-video``, ``examples/play.py`` and ``gs-gym demo --video``.

* ``gs_gym.video`` alone (no Genesis): synthetic frames tiled, captioned, written and read back.
* one tiny training run (8 cartpole envs in-process, 2 iterations: ``test_train_ppo_options.py``'s sizes) that also
  records 2 envs of its policy; then ``play.py`` on its checkpoint with a video of 2 envs and 10-step episodes, so
  that every episode ends (printed returns, JSON, MP4); then ``play.py --random`` with too few steps for an episode
  to end (no nan, nulls in the JSON). ``play.py`` beating a random policy is ``test_train_ppo.py``'s.
* ``gs-gym demo --video`` on 2 envs.

Each process builds its scene in-process (~12 s with a warm kernel cache on 2 cores), rendering through EGL as
``tests/tasks/test_rendering.py`` does; the videos are a few dozen 320x240 frames per env.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import imageio.v2 as imageio
import numpy as np
import pytest
import torch

from gs_gym.video import EpisodeVideo, tile
from tests.json_files import strict_json

ROOT = Path(__file__).resolve().parents[2]
TRAIN = ROOT / "examples" / "train_ppo.py"
PLAY = ROOT / "examples" / "play.py"
FRAME = (240, 320, 3)
TWO_TILED = (240, 640, 3)  # two envs side by side
VIDEO_STEPS = 12
EPISODE_STEPS = 10
CARTPOLE_METRICS = ["abs_pole_angle", "abs_cart_position"]


def run_command(*command: str | Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYOPENGL_PLATFORM": "egl"}  # offscreen, as tests/tasks/test_rendering.py renders
    run = subprocess.run([str(c) for c in command], cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    return run


def read_mp4(path: Path) -> list[np.ndarray]:
    """Every frame of ``path``, decoded by ffmpeg. (Iterated, not ``list(reader)``: the reader's ``len`` is inf.)"""
    with imageio.get_reader(path, format="FFMPEG") as reader:
        return [frame for frame in reader]


def test_episode_video_tiles_captions_and_writes_frames_that_read_back(tmp_path):
    colours = (40, 120, 200, 250)
    frames = tuple(np.full(FRAME, colour, np.uint8) for colour in colours)
    assert tile(frames[:1]) is frames[0] and tile(frames[:2]).shape == TWO_TILED
    grid = tile(frames[:3])  # 2 x 2, row by row, the fourth cell black
    assert grid.shape == (480, 640, 3)
    assert [int(grid[r, c, 0]) for r, c in ((0, 0), (0, 320), (240, 0), (240, 320))] == [40, 120, 200, 0]

    path = tmp_path / "new folder" / "tiled.mp4"
    with EpisodeVideo(path, envs=3) as video:
        video.add(frames)  # after a reset: no rewards
        for step in range(5):  # the fourth env is not shown
            video.add(frames, torch.tensor([1.0, 0.5, 2.0, 9.0]), torch.tensor([step == 2, False, step == 4, True]))
        with pytest.raises(ValueError, match=re.escape("EpisodeVideo: 3 env(s) shown but render() gave 2 frame(s)")):
            video.add(frames[:2])
    assert video.frames == 6
    assert video.returns == [[3.0], [], [10.0]]  # env 0 ended after 3 steps of 1.0, env 2 after 5 of 2.0

    decoded = read_mp4(path)
    assert len(decoded) == 6 and all(f.shape == (480, 640, 3) and f.dtype == np.uint8 for f in decoded)
    last = decoded[-1].astype(np.float64)
    for (top, left), colour in zip(((0, 0), (0, 320), (240, 0), (240, 320)), (40, 120, 200, 0), strict=True):
        below_caption = last[top + 60 : top + 200, left + 40 : left + 280]
        assert abs(below_caption.mean() - colour) < 4, (top, left)  # H.264 is lossy
    caption = last[:18, :300]  # white text on a black band
    assert caption.max() > 200 and np.median(caption) < 20


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    """Two PPO iterations on 8 cartpole envs (observations normalized), then a video of the policy on 2 envs."""
    out_dir = tmp_path_factory.mktemp("play")
    argv = ["--task", "cartpole", "--backend", "cpu", "--num-envs", "8", "--num-workers", "0", "--num-steps", "3"]
    argv += ["--num-minibatches", "2", "--total-timesteps", "48", "--seed", "0", "--out-dir", str(out_dir)]
    argv += ["--capture-video", "--video-envs", "2", "--video-steps", str(VIDEO_STEPS)]
    return run_command(sys.executable, TRAIN, *argv), out_dir


def test_train_ppo_captures_a_video_of_its_policy(tiny):
    run, out_dir = tiny
    metrics = strict_json(out_dir / "metrics.json")
    video = metrics["video"]
    assert (video["path"], video["frames"], len(video["returns"])) == (str(out_dir / "video.mp4"), VIDEO_STEPS + 1, 2)
    assert metrics["args"]["capture_video"] and metrics["times"]["video"] > 0
    ended = "; ".join(f"env {i}: " + ", ".join(f"{r:.2f}" for r in rs) for i, rs in enumerate(video["returns"]) if rs)
    line = f"video: {out_dir / 'video.mp4'} ({VIDEO_STEPS + 1} frames); returns of the episodes that ended: "
    assert line + (ended or "none") in run.stdout.splitlines()
    frames = read_mp4(out_dir / "video.mp4")
    assert len(frames) == VIDEO_STEPS + 1 and all(frame.shape == TWO_TILED for frame in frames)


def test_play_prints_returns_writes_json_and_a_video(tiny):
    _, out_dir = tiny
    checkpoint, video, summary_path = out_dir / "checkpoint.pt", out_dir / "play.mp4", out_dir / "play.json"
    task_kwargs = json.dumps({"max_episode_steps": EPISODE_STEPS})
    argv = ["--video", video, "--video-envs", "2", "--task-kwargs", task_kwargs, "--json", summary_path]
    run = run_command(sys.executable, PLAY, checkpoint, *argv)

    summary = strict_json(summary_path)
    episodes = summary["episodes"]
    assert (summary["num_envs"], summary["policy"], summary["seed"]) == (2, "mean", 0)  # --num-envs: --video-envs
    assert (summary["checkpoint"], summary["video"]) == (str(checkpoint), str(video))
    assert sorted(e["env"] for e in episodes) == [0, 1] and summary["steps"] == max(e["length"] for e in episodes)
    assert all(e["ended"] == ("truncated" if e["length"] == EPISODE_STEPS else "terminated") for e in episodes)
    assert summary["steps"] <= EPISODE_STEPS and list(summary["task_metrics_last_half"]) == CARTPOLE_METRICS
    returns = [e["return"] for e in episodes]
    assert (summary["min_return"], summary["max_return"]) == (min(returns), max(returns))
    assert summary["mean_return"] == pytest.approx(sum(returns) / 2)

    lines = run.stdout.splitlines()
    assert "cartpole x2 on cpu, policy mean (deterministic), seed 0, at most 1000 steps" in lines
    assert [line for line in lines if line.startswith("episode ")] == [
        f"episode {n}: env {e['env']}, return {e['return']:.2f}, {e['length']} steps, {e['ended']}"
        for n, e in enumerate(episodes, 1)
    ]
    metrics = summary["task_metrics_last_half"]
    assert lines[-2] == (
        f"cartpole, policy mean (deterministic): 2 of 2 episodes finished in {summary['steps']} steps: mean return "
        f"{summary['mean_return']:.2f} (min {min(returns):.2f}, max {max(returns):.2f}), {summary['terminated']} "
        f"terminated, abs_pole_angle {metrics['abs_pole_angle']:.3f}, "
        f"abs_cart_position {metrics['abs_cart_position']:.3f}"
    )
    assert lines[-1] == f"video: {video} ({summary['steps'] + 1} frames of 2 env(s))"
    frames = read_mp4(video)  # the reset, then one frame per step
    assert len(frames) == summary["steps"] + 1 and all(frame.shape == TWO_TILED for frame in frames)


def test_play_random_without_a_finished_episode_prints_no_nan_and_writes_nulls(tiny):
    """3 steps: a pole starting within 0.05 rad of upright cannot pass 0.21 rad in 0.06 s."""
    _, out_dir = tiny
    summary_path = out_dir / "random.json"
    argv = ["--random", "--num-envs", "8", "--max-steps", "3", "--json", summary_path]
    run = run_command(sys.executable, PLAY, out_dir / "checkpoint.pt", *argv)
    assert "nan" not in run.stdout.lower() and not any(line.startswith("episode ") for line in run.stdout.splitlines())
    summary = strict_json(summary_path)
    assert (summary["policy"], summary["num_envs"], summary["steps"], summary["episodes"]) == ("random", 8, 3, [])
    assert summary["mean_return"] is summary["min_return"] is summary["max_return"] is summary["video"] is None
    assert summary["terminated"] == 0
    metrics = summary["task_metrics_last_half"]
    assert run.stdout.splitlines()[-1] == (
        f"cartpole, random actions: no episode finished in 3 steps, abs_pole_angle {metrics['abs_pole_angle']:.3f}, "
        f"abs_cart_position {metrics['abs_cart_position']:.3f}"
    )


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--video-envs", "0"], "--video-envs must be >= 1, got 0"),
        (["--video", "v.mp4", "--video-envs", "3", "--num-envs", "2"], "--num-envs (2) must be >= --video-envs (3)"),
    ],
)
def test_play_names_bad_flags(argv, message):
    run = subprocess.run(
        [sys.executable, str(PLAY), "checkpoint.pt", *argv], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert run.returncode == 2 and run.stdout == ""
    assert run.stderr.splitlines()[-1].split(": error: ", 1)[1] == message


def test_demo_records_env_0(tmp_path):
    video = tmp_path / "demo.mp4"
    argv = ["demo", "--backend", "cpu", "--num-envs", "2", "--num-workers", "0", "--steps", "5", "--video", video]
    lines = run_command(sys.executable, "-m", "gs_gym", *argv).stdout.splitlines()
    assert re.fullmatch(
        r"5 steps in \d+\.\d\d s, rendering every step: [\d,]+ env-steps/s, \d+ episodes ended", lines[-2]
    )
    assert lines[-1] == f"video: {video} (6 frames of env 0)"
    frames = read_mp4(video)
    assert len(frames) == 6 and all(frame.shape == FRAME for frame in frames)
