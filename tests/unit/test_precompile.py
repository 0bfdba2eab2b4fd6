"""Which tasks ``gs-gym compile`` compiles again: those the cache's marker does not record with the current
versions for the backend asked for."""

from __future__ import annotations

import json

from gs_gym.precompile import MARKER_NAME, compile_tasks, package_versions, pending_tasks, read_marker

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
