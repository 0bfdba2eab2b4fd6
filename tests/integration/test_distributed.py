"""``gs_gym.distributed`` and ``examples/ddp_ppo.py`` over torchrun ranks (gloo, CPU backend).

* helpers with monkeypatched torchrun variables (no Genesis, no process group): exact values and error messages;
* the collectives over two gloo ranks of a small script (no Genesis; ~10 s);
* ``ddp_ppo.py`` on two ranks of 8 cartpole envs each (in-process envs, 2 PPO updates; 40-90 s on 2 cores, most
  of it the two concurrent scene builds): every rank's envs are seeded as its slice of one env of 16 envs, the
  parameters and the observation normalizer are bit-identical across ranks after the updates;
* a rank that raises after its first update (``--fail-rank 1``, one env worker per rank) ends the job with that
  rank's error within a bounded time and leaves no process behind;
* ``ddp_ppo.py``'s options (no Genesis): every ``train_ppo.py`` option is honored or refused with an exact parser
  error, presets give train_ppo's settings, the agent takes the network options, the env the env options; and one
  more two-rank run with the adaptive lr schedule, ``--max-train-time``, another network and no observation
  normalization, which must keep the ranks in step.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import json
import math
import os
import re
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest
import torch

from gs_gym import distributed
from gs_gym.distributed import (
    EpisodeStats,
    RankInfo,
    all_reduce_episode_stats,
    all_reduce_moments,
    default_dist_backend,
    local_gpus,
    rank_info,
    vector_env_kwargs,
)

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "ddp_ppo.py"
TORCHRUN = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2"]
TORCHRUN_VARS = ("RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE")
TAG_VAR = "GS_GYM_DDP_TEST_TAG"
TIMEOUT_S = 240

NUM_ENVS = 8  # per rank
NUM_STEPS = 16
UPDATES = 2
SEED = 3
TASK_KWARGS = {"max_episode_steps": 10}  # episodes end within the rollouts, so episode statistics are exercised


def exact_error(error_type: type[Exception], message: str):
    """``pytest.raises`` that also requires the whole message to be ``message``."""
    return pytest.raises(error_type, match=f"^{re.escape(message)}$")


# -- rank_info -------------------------------------------------------------------------------------------------------


@pytest.fixture
def torchrun_env(monkeypatch):
    """Clears torchrun's variables; returns a setter of some of them."""
    for name in TORCHRUN_VARS:
        monkeypatch.delenv(name, raising=False)

    def set_vars(**values: str) -> None:
        for name, value in values.items():
            monkeypatch.setenv(name, value)

    return set_vars


def test_rank_info_defaults_to_one_process(torchrun_env):
    info = rank_info()
    assert info == RankInfo(rank=0, local_rank=0, world_size=1, local_world_size=1)
    assert info.is_main and not info.is_distributed


def test_rank_info_reads_torchrun_variables(torchrun_env):
    torchrun_env(RANK="13", LOCAL_RANK="5", WORLD_SIZE="16", LOCAL_WORLD_SIZE="8")
    info = rank_info()
    assert (info.rank, info.local_rank, info.world_size, info.local_world_size) == (13, 5, 16, 8)
    assert not info.is_main and info.is_distributed


def test_rank_info_without_local_variables_is_one_node(torchrun_env):
    torchrun_env(RANK="1", WORLD_SIZE="2")
    assert rank_info() == RankInfo(rank=1, local_rank=1, world_size=2, local_world_size=2)


def test_rank_info_from_a_mapping_ignores_os_environ(torchrun_env):
    torchrun_env(RANK="1", WORLD_SIZE="2")
    assert rank_info({}) == RankInfo()
    environ = {"RANK": "2", "WORLD_SIZE": "4", "LOCAL_RANK": "0", "LOCAL_WORLD_SIZE": "2"}
    assert rank_info(environ) == RankInfo(rank=2, local_rank=0, world_size=4, local_world_size=2)


def test_rank_info_is_frozen():
    with pytest.raises(dataclasses.FrozenInstanceError):
        RankInfo().rank = 1


