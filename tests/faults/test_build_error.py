"""A task that raises while building: ``BuildError`` with the worker's own traceback, raised as soon as that worker
fails (the other is not waited for), and no worker process left behind."""

from __future__ import annotations

import threading

import pytest

from gs_gym import BuildError
from gs_gym.errors import RemoteTraceback
from gs_gym.transport import pool as pool_module
from tests.faults.conftest import make_env
from tests.processes import wait_until_gone


def test_build_error_carries_the_worker_traceback_and_leaves_no_process(monkeypatch, _prebuilder):
    # (_prebuilder: the other tests' envs start building meanwhile)
    started: list[int] = []
    original_init = pool_module._Worker.__init__
    this_thread = threading.get_ident()

    def recording_init(self, *args, **kwargs):  # note the workers this test starts (envs build on other threads)
        original_init(self, *args, **kwargs)
        if threading.get_ident() == this_thread:
            started.append(self.process.pid)

    monkeypatch.setattr(pool_module._Worker, "__init__", recording_init)
    with pytest.raises(BuildError) as caught:
        make_env(4, num_workers=2, task_kwargs={"fault": "build", "fault_env_offset": 2})
    error = caught.value
    assert str(error) == (
        "worker 1 (cpu): RuntimeError: faulty-cartpole: injected build fault at build (env_offset 2) (during build)"
    )
    assert (error.worker, error.device, error.remote_type) == (1, "cpu", "RuntimeError")
    assert isinstance(error.__cause__, RemoteTraceback)
    traceback = error.__cause__.formatted
    assert 'raise RuntimeError(self._fail("at build"))' in traceback
    assert traceback.rstrip().endswith("RuntimeError: faulty-cartpole: injected build fault at build (env_offset 2)")
    assert "--- traceback in the worker ---" in str(error.__cause__)
    assert len(started) == 2
    assert wait_until_gone(started, 5.0) == []  # worker 0, still building, was terminated too
