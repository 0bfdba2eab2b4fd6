"""Which tasks ``gs-gym compile`` compiles again (those the cache's marker does not record with the current versions
for the backend asked for), and in which order."""

from __future__ import annotations

import json
import subprocess
import time

from gs_gym import precompile
from gs_gym.precompile import MARKER_NAME, Variant, compile_tasks, package_versions, pending_tasks, read_marker

VERSIONS = {"gs-gym": "0.1.0", "genesis-world": "1.4.5", "quadrants": "1.3.3", "torch": "2.13.0"}


def test_a_task_recorded_with_other_versions_or_another_backend_is_pending():
    recorded = {
        "cartpole/cpu": VERSIONS,
        "go2-walk/cpu": {**VERSIONS, "quadrants": "1.3.2"},
        "franka-reach/gpu": VERSIONS,
    }
    assert pending_tasks(["cartpole", "go2-walk", "franka-reach"], "cpu", recorded, VERSIONS) == [
        "go2-walk",
        "franka-reach",
    ]
    assert pending_tasks(["cartpole", "franka-reach"], "gpu", recorded, VERSIONS) == ["cartpole"]


def test_an_unreadable_marker_records_nothing(tmp_path):
    assert read_marker(tmp_path) == {}
    (tmp_path / MARKER_NAME).write_text("{not json")
    assert read_marker(tmp_path) == {}
    (tmp_path / MARKER_NAME).write_text("[1, 2]")
    assert read_marker(tmp_path) == {}


def test_recorded_tasks_are_skipped_without_starting_a_process(tmp_path):
    (tmp_path / MARKER_NAME).write_text(json.dumps({"cartpole/cpu": package_versions()}))
    seen = []
    results = compile_tasks(["cartpole"], "cpu", on_result=seen.append, cache=tmp_path)
    assert [(result.task, result.status, result.seconds) for result in results] == [("cartpole", "skipped", 0.0)]
    assert seen == results


class FakeChildren:
    """Stands in for ``subprocess.run`` in ``gs_gym.precompile``: records each child's arguments and when it started
    and ended; the child of ``slow`` (its task argument) takes 0.3 s, the others none."""

    def __init__(self, slow: str) -> None:
        self.slow = slow
        self.runs: list[tuple[list[str], float, float]] = []

    def __call__(self, argv, **kwargs):
        start = time.monotonic()
        if argv[3] == self.slow and len(argv) == 5:
            time.sleep(0.3)
        self.runs.append((argv[3:], start, time.monotonic()))
        return subprocess.CompletedProcess(argv, 0, stdout="")


def test_a_variant_is_compiled_after_its_task_and_recorded_under_its_options(tmp_path, monkeypatch):
    children = FakeChildren(slow="go2-walk")
    monkeypatch.setattr(precompile.subprocess, "run", children)
    variant = Variant("go2-walk", {"randomization": {"push_velocity": 0.5}})
    results = compile_tasks(["cartpole", "go2-walk"], "cpu", variants=[variant], jobs=2, cache=tmp_path)

    name = 'go2-walk {"randomization": {"push_velocity": 0.5}}'
    assert variant.name == name
    assert [(result.task, result.status) for result in results] == [
        ("cartpole", "compiled"),
        ("go2-walk", "compiled"),
        (name, "compiled"),
    ]
    started = {" ".join(argv): (start, end) for argv, start, end in children.runs}
    assert sorted(started) == [
        "cartpole cpu",
        "go2-walk cpu",
        'go2-walk cpu {"randomization": {"push_velocity": 0.5}}',
    ]
    # the task with a variant starts first, and its variant only once it has ended (cartpole's slot was free)
    assert started["go2-walk cpu"][0] <= started["cartpole cpu"][0]
    assert started['go2-walk cpu {"randomization": {"push_velocity": 0.5}}'][0] >= started["go2-walk cpu"][1]
    assert set(read_marker(tmp_path)) == {"cartpole/cpu", "go2-walk/cpu", f"{name}/cpu"}

    children.runs.clear()
    again = compile_tasks(["go2-walk"], "cpu", variants=[variant], cache=tmp_path)
    assert [result.status for result in again] == ["skipped", "skipped"] and children.runs == []