@pytest.mark.parametrize(
    ("variables", "message"),
    [
        ({"RANK": "1"}, "RANK is set but WORLD_SIZE is not; launch with torchrun or set both"),
        ({"WORLD_SIZE": "2"}, "WORLD_SIZE is set but RANK is not; launch with torchrun or set both"),
        (
            {"RANK": "0", "WORLD_SIZE": "2", "LOCAL_RANK": "0"},
            "LOCAL_RANK is set but LOCAL_WORLD_SIZE is not; launch with torchrun or set both",
        ),
        ({"RANK": "one", "WORLD_SIZE": "2"}, "RANK: expected an integer, got 'one'"),
        ({"RANK": "0", "WORLD_SIZE": ""}, "WORLD_SIZE: expected an integer, got ''"),
        ({"RANK": "0", "WORLD_SIZE": "0"}, "WORLD_SIZE: expected an int >= 1, got 0"),
        ({"RANK": "2", "WORLD_SIZE": "2"}, "RANK: expected an int in [0, 2) (WORLD_SIZE=2), got 2"),
        ({"RANK": "-1", "WORLD_SIZE": "2"}, "RANK: expected an int in [0, 2) (WORLD_SIZE=2), got -1"),
        (
            {"RANK": "0", "WORLD_SIZE": "4", "LOCAL_RANK": "0", "LOCAL_WORLD_SIZE": "8"},
            "LOCAL_WORLD_SIZE: expected an int in [1, 4] (WORLD_SIZE=4), got 8",
        ),
        (
            {"RANK": "0", "WORLD_SIZE": "4", "LOCAL_RANK": "2", "LOCAL_WORLD_SIZE": "2"},
            "LOCAL_RANK: expected an int in [0, 2) (LOCAL_WORLD_SIZE=2), got 2",
        ),
    ],
)
def test_rank_info_errors(torchrun_env, variables, message):
    torchrun_env(**variables)
    with exact_error(ValueError, message):
        rank_info()


def test_rank_info_rejects_non_int_fields():
    with exact_error(TypeError, "RANK: expected an int, got 1.0"):
        RankInfo(rank=1.0, world_size=2)


# -- local_gpus ------------------------------------------------------------------------------------------------------


def test_local_gpus_one_per_rank_by_default():
    assert [local_gpus(RankInfo(8 + i, i, 16, 8), device_count=8) for i in range(8)] == [[i] for i in range(8)]


def test_local_gpus_several_per_rank():
    assert [local_gpus(RankInfo(i, i, 4, 4), gpus_per_rank=2, device_count=8) for i in range(4)] == [
        [0, 1],
        [2, 3],
        [4, 5],
        [6, 7],
    ]
    assert local_gpus(RankInfo(1, 1, 2, 2), gpus_per_rank=3, device_count=7) == [3, 4, 5]


def test_local_gpus_checks_the_node_has_enough():
    with exact_error(ValueError, "gpus_per_rank=2 with LOCAL_WORLD_SIZE=8 needs 16 GPUs on this node, torch sees 8"):
        local_gpus(RankInfo(0, 0, 8, 8), gpus_per_rank=2, device_count=8)


def test_local_gpus_counts_with_torch_by_default(monkeypatch):
    monkeypatch.setattr(distributed, "visible_gpu_count", lambda: 0)
    with exact_error(ValueError, "gpus_per_rank=1 with LOCAL_WORLD_SIZE=1 needs 1 GPUs on this node, torch sees 0"):
        local_gpus(RankInfo())
    monkeypatch.setattr(distributed, "visible_gpu_count", lambda: 4)
    assert local_gpus(RankInfo(3, 3, 4, 4)) == [3]


@pytest.mark.parametrize("bad", [0, -1, 1.5, True, "2"])
def test_local_gpus_rejects_bad_gpus_per_rank(bad):
    with exact_error(ValueError, f"gpus_per_rank: expected a positive int, got {bad!r}"):
        local_gpus(RankInfo(), gpus_per_rank=bad, device_count=8)


# -- vector_env_kwargs -----------------------------------------------------------------------------------------------


def test_vector_env_kwargs_cpu():
    assert vector_env_kwargs(RankInfo(1, 1, 2, 2), 8, SEED, backend="cpu") == {
        "num_envs": 8,
        "backend": "cpu",
        "seed": SEED + 8,
        "main_device": "cpu",
    }


def test_vector_env_kwargs_gpu():
    info = RankInfo(rank=13, local_rank=1, world_size=16, local_world_size=4)
    assert vector_env_kwargs(info, 64, 100, backend="gpu", gpus_per_rank=2, device_count=8) == {
        "num_envs": 64,
        "backend": "gpu",
        "seed": 100 + 13 * 64,
        "devices": [2, 3],
        "main_device": "cuda:2",
    }


def test_vector_env_kwargs_default_backend_follows_the_gpus():
    assert vector_env_kwargs(RankInfo(), 4, 0, device_count=0)["backend"] == "cpu"
    assert vector_env_kwargs(RankInfo(), 4, 0, device_count=1)["backend"] == "gpu"


