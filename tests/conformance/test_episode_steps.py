"""``GenesisVectorEnv.set_episode_steps``: the per-env episode step counters that the time limit counts.

Every behaviour test runs in-process, on one worker and on two (an uneven 4 + 3 split of the 7 envs), on the
session's shared cartpole envs (``tests/conftest.py``: ``max_episode_steps=8``). Counters are read back with
``get_attr("episode_steps")``. A zero action keeps cartpole's pole up for longer than these tests step, so every
done here is a truncation.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from gs_gym import GenesisVectorEnv
from gs_gym.errors import StepPendingError
from tests.conftest import MAX_EPISODE_STEPS, NUM_ENVS

WORKERS = [0, 1, 2]
ZEROS = torch.zeros(NUM_ENVS, 1)
CHOSEN = [1, 4, 6]
"""Envs set to their last step: in both workers' ranges under the 4 + 3 split."""
LAST = [MAX_EPISODE_STEPS - 1 if env in CHOSEN else 0 for env in range(NUM_ENVS)]


def counters(env: GenesisVectorEnv) -> list[int]:
    """Every env's episode step counter, through the public API (one tensor per worker, in env order)."""
    return torch.cat([steps.cpu() for steps in env.get_attr("episode_steps")]).tolist()


@pytest.mark.parametrize("num_workers", WORKERS)
@pytest.mark.parametrize("mode", ["next_step", "same_step"])
def test_envs_on_their_last_step_are_truncated_by_the_next(shared_env, num_workers, mode):
    env = shared_env(num_workers, mode)
    env.reset(seed=0)
    env.set_episode_steps(torch.tensor(LAST))
    assert counters(env) == LAST

    _, _, terminated, truncated, info = env.step(ZEROS)
    assert truncated.tolist() == [env in CHOSEN for env in range(NUM_ENVS)]
    assert not terminated.any()
    if mode == "same_step":  # reset within the step: counting from 0 again
        assert info["_final_obs"].tolist() == truncated.tolist()
        assert counters(env) == [0 if env in CHOSEN else 1 for env in range(NUM_ENVS)]
    else:  # reset by the next step
        assert counters(env) == [MAX_EPISODE_STEPS if env in CHOSEN else 1 for env in range(NUM_ENVS)]
        _, _, terminated, truncated, _ = env.step(ZEROS)
        assert not truncated.any() and not terminated.any()
        assert counters(env) == [0 if env in CHOSEN else 2 for env in range(NUM_ENVS)]


@pytest.mark.parametrize("num_workers", WORKERS)
def test_spread_counters_spread_the_time_limits(shared_env, num_workers):
    """Env ``i`` set to ``s[i]`` is truncated ``MAX_EPISODE_STEPS - s[i]`` steps later and then every episode
    (``MAX_EPISODE_STEPS + 1`` steps under NEXT_STEP: the step that resets it counts as the new episode's step 0)."""
    env = shared_env(num_workers)
    env.reset(seed=0)
    steps = np.array([0, 7, 3, 5, 1, 6, 2], dtype=np.int32)  # numpy, int32: any integer dtype is taken
    env.set_episode_steps(steps)
    truncations = []
    for _ in range(2 * MAX_EPISODE_STEPS + 1):
        _, _, terminated, truncated, _ = env.step(ZEROS)
        assert not terminated.any()
        truncations.append(truncated.tolist())
    for index, start in enumerate(steps.tolist()):
        first = MAX_EPISODE_STEPS - start - 1  # 0-based index of the step that truncates it
        expected = {first, first + MAX_EPISODE_STEPS + 1}
        assert [t for t, row in enumerate(truncations) if row[index]] == sorted(
            t for t in expected if t < len(truncations)
        ), index


