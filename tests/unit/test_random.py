"""EnvRandom's contract, on its torch implementation (Genesis is not initialized here; test_random_kernel.py checks
that the quadrants kernels give the same bits)."""

import math

import pytest
import torch

from gs_gym.tasks.random import EnvRandom, cos_quarter_q31, mix32, neg_log_unit_q31, reference_words, seed_keys


def lowbias32(x: int) -> int:
    x ^= x >> 16
    x = (x * 0x7FEB352D) & 0xFFFFFFFF
    x ^= x >> 15
    x = (x * 0x846CA68B) & 0xFFFFFFFF
    return x ^ (x >> 16)


def mask(num_envs: int, *envs: int) -> torch.Tensor:
    m = torch.zeros(num_envs, dtype=torch.bool)
    m[list(envs)] = True
    return m


def everyone(num_envs: int) -> torch.Tensor:
    return torch.ones(num_envs, dtype=torch.bool)


def seeded(num_envs: int, base_seed: int, global_offset: int = 0) -> EnvRandom:
    rng = EnvRandom(num_envs, global_offset, "cpu")
    rng.seed_range(base_seed)
    return rng


def test_mix32_matches_the_lowbias32_reference():
    values = [0, 1, 2, 12345, 0x7FFFFFFF, 0xFFFFFFFF, 0xDEADBEEF]
    got = mix32(torch.tensor(values, dtype=torch.int64)).tolist()
    assert got == [lowbias32(v) for v in values]


def test_hash_words_are_the_documented_sponge():
    seed, counter = 2**40 + 77, 2**33 + 5
    state = torch.tensor([[seed_keys([seed], "cpu").item(), counter]], dtype=torch.int64)
    key = lowbias32(lowbias32(0x9E3779B9 ^ (seed & 0xFFFFFFFF)) ^ (seed >> 32))
    stream = lowbias32(lowbias32(key ^ (counter & 0xFFFFFFFF)) ^ (counter >> 32))
    expected = [lowbias32(lowbias32(stream ^ j)) for j in range(4)]
    assert reference_words(state, 4).tolist() == [expected]


def test_streams_do_not_depend_on_how_envs_are_split():
    whole = seeded(6, 42)
    left, right = seeded(4, 42), seeded(2, 42, global_offset=4)
    for draw_mask in (everyone(6), mask(6, 1, 4), everyone(6)):
        expected = [whole.uniform(draw_mask, (3,)), whole.normal(draw_mask, (2, 2))]
        got_left = [left.uniform(draw_mask[:4], (3,)), left.normal(draw_mask[:4], (2, 2))]
        got_right = [right.uniform(draw_mask[4:], (3,)), right.normal(draw_mask[4:], (2, 2))]
        for e, a, b in zip(expected, got_left, got_right, strict=True):
            assert torch.equal(torch.cat([a, b]), e)


def test_a_draw_for_some_envs_leaves_the_others_streams_alone():
    a, b = seeded(4, 7), seeded(4, 7)
    first = a.uniform(mask(4, 0, 2), (5,))  # only envs 0 and 2 advance
    assert torch.equal(first, b.uniform(everyone(4), (5,)))  # every row is computed, whatever the mask
    second_a, second_b = a.uniform(everyone(4), (5,)), b.uniform(everyone(4), (5,))
    assert torch.equal(second_a[[0, 2]], second_b[[0, 2]])  # envs 0 and 2 are at their second draw in both
    assert torch.equal(second_a[[1, 3]], first[[1, 3]])  # envs 1 and 3 had not advanced in a
    assert not torch.equal(second_a[[1, 3]], second_b[[1, 3]])


def test_a_draw_with_an_empty_mask_advances_nothing():
    a, b = seeded(3, 5), seeded(3, 5)
    a.normal(mask(3), (4,))
    assert torch.equal(a.normal(everyone(3), (4,)), b.normal(everyone(3), (4,)))


def test_seed_restarts_a_stream_and_matches_seed_range():
    a, b = seeded(3, 100, global_offset=10), seeded(3, 0, global_offset=10)
    first = a.uniform(everyone(3), (4,))  # env g gets seed 100 + g, so local env 1 (global 11) gets 111
    b.uniform(everyone(3), (4,))
    b.seed([None, 111, None])
    assert torch.equal(b.uniform(mask(3, 1), (4,))[1], first[1])
    b.seed([None, 111, None])  # seeding again restarts the stream
    assert torch.equal(b.uniform(mask(3, 1), (4,))[1], first[1])


def test_a_seed_list_with_none_keeps_those_envs_streams():
    a, b = seeded(3, 9), seeded(3, 9)
    a.uniform(everyone(3), (2,))
    b.uniform(everyone(3), (2,))
    a.seed([None, 12345, None])
    got, expected = a.uniform(everyone(3), (2,)), b.uniform(everyone(3), (2,))
    assert torch.equal(got[[0, 2]], expected[[0, 2]])
    assert not torch.equal(got[1], expected[1])