def test_vector_env_kwargs_seed_every_env_of_every_rank_once():
    """Env i of rank r starts with seed + r * n + i (GenesisVectorEnv gives env i the seed seed + i)."""
    world, n, base = 4, 8, 1000
    seeds = []
    for rank in range(world):
        kwargs = vector_env_kwargs(RankInfo(rank, rank % 2, world, 2), n, base, backend="cpu")
        assert kwargs["seed"] == base + rank * n
        seeds += [kwargs["seed"] + i for i in range(kwargs["num_envs"])]
    assert seeds == list(range(base, base + world * n))


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"num_envs_per_rank": 0}, "num_envs_per_rank: expected a positive int, got 0"),
        ({"seed": None}, "seed: expected a non-negative int (the ranks' env seeds derive from it), got None"),
        ({"seed": -1}, "seed: expected a non-negative int (the ranks' env seeds derive from it), got -1"),
        ({"backend": "tpu"}, "backend: expected 'gpu' or 'cpu', got 'tpu'"),
        ({"backend": "cpu", "gpus_per_rank": 2}, "gpus_per_rank: only meaningful with backend='gpu', got 2"),
        (
            {"backend": "gpu", "device_count": 1, "info": RankInfo(1, 1, 2, 2)},
            "gpus_per_rank=1 with LOCAL_WORLD_SIZE=2 needs 2 GPUs on this node, torch sees 1",
        ),
    ],
)
def test_vector_env_kwargs_errors(kwargs, message):
    arguments = {"info": RankInfo(), "num_envs_per_rank": 8, "seed": 0, **kwargs}
    info, n, seed = arguments.pop("info"), arguments.pop("num_envs_per_rank"), arguments.pop("seed")
    with exact_error(ValueError, message):
        vector_env_kwargs(info, n, seed, **arguments)


def test_default_dist_backend():
    assert default_dist_backend("cpu") == "gloo"
    assert default_dist_backend(torch.device("cuda", 1)) == "nccl"
    assert default_dist_backend() == ("nccl" if torch.cuda.is_available() else "gloo")


# -- collectives -----------------------------------------------------------------------------------------------------


def test_collectives_without_a_process_group_are_local():
    stats = all_reduce_episode_stats(torch.tensor(30.0, dtype=torch.float64), torch.tensor(3))
    assert stats == EpisodeStats(episodes=3, return_sum=30.0, mean_return=10.0)
    none = all_reduce_episode_stats(0.0, 0)
    assert (none.episodes, none.return_sum) == (0, 0.0) and math.isnan(none.mean_return)
    batch = torch.randn(50, 3, generator=torch.Generator().manual_seed(0)) * 3 + 100
    count, mean, var = all_reduce_moments(batch, shift=torch.full((3,), 100.0, dtype=torch.float64))
    assert count.shape == () and int(count) == 50 and mean.dtype == var.dtype == count.dtype == torch.float64
    torch.testing.assert_close(mean, batch.double().mean(0))
    torch.testing.assert_close(var, batch.double().var(0, unbiased=False))
    count, mean, var = all_reduce_moments(torch.zeros((0,)))
    assert int(count) == 0 and mean.isnan() and var.isnan()


@pytest.mark.parametrize(("return_sum", "episodes"), [(1.0, -1), (1.0, 1.5), (math.nan, 1)])
def test_episode_stats_reject_bad_values(return_sum, episodes):
    with pytest.raises(ValueError, match="expected a finite return sum and a non-negative int episode count"):
        all_reduce_episode_stats(return_sum, episodes)


COLLECTIVES_SCRIPT = """
import json, sys
import torch
import torch.distributed as dist
from gs_gym.distributed import all_reduce_episode_stats, all_reduce_moments, rank_info

if __name__ == "__main__":
    info = rank_info()
    dist.init_process_group("gloo")
    rows = [3, 5][info.rank]
    batch = torch.arange(rows * 2, dtype=torch.float32).reshape(rows, 2) * (info.rank + 1) + 10 * info.rank
    count, mean, var = all_reduce_moments(batch)
    empty = torch.zeros((0, 2)) if info.rank == 0 else batch
    empty_count, empty_mean, _ = all_reduce_moments(empty)
    one_rank = all_reduce_episode_stats(*[(0.0, 0), (30.0, 3)][info.rank])  # rank 0: no episode
    both = all_reduce_episode_stats(*[(5.0, 1), (30.0, 3)][info.rank])
    neither = all_reduce_episode_stats(0.0, 0)
    out = {"rank": info.rank, "batch": batch.tolist(), "count": int(count), "mean": mean.tolist(), "var": var.tolist(),
           "empty_count": int(empty_count), "empty_mean": empty_mean.tolist(),
           "one_rank": [one_rank.episodes, one_rank.return_sum, one_rank.mean_return],
           "both": [both.episodes, both.return_sum, both.mean_return],
           "neither": [neither.episodes, neither.return_sum, repr(neither.mean_return)]}
    with open(sys.argv[1] + f"/collectives{info.rank}.json", "w") as f:
        json.dump(out, f)
    dist.destroy_process_group()
"""


