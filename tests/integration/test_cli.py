"""``python -m gs_gym info | compile | demo | bench`` on the CPU backend: exit codes, output, JSON schema, plot."""

from __future__ import annotations

import json
import re
import subprocess
import sys

import pytest
import torch


def gs_gym(*args: str, timeout: float = 600) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "gs_gym", *args], capture_output=True, text=True, timeout=timeout)


def test_info_json():
    result = gs_gym("info", "--json")
    assert result.returncode == 0, result.stderr
    info = json.loads(result.stdout)
    assert sorted(info) == ["cuda_ipc", "gpus", "kernel_cache", "python", "versions"]
    assert sorted(info["versions"]) == ["genesis-world", "gs-gym", "gymnasium", "numpy", "quadrants", "torch"]
    assert info["versions"]["genesis-world"] == "1.4.5"
    assert sorted(info["kernel_cache"]) == ["bytes", "path"]
    if not info["gpus"]:
        assert info["cuda_ipc"].startswith("no: torch sees no CUDA device")


def test_info_text():
    result = gs_gym("info")
    assert result.returncode == 0, result.stderr
    assert re.search(r"^versions: gs-gym 0\.1\.0, genesis-world 1\.4\.5, ", result.stdout, re.M)
    assert re.search(r"^CUDA IPC usable: ", result.stdout, re.M)


def test_demo_reports_throughput():
    result = gs_gym("demo", "--backend", "cpu", "--num-envs", "8", "--steps", "50")
    assert result.returncode == 0, result.stderr[-2000:]
    lines = result.stdout.strip().splitlines()
    assert re.fullmatch(r"task cartpole: 8 envs on 1 worker\(s\) \(cpu backend\), built in \d+\.\d s", lines[-2])
    assert re.fullmatch(r"50 steps in \d+\.\d\d s: [\d,]+ env-steps/s, \d+ episodes ended", lines[-1])


def test_bench_writes_json_and_png(tmp_path):
    result = gs_gym(
        "bench",
        "--backend",
        "cpu",
        "--n-envs",
        "8",
        "--workers",
        "1",
        "--seconds",
        "0.05",
        "--repeats",
        "2",
        "--out",
        str(tmp_path),
    )
    assert result.returncode == 0, result.stderr[-2000:]
    report = json.loads((tmp_path / "bench.json").read_text())
    assert sorted(report) == ["backend", "machine", "rows", "settings", "task"]
    assert [row["config"] for row in report["rows"]] == ["raw task", "in-process env", "1 worker(s), shared memory"]
    for row in report["rows"]:
        assert sorted(row) == [
            "busy_us_per_step",
            "config",
            "env_steps_per_s",
            "n_envs",
            "raw",
            "repeats_us",
            "us_per_step",
            "workers",
        ]
        assert row["n_envs"] == 8 and len(row["repeats_us"]) == 2
        # the workers' own time per step: none for the raw task, some but less than the step for the env paths
        assert (row["busy_us_per_step"] is None) == row["raw"]
        assert row["raw"] or 0 < row["busy_us_per_step"] < row["us_per_step"]
        assert row["env_steps_per_s"] == pytest.approx(8 / (row["us_per_step"] / 1e6), rel=1e-12)
    assert (tmp_path / "bench.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "| n_envs | raw task | in-process env | 1 worker(s), shared memory |" in result.stdout


def test_compile_skips_the_tasks_this_session_compiled():
    """The suite's conftest compiled every task's CPU kernels before the first test: the cache records them all."""
    result = gs_gym("compile", "--backend", "cpu")
    assert result.returncode == 0, result.stderr[-2000:]
    lines = result.stdout.strip().splitlines()
    assert lines[0].startswith("compiling cartpole, franka-reach, go2-walk on the cpu backend into ")
    assert lines[1:] == [
        f"{task}: already compiled with these versions (--force compiles it again)"
        for task in ("cartpole", "franka-reach", "go2-walk")
    ]


def test_compile_names_an_unknown_task():
    result = gs_gym("compile", "--task", "cartpole", "walker", "--backend", "cpu")
    assert result.returncode == 2 and result.stdout == ""
    assert result.stderr == (
        "gs-gym compile: unknown task 'walker'; expected some of ['cartpole', 'franka-reach', 'go2-walk']\n"
    )


@pytest.mark.skipif(torch.cuda.is_available(), reason="needs a machine without CUDA, where a gpu build fails")
def test_compile_reports_a_task_whose_build_failed():
    result = gs_gym("compile", "--task", "cartpole", "--backend", "gpu", "--force")
    assert result.returncode == 1, result.stderr[-2000:]
    report = result.stdout.splitlines()
    assert re.fullmatch(r"cartpole: failed after \d+ s, exit status 1:", report[1])
    assert report[-1] == "ValueError: backend: 'gpu' needs a CUDA device and torch sees none; use backend='cpu'"
