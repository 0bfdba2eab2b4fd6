import re

import numpy as np
import pytest
import torch

from gs_gym.vector.validation import as_action_tensor, check_reset_mask, check_seed, non_finite_actions_error


def test_actions_are_converted_to_float32_tensors():
    out = as_action_tensor(np.zeros((3, 1), dtype=np.float64), (3, 1))
    assert out.dtype == torch.float32 and out.shape == (3, 1)
    assert torch.equal(as_action_tensor([[1], [2], [3]], (3, 1)), torch.tensor([[1.0], [2.0], [3.0]]))


@pytest.mark.parametrize(
    ("actions", "error", "message"),
    [
        (torch.zeros(3, 2), ValueError, "actions: expected shape (3, 1), got (3, 2)"),
        (torch.zeros(3), ValueError, "actions: expected shape (3, 1), got (3,)"),
        (np.zeros((2, 1), dtype=np.float32), ValueError, "actions: expected shape (3, 1), got (2, 1)"),
        (
            torch.zeros(3, 1, dtype=torch.bool),
            ValueError,
            "actions: expected a real-valued tensor, got dtype torch.bool",
        ),
        (np.array([["a"], ["b"], ["c"]]), ValueError, "actions: expected a real-valued array, got dtype <U1"),
        ("left", TypeError, "actions: expected a torch.Tensor or numpy.ndarray, got str"),
    ],
)
def test_bad_actions_are_named(actions, error, message):
    with pytest.raises(error, match=f"^{re.escape(message)}$"):
        as_action_tensor(actions, (3, 1))


def test_action_values_are_left_to_the_shards():
    """Looking at values would wait for the device; the shards check them with the step's own wait."""
    out = as_action_tensor(torch.tensor([[float("nan")]]), (1, 1))
    assert torch.isnan(out).all()


def test_non_finite_actions_error_names_ten_envs_and_counts_the_rest():
    assert str(non_finite_actions_error([4, 6])) == (
        "actions: expected finite values, got NaN or inf for env(s) [4, 6] (the step ran with them as 0)"
    )
    assert str(non_finite_actions_error(list(range(12)))) == (
        "actions: expected finite values, got NaN or inf for env(s) [0, 1, 2, 3, 4, 5, 6, 7, 8, 9] and 2 more "
        "(the step ran with them as 0)"
    )


def test_seeds():
    assert check_seed(None, 3) is None
    assert check_seed(np.int64(5), 3) == 5
    assert check_seed([1, None, 3], 3) == [1, None, 3]
    with pytest.raises(ValueError, match=r"^seed: expected a list of num_envs=3 seeds, got length 2$"):
        check_seed([1, 2], 3)
    with pytest.raises(ValueError, match=r"^seed: expected a non-negative int, got -1$"):
        check_seed(-1, 3)
    with pytest.raises(ValueError, match=r"^seed: expected non-negative ints or None in the list, got 1\.5$"):
        check_seed([1, 1.5, 2], 3)
    with pytest.raises(TypeError, match=r"^seed: expected None, an int or a list of ints, got float$"):
        check_seed(1.5, 3)


def test_reset_masks():
    assert check_reset_mask(None, 2) is None
    assert check_reset_mask({}, 2) is None
    np.testing.assert_array_equal(check_reset_mask({"reset_mask": torch.tensor([True, False])}, 2), [True, False])
    cases = [
        ({"reset_mask": np.array([1, 0])}, TypeError, "options['reset_mask']: expected dtype bool, got int64"),
        (
            {"reset_mask": torch.tensor([1, 0])},
            TypeError,
            "options['reset_mask']: expected dtype torch.bool, got torch.int64",
        ),
        (
            {"reset_mask": [True, False]},
            TypeError,
            "options['reset_mask']: expected a numpy or torch bool array, got list",
        ),
        ({"reset_mask": np.array([True])}, ValueError, "options['reset_mask']: expected shape (2,), got (1,)"),
        (
            {"reset_mask": np.array([False, False])},
            ValueError,
            "options['reset_mask']: expected at least one True entry, got none",
        ),
        ({"mask": np.array([True, True])}, ValueError, "options: unknown key(s) ['mask']; expected only 'reset_mask'"),
    ]
    for options, error, message in cases:
        with pytest.raises(error, match=f"^{re.escape(message)}$"):
            check_reset_mask(options, 2)


def test_reset_mask_is_copied():
    mask = np.array([True, False])
    checked = check_reset_mask({"reset_mask": mask}, 2)
    mask[1] = True
    assert checked.tolist() == [True, False]