def test_collectives_over_two_gloo_ranks(tmp_path):
    script = tmp_path / "collectives.py"
    script.write_text(COLLECTIVES_SCRIPT)
    output = run_torchrun([str(script), str(tmp_path)], timeout=120)
    assert output.returncode == 0, output.stdout
    r0, r1 = (json.loads((tmp_path / f"collectives{r}.json").read_text()) for r in (0, 1))
    both_batches = torch.tensor(r0["batch"] + r1["batch"], dtype=torch.float64)
    for report in (r0, r1):
        assert report["count"] == 8
        torch.testing.assert_close(torch.tensor(report["mean"], dtype=torch.float64), both_batches.mean(0))
        torch.testing.assert_close(
            torch.tensor(report["var"], dtype=torch.float64), both_batches.var(0, unbiased=False)
        )
        assert report["empty_count"] == 5
        torch.testing.assert_close(
            torch.tensor(report["empty_mean"], dtype=torch.float64),
            torch.tensor(r1["batch"], dtype=torch.float64).mean(0),
        )
        assert report["one_rank"] == [3, 30.0, 10.0]
        assert report["both"] == [4, 35.0, 8.75]
        assert report["neither"] == [0, 0.0, "nan"]
    assert (r0["mean"], r0["var"]) == (r1["mean"], r1["var"])  # bit-identical on both ranks


# -- torchrun --------------------------------------------------------------------------------------------------------


def tagged_processes(tag: str) -> list[int]:
    """PIDs of live processes whose environment holds ``TAG_VAR=tag`` (everything a test's torchrun started)."""
    needle = f"{TAG_VAR}={tag}".encode()
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            environ = (entry / "environ").read_bytes()
            state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if needle in environ.split(b"\0") and state != "Z":
            found.append(int(entry.name))
    return found