def test_seed_list_must_have_one_entry_per_env_and_no_negative_seed():
    rng = EnvRandom(3, 0, "cpu")
    with pytest.raises(ValueError, match="expected 3 entries"):
        rng.seed([1, 2])
    with pytest.raises(ValueError, match="non-negative"):
        rng.seed([1, -2, None])


def test_seeds_of_64_bits_and_more_are_deterministic_and_folded_modulo_2_64():
    def first_draw(seed: int) -> torch.Tensor:
        rng = EnvRandom(1, 0, "cpu")
        rng.seed([seed])
        return rng.uniform(everyone(1), (8,))

    huge = 2**64 + 3
    assert torch.equal(first_draw(huge), first_draw(huge))
    assert torch.equal(first_draw(huge), first_draw(3))
    assert torch.equal(first_draw(2**200 + 3), first_draw(3))
    assert not torch.equal(first_draw(2**63 + 3), first_draw(3))
    assert not torch.equal(first_draw(2**32 + 3), first_draw(3))  # the high word counts
    ranged = seeded(2, 2**64 - 1)  # envs get 2**64 - 1 and 2**64, which folds to 0
    assert torch.equal(ranged.uniform(everyone(2), (8,))[1], first_draw(0)[0])


def test_uniform_respects_bounds_and_covers_the_interval():
    rng = seeded(1000, 0)
    values = rng.uniform(everyone(1000), (4,), -0.5, 0.5)
    assert values.shape == (1000, 4) and values.dtype == torch.float32
    assert values.min() >= -0.5 and values.max() < 0.5
    assert abs(values.mean().item()) < 0.02 and values.min() < -0.49 and values.max() > 0.49
    units = rng.uniform(everyone(1000), (4,))
    assert torch.equal(units * 2**24, (units * 2**24).floor())  # multiples of 2**-24


def test_uniform_takes_tensor_bounds_broadcast_to_the_shape():
    rng = seeded(500, 1)
    low, high = torch.tensor([0.0, 10.0, -3.0]), torch.tensor([[1.0, 20.0, -2.0]] * 2)
    values = rng.uniform(everyone(500), (2, 3), low, high)
    assert values.shape == (500, 2, 3)
    assert (values >= low).all() and (values < high).all()
    assert (values.amin(dim=(0, 1)) < low + 0.05 * (high[0] - low)).all()
    assert (values.amax(dim=(0, 1)) > high[0] - 0.05 * (high[0] - low)).all()


def test_uniform_never_returns_high_even_when_the_width_is_one_ulp():
    low = 1000.0
    high = torch.nextafter(torch.tensor(low), torch.tensor(math.inf)).item()  # the next float32 above low
    values = seeded(1000, 2).uniform(everyone(1000), (4,), low, high)
    assert (values == low).all()


def test_normal_has_unit_variance():
    rng = seeded(4000, 3)
    values = rng.normal(everyone(4000), (2,), std=2.0)
    assert values.shape == (4000, 2) and values.dtype == torch.float32
    assert abs(values.mean().item()) < 0.1 and abs(values.std().item() - 2.0) < 0.1
    scaled = rng.normal(everyone(4000), (2,), std=torch.tensor([0.5, 3.0]))
    assert abs(scaled[:, 0].std().item() - 0.5) < 0.03 and abs(scaled[:, 1].std().item() - 3.0) < 0.15


def test_normal_is_gaussian_beyond_its_variance():
    values = seeded(20000, 4).normal(everyone(20000), (5,)).flatten().double()
    assert abs(values.mean().item()) < 0.01 and abs(values.var().item() - 1.0) < 0.02
    assert abs((values**4).mean().item() - 3.0) < 0.1  # kurtosis of a Gaussian
    within_one = (values.abs() < 1.0).double().mean().item()
    assert abs(within_one - 0.6827) < 0.01
    assert values.abs().max() <= math.sqrt(48 * math.log(2))


def test_the_fixed_point_logarithm_and_cosine_are_accurate():
    bits = torch.cat([torch.arange(0, 2**24, 997), torch.tensor([0, 1, 2**23 - 1, 2**23, 2**24 - 2, 2**24 - 1])])
    neg_log = neg_log_unit_q31(bits).double() * 2**-31
    assert (neg_log - -torch.log((bits.double() + 1) * 2**-24)).abs().max() < 1e-8
    angle = torch.cat([torch.arange(0, 2**23, 499), torch.tensor([1, 2**22, 2**23 - 1])])
    cos = cos_quarter_q31(angle).double() * 2**-31
    assert (cos - torch.cos(angle.double() * (math.pi / 2 / 2**23))).abs().max() < 1e-8


def test_draws_take_a_bool_mask_of_one_entry_per_env():
    rng = seeded(4, 0)
    with pytest.raises(ValueError, match="bool tensor of shape"):
        rng.uniform(torch.tensor([0, 2]), (3,))
    with pytest.raises(ValueError, match="bool tensor of shape"):
        rng.normal(everyone(3), (3,))
