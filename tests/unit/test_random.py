import torch

from gs_gym.tasks.random import EnvRandom, mix32


def test_mix32_matches_the_lowbias32_reference():
    def reference(x: int) -> int:
        x ^= x >> 16
        x = (x * 0x7FEB352D) & 0xFFFFFFFF
        x ^= x >> 15
        x = (x * 0x846CA68B) & 0xFFFFFFFF
        return x ^ (x >> 16)

    values = [0, 1, 2, 12345, 0x7FFFFFFF, 0xFFFFFFFF, 0xDEADBEEF]
    got = mix32(torch.tensor(values, dtype=torch.int64)).tolist()
    assert got == [reference(v) for v in values]


def test_streams_do_not_depend_on_how_envs_are_split():
    whole = EnvRandom(6, global_offset=0, device="cpu")
    whole.seed_range(42)
    left, right = EnvRandom(4, 0, "cpu"), EnvRandom(2, 4, "cpu")
    left.seed_range(42)
    right.seed_range(42)
    expected = whole.uniform(torch.arange(6), (3,))
    got = torch.cat([left.uniform(torch.arange(4), (3,)), right.uniform(torch.arange(2), (3,))])
    assert torch.equal(got, expected)


def test_a_draw_for_some_envs_leaves_the_others_streams_alone():
    a, b = EnvRandom(4, 0, "cpu"), EnvRandom(4, 0, "cpu")
    a.seed_range(7)
    b.seed_range(7)
    a.uniform(torch.tensor([0, 2]), (5,))  # only envs 0 and 2 advance
    assert torch.equal(a.uniform(torch.tensor([1, 3]), (5,)), b.uniform(torch.tensor([1, 3]), (5,)))
    assert not torch.equal(a.uniform(torch.tensor([0]), (5,)), b.uniform(torch.tensor([0]), (5,)))


def test_seed_restarts_a_stream_and_matches_seed_range():
    a, b = EnvRandom(3, 10, "cpu"), EnvRandom(3, 10, "cpu")
    a.seed_range(100)  # env g gets seed 100 + g, so local env 1 (global 11) gets 111
    first = a.uniform(torch.tensor([1]), (4,))
    b.seed(torch.tensor([1]), [111])
    assert torch.equal(b.uniform(torch.tensor([1]), (4,)), first)


def test_uniform_respects_bounds_and_covers_the_interval():
    rng = EnvRandom(1000, 0, "cpu")
    rng.seed_range(0)
    values = rng.uniform(torch.arange(1000), (4,), -0.5, 0.5)
    assert values.shape == (1000, 4) and values.dtype == torch.float32
    assert values.min() >= -0.5 and values.max() < 0.5
    assert abs(values.mean().item()) < 0.02 and values.min() < -0.49 and values.max() > 0.49


def test_normal_has_unit_variance():
    rng = EnvRandom(4000, 0, "cpu")
    rng.seed_range(3)
    values = rng.normal(torch.arange(4000), (2,), std=2.0)
    assert values.shape == (4000, 2)
    assert abs(values.mean().item()) < 0.1 and abs(values.std().item() - 2.0) < 0.1