def run_torchrun(arguments: list[str], timeout: float = TIMEOUT_S) -> subprocess.CompletedProcess:
    """Run torchrun with 2 local ranks; on timeout kill everything it started and fail with its output.

    Afterwards no process it started may be left (waits up to 15 s for workers that die with their parent).
    """
    tag = uuid.uuid4().hex
    env = {**os.environ, TAG_VAR: tag, "PYTHONUNBUFFERED": "1"}
    for name in TORCHRUN_VARS:
        env.pop(name, None)
    proc = subprocess.Popen(
        [*TORCHRUN, *arguments],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    try:
        stdout, _ = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        for pid in tagged_processes(tag):
            os.kill(pid, signal.SIGKILL)
        stdout, _ = proc.communicate()
        pytest.fail(f"torchrun did not finish within {timeout} s; its output:\n{stdout[-6000:]}")
    deadline = time.monotonic() + 15
    while (left := tagged_processes(tag)) and time.monotonic() < deadline:
        time.sleep(0.5)
    for pid in left:
        os.kill(pid, signal.SIGKILL)
    assert not left, f"processes left behind by torchrun: {left}\n{stdout[-6000:]}"
    return subprocess.CompletedProcess(proc.args, proc.returncode, stdout)


def ddp_arguments(out_dir: Path, *extra: str, num_workers: int = 0, updates: int = UPDATES) -> list[str]:
    return [
        str(EXAMPLE),
        "--backend",
        "cpu",
        "--task",
        "cartpole",
        "--num-envs",
        str(NUM_ENVS),
        "--num-workers",
        str(num_workers),
        "--num-steps",
        str(NUM_STEPS),
        "--num-minibatches",
        "2",
        "--update-epochs",
        "2",
        "--total-timesteps",
        str(updates * 2 * NUM_ENVS * NUM_STEPS),
        "--seed",
        str(SEED),
        "--task-kwargs",
        json.dumps(TASK_KWARGS),
        "--out-dir",
        str(out_dir),
        *extra,
    ]


@pytest.fixture(scope="module")
def ddp_run(tmp_path_factory):
    out_dir = tmp_path_factory.mktemp("ddp")
    result = run_torchrun(ddp_arguments(out_dir))
    assert result.returncode == 0, result.stdout[-6000:]
    reports = [json.loads((out_dir / f"rank{rank}.json").read_text()) for rank in (0, 1)]
    return result, reports, out_dir


def test_ranks_step_different_envs_with_offset_seeds(ddp_run):
    _, reports, _ = ddp_run
    assert [(r["rank"], r["local_rank"], r["world_size"], r["num_envs"]) for r in reports] == [
        (0, 0, 2, NUM_ENVS),
        (1, 1, 2, NUM_ENVS),
    ]
    assert [r["env_seed"] for r in reports] == [SEED + rank * NUM_ENVS for rank in (0, 1)]
    first = [torch.tensor(r["first_obs"]) for r in reports]
    assert first[0].shape == first[1].shape == (NUM_ENVS, 4)
    assert reports[0]["first_obs_sha256"] != reports[1]["first_obs_sha256"]
    assert not torch.isclose(first[0], first[1]).all(dim=1).any(), "some env of rank 0 starts like one of rank 1"


def test_first_observations_are_slices_of_one_env_of_all_ranks(ddp_run):
    """Rank r's envs are envs r*8 .. r*8+7 of one 16-env GenesisVectorEnv(seed=SEED): global indices are unique."""
    from gs_gym import GenesisVectorEnv

    _, reports, _ = ddp_run
    env = GenesisVectorEnv(2 * NUM_ENVS, "cartpole", backend="cpu", num_workers=0, seed=SEED, task_kwargs=TASK_KWARGS)
    try:
        obs, _ = env.reset(seed=SEED)
    finally:
        env.close()
    assert torch.equal(obs, torch.tensor(reports[0]["first_obs"] + reports[1]["first_obs"], dtype=obs.dtype))


def test_parameters_and_normalizer_identical_across_ranks_after_updates(ddp_run):
    _, reports, _ = ddp_run
    r0, r1 = reports
    assert r0["iterations"] == r1["iterations"] == UPDATES
    assert r0["global_step"] == r1["global_step"] == UPDATES * 2 * NUM_ENVS * NUM_STEPS
    assert r0["initial_params_sha256"] == r1["initial_params_sha256"]
    assert r0["params_sha256"] != r0["initial_params_sha256"], "the updates changed nothing"
    assert r0["params_sha256"] == r1["params_sha256"]
    assert r0["obs_norm_sha256"] == r1["obs_norm_sha256"]
    # episode statistics are all-reduced: every rank holds the global figures, made of both ranks' episodes
    assert r0["final_episodes"] == r1["final_episodes"] == r0["local_episodes"] + r1["local_episodes"] > 0
    assert r0["final_return"] == r1["final_return"] > 0


def test_rank0_logs_and_saves_a_train_ppo_checkpoint(ddp_run):
    result, reports, out_dir = ddp_run
    assert "2 rank(s) x cartpole x8 on cpu" in result.stdout
    assert re.search(r"SPS +\d+ \(all ranks\)", result.stdout), result.stdout[-3000:]
    spec = importlib.util.spec_from_file_location("gs_gym_example_train_ppo", ROOT / "examples" / "train_ppo.py")
    train_ppo = sys.modules.get(spec.name)
    if train_ppo is None:
        train_ppo = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = train_ppo
        spec.loader.exec_module(train_ppo)
    agent, _ = train_ppo.load_checkpoint(out_dir / train_ppo.CHECKPOINT_NAME)
    ddp_ppo = load_ddp_example()
    assert ddp_ppo.tensor_digest(agent.parameters()) == reports[0]["params_sha256"]
    metrics = json.loads((out_dir / train_ppo.METRICS_NAME).read_text())
    assert metrics["world_size"] == 2 and metrics["global_step"] == reports[0]["global_step"]
    assert metrics["final_return"] == reports[0]["final_return"] and metrics["sps"] > 0


def load_ddp_example():
    name = "gs_gym_example_ddp_ppo"
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, EXAMPLE)
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    return sys.modules[name]


def test_rank_failure_ends_the_job_with_its_error(tmp_path):
    """Rank 1 raises after its first update while rank 0 waits in a collective: torchrun must stop rank 0 (and the
    env workers of both ranks) and exit non-zero with rank 1's error, well within the timeout."""
    result = run_torchrun(ddp_arguments(tmp_path, "--fail-rank", "1", num_workers=1, updates=3))
    assert result.returncode != 0, result.stdout[-6000:]
    assert "injected failure on rank 1" in result.stdout, result.stdout[-6000:]
    assert not (tmp_path / "rank0.json").exists() and not (tmp_path / "rank1.json").exists()


# -- ddp_ppo.py options ----------------------------------------------------------------------------------------------