@pytest.mark.parametrize(
    "steps",
    [
        [3] * NUM_ENVS,
        (3,) * NUM_ENVS,
        np.full(NUM_ENVS, 3, dtype=np.uint8),
        torch.full((NUM_ENVS,), 3, dtype=torch.int16),
        torch.full((NUM_ENVS,), 3, dtype=torch.uint64),
    ],
    ids=["list", "tuple", "numpy uint8", "torch int16", "torch uint64"],
)
def test_integer_inputs_are_taken(shared_env, steps):
    env = shared_env(0)
    env.reset(seed=0)
    env.set_episode_steps(steps)
    assert counters(env) == [3] * NUM_ENVS


BAD = [
    (torch.zeros(NUM_ENVS), TypeError, "steps: expected an integer dtype, got torch.float32"),
    (torch.zeros(NUM_ENVS, dtype=torch.bool), TypeError, "steps: expected an integer dtype, got torch.bool"),
    (np.zeros(NUM_ENVS), TypeError, "steps: expected an integer dtype, got float64"),
    (np.zeros(NUM_ENVS, dtype="timedelta64[s]"), TypeError, "steps: expected an integer dtype, got timedelta64[s]"),
    ([True] * NUM_ENVS, TypeError, "steps: expected ints, got a bool in the list"),
    (3, TypeError, "steps: expected a torch.Tensor, numpy.ndarray or list of ints, got int"),
    (None, TypeError, "steps: expected a torch.Tensor, numpy.ndarray or list of ints, got NoneType"),
    (
        torch.zeros(NUM_ENVS, dtype=torch.int64, device="meta"),
        TypeError,
        "steps: expected a dense integer tensor with data, got a meta tensor (no data)",
    ),
    (torch.zeros(NUM_ENVS - 1, dtype=torch.int64), ValueError, f"steps: expected shape ({NUM_ENVS},), got (6,)"),
    (torch.zeros(NUM_ENVS, 1, dtype=torch.int64), ValueError, f"steps: expected shape ({NUM_ENVS},), got (7, 1)"),
    ([], ValueError, f"steps: expected shape ({NUM_ENVS},), got (0,)"),
    (
        torch.tensor([0, 0, -1, 0, 0, 0, MAX_EPISODE_STEPS]),
        ValueError,
        f"steps: expected values in [0, max_episode_steps={MAX_EPISODE_STEPS}), got env 2: -1, env 6: 8",
    ),
    (
        np.full(NUM_ENVS, 2**64 - 1, dtype=np.uint64),
        ValueError,
        f"steps: expected values in [0, max_episode_steps={MAX_EPISODE_STEPS}), got env 0: 18446744073709551615, ",
    ),
]


@pytest.mark.parametrize("num_workers", WORKERS)
@pytest.mark.parametrize(
    ("steps", "error", "message"),
    BAD,
    ids=[
        "float tensor", "bool tensor", "float array", "timedelta64", "bool list", "int", "None", "meta",
        "short", "2-d", "empty list", "out of range", "uint64 max",
    ],
)  # fmt: skip
def test_bad_steps_are_named_and_change_nothing(shared_env, num_workers, steps, error, message):
    env = shared_env(num_workers)
    env.reset(seed=0)
    env.set_episode_steps([2] * NUM_ENVS)
    with pytest.raises(error) as caught:
        env.set_episode_steps(steps)
    assert str(caught.value).startswith(message), str(caught.value)
    assert counters(env) == [2] * NUM_ENVS
    _, _, _, truncated, _ = env.step(ZEROS)
    assert not truncated.any()
    assert counters(env) == [3] * NUM_ENVS


@pytest.mark.parametrize("num_workers", WORKERS)
def test_refused_while_a_step_is_pending(shared_env, num_workers):
    env = shared_env(num_workers)
    env.reset(seed=0)
    env.step_async(ZEROS)
    with pytest.raises(StepPendingError, match=r"^set_episode_steps: a step is pending; call step_wait\(\) first"):
        env.set_episode_steps(LAST)
    env.step_wait()
    assert counters(env) == [1] * NUM_ENVS
