"""Workers die with their parent, and so does every other process the env started: killed (SIGKILL, nothing runs
in the parent) or interrupted (Ctrl-C)."""

from __future__ import annotations

import os
import signal
import textwrap

import psutil
import pytest

from tests.faults.conftest import Driver
from tests.processes import wait_until_gone

DRIVER = textwrap.dedent(
    """
    import signal
    import sys
    import torch
    from gs_gym import GenesisVectorEnv

    if __name__ == "__main__":
        # A shell that starts jobs in the background hands them SIGINT ignored; a terminal user's Python has
        # Python's own handler, which is what Ctrl-C must meet here.
        signal.signal(signal.SIGINT, signal.default_int_handler)
        env = GenesisVectorEnv({num_workers}, "cartpole", backend="cpu", num_workers={num_workers}, seed=0,
                               forward_output=False, step_timeout=None)
        env.reset(seed=0)
        print("pids", *env.worker_pids, flush=True)
        sys.stdin.readline()  # Driver.start: built ahead of its test, it waits here without using a core
        actions = torch.zeros({num_workers}, 1)
        env.step(actions)
        print("stepping", flush=True)
        while True:
            env.step(actions)
    """
)
RECIPES = {
    "killed_driver": lambda: Driver(DRIVER.format(num_workers=2)),
    "interrupted_driver": lambda: Driver(DRIVER.format(num_workers=1)),
}


@pytest.mark.prebuilt("killed_driver")
def test_workers_die_when_the_parent_is_killed(prebuilt):
    driver = prebuilt("killed_driver")
    driver.start()
    assert len(driver.worker_pids) == 2 and wait_until_gone(driver.worker_pids, 0.0) == driver.worker_pids
    # every process the env started, the workers' fork server and multiprocessing's helpers included
    descendants = [child.pid for child in psutil.Process(driver.process.pid).children(recursive=True)]
    assert set(driver.worker_pids) < set(descendants)
    os.kill(driver.process.pid, signal.SIGKILL)
    driver.process.wait()
    assert wait_until_gone(driver.worker_pids, 5.0) == []
    assert wait_until_gone(descendants, 5.0) == []


@pytest.mark.prebuilt("interrupted_driver")
def test_ctrl_c_stops_the_parent_and_its_workers(prebuilt):
    driver = prebuilt("interrupted_driver")
    driver.start()
    os.killpg(driver.process.pid, signal.SIGINT)  # what Ctrl-C in a terminal does: the workers get it too
    _, stderr = driver.process.communicate(timeout=60)
    assert driver.process.returncode == -signal.SIGINT, stderr[-2000:]
    assert "KeyboardInterrupt" in stderr.splitlines(), stderr[-2000:]
    assert wait_until_gone(driver.worker_pids, 5.0) == []