def test_every_train_ppo_option_is_honored_or_refused():
    ddp_ppo = load_ddp_example()
    train_options = set(vars(ddp_ppo.train_ppo.build_parser().parse_args([])))
    assert not ddp_ppo.HONORED_OPTIONS & ddp_ppo.REFUSED_OPTIONS.keys()
    assert ddp_ppo.HONORED_OPTIONS | ddp_ppo.REFUSED_OPTIONS.keys() == train_options


def parse_error(capsys, argv: list[str]) -> str:
    """The message of the parser error ``ddp_ppo.parse_args(argv)`` exits with (after ``error: ``)."""
    with pytest.raises(SystemExit) as exit_info:
        load_ddp_example().parse_args(argv)
    assert exit_info.value.code == 2
    last_line = capsys.readouterr().err.splitlines()[-1]
    assert ": error: " in last_line, last_line
    return last_line.split(": error: ", 1)[1]


EVAL_STEPS_REFUSED = (
    "--eval-steps is not supported by ddp_ppo.py (it does not evaluate after training; load its "
    "checkpoint.pt with train_ppo.load_checkpoint and run train_ppo.evaluate)"
)


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--eval-steps", "5"], EVAL_STEPS_REFUSED),
        (["--eval-steps", "200"], EVAL_STEPS_REFUSED),  # train_ppo.py's default is not this script's
        (["--task", "go2-walk", "--eval-steps", "250"], EVAL_STEPS_REFUSED),
        (["--max-train-time", "0"], "--max-train-time must be > 0, got 0.0"),
        (["--desired-kl", "0"], "--desired-kl must be > 0, got 0.0"),
        (["--hidden-sizes", "32", "0"], "--hidden-sizes must be positive, got [32, 0]"),
        (["--update-epochs", "0"], "--update-epochs must be >= 1, got 0"),
        (["--random-steps", "-1"], "--random-steps must be >= 0, got -1"),
        (
            ["--num-envs", "6", "--num-steps", "3", "--num-minibatches", "4"],
            "num_envs * num_steps (18) must be divisible by num_minibatches (4)",
        ),
    ],
)
def test_ddp_parser_errors(capsys, argv, message):
    assert parse_error(capsys, argv) == message


def test_an_option_ddp_does_not_know_is_refused(capsys, monkeypatch):
    """A train_ppo.py option missing from HONORED_OPTIONS (e.g. one added later): refused when given a non-default
    value, or when a preset sets it; accepted at its default."""
    ddp_ppo = load_ddp_example()
    monkeypatch.setattr(ddp_ppo, "HONORED_OPTIONS", ddp_ppo.HONORED_OPTIONS - {"activation"})
    assert parse_error(capsys, ["--activation", "elu"]) == (
        "--activation is not supported by ddp_ppo.py (a train_ppo.py option it does not know)"
    )
    assert parse_error(capsys, ["--task", "go2-walk"]) == (
        "--task go2-walk: its preset sets --activation, which ddp_ppo.py does not support"
    )
    assert ddp_ppo.parse_args(["--activation", "tanh"]).activation == "tanh"


def test_ddp_defaults_and_accepted_values():
    ddp_ppo = load_ddp_example()
    args = ddp_ppo.parse_args(["--backend", "cpu", "--eval-steps", "0", "--seed", "4"])
    assert (args.eval_steps, args.random_steps, args.num_workers, args.max_train_time) == (0, 0, None, None)
    assert (args.lr_schedule, args.anneal_lr, args.hidden_sizes, args.activation) == ("anneal", True, [64, 64], "tanh")
    assert (args.preset, args.out_dir, args.norm_obs, args.performance_mode) == (
        None,
        "runs/ddp-cartpole-4",
        True,
        False,
    )
    args = ddp_ppo.parse_args(["--backend", "cpu", "--anneal-lr", "false", "--hidden-size", "32"])
    assert (args.lr_schedule, args.anneal_lr, args.hidden_sizes) == ("constant", False, [32, 32])


