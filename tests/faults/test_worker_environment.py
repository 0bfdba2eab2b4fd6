"""A worker starts with the environment its env's process has when the env is built, whether it is forked from the
fork server of CPU workers (which imported torch and Genesis with the environment of its own start) or spawned."""

from __future__ import annotations

from gs_gym import GenesisVectorEnv
from tests.faults.faulty_task import FaultyCartPole

VARIABLE = "GS_GYM_TEST_WORKER_ENVIRONMENT"


def build() -> GenesisVectorEnv:
    return GenesisVectorEnv(2, FaultyCartPole, backend="cpu", num_workers=2, seed=0, forward_output=False)


def test_a_variable_set_after_earlier_workers_started_reaches_the_next_workers(monkeypatch):
    monkeypatch.delenv(VARIABLE, raising=False)
    before = build()
    try:
        monkeypatch.setenv(VARIABLE, "set between the two envs")
        after = build()
        try:
            assert before.call("environment_variable", VARIABLE) == (None, None)
            assert after.call("environment_variable", VARIABLE) == ("set between the two envs",) * 2
        finally:
            after.close()
        monkeypatch.delenv(VARIABLE)
        again = build()
        try:
            assert again.call("environment_variable", VARIABLE) == (None, None)
        finally:
            again.close()
    finally:
        before.close()
