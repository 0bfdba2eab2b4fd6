"""The adapters' requirements on the vector env they wrap: exact messages that say what to do instead."""

from __future__ import annotations

import re

import pytest
from gymnasium.vector import AutoresetMode

from gs_gym import GenesisVectorEnv
from gs_gym.adapters.requirements import AdapterRequirements

SB3_LIKE = AdapterRequirements("Sb3VecEnv", "numpy", "SB3 works on numpy arrays", "SB3 wants it")


def unbuilt_env(output: str, mode: AutoresetMode) -> GenesisVectorEnv:
    """A GenesisVectorEnv with only the attributes the check reads (no workers, no scene)."""
    env = object.__new__(GenesisVectorEnv)
    env.output, env.autoreset_mode = output, mode
    return env


@pytest.mark.parametrize(
    ("venv", "error", "message"),
    [
        (
            "not an env",
            TypeError,
            "Sb3VecEnv: expected a gs_gym.GenesisVectorEnv, got str (pass the unwrapped vector "
            "env, or use Sb3VecEnv.make(num_envs, ...))",
        ),
        (
            unbuilt_env("torch", AutoresetMode.SAME_STEP),
            ValueError,
            "Sb3VecEnv: the GenesisVectorEnv must be built "
            "with output='numpy', got output='torch' (SB3 works on numpy arrays; or use Sb3VecEnv.make(num_envs, ...))",
        ),
        (
            unbuilt_env("numpy", AutoresetMode.NEXT_STEP),
            ValueError,
            "Sb3VecEnv: the GenesisVectorEnv must be built "
            "with autoreset_mode=AutoresetMode.SAME_STEP, got AutoresetMode.NEXT_STEP (SB3 wants it; or use "
            "Sb3VecEnv.make(num_envs, ...))",
        ),
    ],
)
def test_check_venv_names_what_is_wrong(venv, error, message):
    with pytest.raises(error, match=f"^{re.escape(message)}$"):
        SB3_LIKE.check_venv(venv)


def test_check_venv_accepts_a_fitting_env():
    SB3_LIKE.check_venv(unbuilt_env("numpy", AutoresetMode.SAME_STEP))


@pytest.mark.parametrize("mode", [AutoresetMode.SAME_STEP, "SameStep", "SAME_STEP", "same_step"])
def test_make_kwargs_sets_output_and_mode(mode):
    assert SB3_LIKE.make_kwargs({"seed": 3, "autoreset_mode": mode}) == {
        "seed": 3,
        "output": "numpy",
        "autoreset_mode": AutoresetMode.SAME_STEP,
    }


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"output": "torch"}, "Sb3VecEnv.make: output must be 'numpy' (SB3 works on numpy arrays), got 'torch'"),
        (
            {"autoreset_mode": "next_step"},
            "Sb3VecEnv.make: autoreset_mode must be AutoresetMode.SAME_STEP (SB3 wants it), got 'next_step'",
        ),
    ],
)
def test_make_kwargs_refuses_other_settings(kwargs, message):
    given = dict(kwargs)
    with pytest.raises(ValueError, match=f"^{re.escape(message)}$"):
        SB3_LIKE.make_kwargs(given)
    assert given == kwargs  # the caller's dict is left as it was