def test_go2_preset_gives_train_ppo_settings():
    """Everything train_ppo.py's go2-walk preset sets, except the evaluation (and the defaults that differ anyway)."""
    ddp_ppo = load_ddp_example()
    argv = ["--task", "go2-walk", "--backend", "gpu"]
    ddp_args, train_args = vars(ddp_ppo.parse_args(argv)), vars(ddp_ppo.train_ppo.parse_args(argv))
    differing = {
        key: (ddp_args.get(key), train_args.get(key))
        for key in ddp_args.keys() | train_args.keys()
        if ddp_args.get(key) != train_args.get(key)
    }
    assert differing == {  # gpus_per_rank: ddp_ppo.py's own (its other own options default to None)
        "eval_steps": (0, 250),
        "num_workers": (None, 1),
        "out_dir": ("runs/ddp-go2-walk-1", "runs/go2-walk-1"),
        "gpus_per_rank": (1, None),
    }
    assert (ddp_args["preset"], ddp_args["hidden_sizes"], ddp_args["lr_schedule"]) == (
        "go2-walk",
        [512, 256, 128],
        "adaptive",
    )
    override = ddp_ppo.parse_args(
        [
            *argv,
            "--hidden-sizes",
            "64",
            "--lr-schedule",
            "constant",
            "--task-kwargs",
            '{"max_episode_steps": 100, "lin_vel_x_range": [1.0, 1.0]}',
        ]
    )
    assert (override.hidden_sizes, override.lr_schedule, override.activation) == ([64], "constant", "elu")
    assert override.task_kwargs == {
        "lin_vel_x_range": [1.0, 1.0],
        "lin_vel_y_range": (0.0, 0.0),
        "ang_vel_yaw_range": (0.0, 0.0),
        "max_episode_steps": 100,
    }


def network(agent: torch.nn.Module) -> list[tuple[str, int]]:
    """The actor mean's layers: ``("Linear", out_features)`` or ``(activation class name, 0)``."""
    return [(type(m).__name__, getattr(m, "out_features", 0)) for m in agent.actor_mean]


@pytest.mark.parametrize(
    ("argv", "layers", "log_std"),
    [
        ([], [("Linear", 64), ("Tanh", 0), ("Linear", 64), ("Tanh", 0), ("Linear", 1)], 0.0),
        (
            ["--hidden-sizes", "32", "16", "8", "--activation", "elu", "--init-log-std", "-0.5"],
            [("Linear", 32), ("ELU", 0), ("Linear", 16), ("ELU", 0), ("Linear", 8), ("ELU", 0), ("Linear", 1)],
            -0.5,
        ),
        (
            ["--task", "go2-walk"],
            [("Linear", 512), ("ELU", 0), ("Linear", 256), ("ELU", 0), ("Linear", 128), ("ELU", 0), ("Linear", 1)],
            0.0,
        ),
    ],
)
def test_agent_takes_the_network_options(argv, layers, log_std):
    ddp_ppo = load_ddp_example()
    agent = ddp_ppo.make_agent(ddp_ppo.parse_args(["--backend", "cpu", *argv]), 5, 1)
    assert network(agent) == layers
    assert [(type(m).__name__, getattr(m, "out_features", 0)) for m in agent.critic] == layers
    assert agent.actor_mean[0].in_features == 5 and agent.actor_logstd.tolist() == [[log_std]]


def test_disabled_obs_normalizer_stays_the_identity():
    ddp_ppo = load_ddp_example()
    norm = ddp_ppo.SyncedObsNormalizer((2,), torch.device("cpu"), enabled=False)
    norm.update(torch.tensor([[10.0, -10.0], [30.0, 50.0]], dtype=torch.float64))
    assert (norm.mean.tolist(), norm.var.tolist(), float(norm.count)) == ([0.0, 0.0], [1.0, 1.0], 1e-4)
    normalized = norm.normalize(torch.tensor([[30.0, 50.0]], dtype=torch.float64))
    assert normalized.dtype == torch.float32 and normalized.tolist() == [[30.0, 50.0]]


def test_env_gets_the_env_options(monkeypatch, tmp_path):
    """``train`` builds the rank's env with the task, the preset's task options, ``--performance-mode`` and
    start-up progress on."""
    ddp_ppo = load_ddp_example()
    built: dict = {}

    class Built(Exception):
        pass

    def fake_env(**kwargs):
        built.update(kwargs)
        raise Built

    monkeypatch.setattr(ddp_ppo, "GenesisVectorEnv", fake_env)
    args = ddp_ppo.parse_args(
        [
            "--task",
            "go2-walk",
            "--backend",
            "cpu",
            "--performance-mode",
            "true",
            "--torch-threads",
            "0",
            "--out-dir",
            str(tmp_path),
        ]
    )
    env_kwargs = {"num_envs": 4096, "backend": "cpu", "seed": 1, "main_device": "cpu"}
    with pytest.raises(Built):
        ddp_ppo.train(args, RankInfo(), env_kwargs)
    assert built == {
        "task": "go2-walk",
        "autoreset_mode": ddp_ppo.AutoresetMode.SAME_STEP,
        "task_kwargs": {"lin_vel_x_range": (0.5, 0.5), "lin_vel_y_range": (0.0, 0.0), "ang_vel_yaw_range": (0.0, 0.0)},
        "performance_mode": True,
        "verbose": True,
        **env_kwargs,
    }


AGREEMENT_SCRIPT = """
import importlib.util, json, sys
import torch
import torch.distributed as dist
from gs_gym.distributed import rank_info

if __name__ == "__main__":
    spec = importlib.util.spec_from_file_location("ddp_ppo", sys.argv[2])
    ddp_ppo = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(ddp_ppo)
    info = rank_info()
    dist.init_process_group("gloo")
    # alone, rank 0 would raise the lr (KL below 0.005) and rank 1 lower it (above 0.02); their mean 0.0255 lowers it
    kl = torch.tensor([[0.001, 0.05][info.rank]])
    lr = ddp_ppo.synced_adaptive_lr(1e-3, kl, 0.01, info.world_size)
    # alone, rank 0 would go on (0.5 s < 1 s) and rank 1 stop; their mean 1.25 s stops both
    up = ddp_ppo.time_is_up([0.5, 2.0][info.rank], 1.0, info.world_size)
    with open(sys.argv[1] + f"/agreement{info.rank}.json", "w") as f:
        json.dump({"lr": lr, "time_is_up": up}, f)
    dist.destroy_process_group()
"""


def test_adaptive_lr_and_time_limit_are_decided_over_all_ranks(tmp_path):
    script = tmp_path / "agreement.py"
    script.write_text(AGREEMENT_SCRIPT)
    output = run_torchrun([str(script), str(tmp_path), str(EXAMPLE)], timeout=120)
    assert output.returncode == 0, output.stdout
    reports = [json.loads((tmp_path / f"agreement{rank}.json").read_text()) for rank in (0, 1)]
    assert reports == [{"lr": 1e-3 / 1.5, "time_is_up": True}] * 2


def test_synced_decisions_without_a_process_group_are_local():
    ddp_ppo = load_ddp_example()
    assert ddp_ppo.synced_adaptive_lr(1e-3, torch.tensor(0.001), 0.01, 1) == 1e-3 * 1.5
    assert ddp_ppo.synced_adaptive_lr(1e-3, torch.tensor(0.05), 0.01, 1) == 1e-3 / 1.5
    assert ddp_ppo.synced_adaptive_lr(1e-3, torch.tensor(0.01), 0.01, 1) == 1e-3
    assert (ddp_ppo.time_is_up(0.5, 1.0, 1), ddp_ppo.time_is_up(1.0, 1.0, 1)) == (False, True)


def test_adaptive_lr_and_time_limit_keep_the_ranks_in_step(tmp_path):
    """``--lr-schedule adaptive`` adapts on the KL averaged over ranks and ``--max-train-time`` stops on the mean
    training time: both ranks end with the same learning rate, iteration count and parameters; the checkpoint holds
    the ``--hidden-sizes`` / ``--activation`` network and a disabled observation normalizer."""
    result = run_torchrun(
        ddp_arguments(
            tmp_path,
            "--lr-schedule",
            "adaptive",
            "--max-train-time",
            "1e-6",
            "--hidden-sizes",
            "16",
            "8",
            "--activation",
            "elu",
            "--norm-obs",
            "false",
            updates=3,
        )
    )
    assert result.returncode == 0, result.stdout[-6000:]
    assert "stopping after 1 of 3 iterations: --max-train-time 1e-06s reached" in result.stdout
    r0, r1 = (json.loads((tmp_path / f"rank{rank}.json").read_text()) for rank in (0, 1))
    assert (r0["iterations"], r0["planned_iterations"]) == (r1["iterations"], r1["planned_iterations"]) == (1, 3)
    assert r0["global_step"] == r1["global_step"] == 2 * NUM_ENVS * NUM_STEPS
    assert r0["final_lr"] == r1["final_lr"] != 1e-3, "the adaptive schedule left the learning rate alone"
    assert r0["params_sha256"] == r1["params_sha256"] != r0["initial_params_sha256"]
    assert r0["obs_norm_sha256"] == r1["obs_norm_sha256"]
    ddp_ppo = load_ddp_example()
    agent, norm = ddp_ppo.train_ppo.load_checkpoint(tmp_path / ddp_ppo.train_ppo.CHECKPOINT_NAME)
    assert network(agent) == [("Linear", 16), ("ELU", 0), ("Linear", 8), ("ELU", 0), ("Linear", 1)]
    assert ddp_ppo.tensor_digest(agent.parameters()) == r0["params_sha256"]
    assert not norm.enabled and float(norm.count) == 1e-4
    metrics = json.loads((tmp_path / ddp_ppo.train_ppo.METRICS_NAME).read_text())
    assert (metrics["preset"], metrics["args"]["lr_schedule"], metrics["iterations"]) == (None, "adaptive", 1)
    assert [h["lr"] for h in metrics["history"]] == [r0["final_lr"]]
