"""``gs_gym.distributed`` and ``examples/ddp_ppo.py`` over torchrun ranks (gloo, CPU backend).

* helpers with monkeypatched torchrun variables (no Genesis, no process group): exact values and error messages;
* the collectives over two gloo ranks of a small script (no Genesis; ~10 s);
* ``ddp_ppo.py`` on two ranks of 8 cartpole envs each (in-process envs, 2 PPO updates; 40-90 s on 2 cores, most
  of it the two concurrent scene builds): every rank's envs are seeded as its slice of one env of 16 envs, the
  parameters and the observation normalizer are bit-identical across ranks after the updates;
* a rank that raises after its first update (``--fail-rank 1``, one env worker per rank) ends the job with that
  rank's error within a bounded time and leaves no process behind;
* ``ddp_ppo.py``'s command line: its flags are ``train_ppo.py``'s less the video ones plus the distributed ones (no
  random-policy baseline: ``play.py`` has it), bad flags are named, the go2-walk preset gives train_ppo's settings;
  and one more two-rank run with the adaptive lr schedule, ``--max-train-time``, another network and no observation
  normalization, which must keep the ranks in step and save that network.

The scripts are driven through their command line only; ``Agent`` is imported from ``train_ppo.py`` (which defines
it and trains only as ``__main__``) to load the checkpoint as a play script would.
"""

from __future__ import annotations

import dataclasses
import hashlib
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
from tests.json_files import strict_json

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
    assert r0["obs_rms_sha256"] == r1["obs_rms_sha256"] is not None
    # episode statistics are all-reduced: every rank holds the global figures, made of both ranks' episodes
    assert r0["final_episodes"] == r1["final_episodes"] == r0["local_episodes"] + r1["local_episodes"] > 0
    assert r0["final_return"] == r1["final_return"] > 0


def load_checkpoint(path: Path) -> tuple[torch.nn.Module, dict]:
    """The agent of ``checkpoint.pt``, built with ``train_ppo.py``'s ``Agent`` as a play script would."""
    spec = importlib.util.spec_from_file_location("gs_gym_example_train_ppo", ROOT / "examples" / "train_ppo.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    checkpoint = torch.load(path, map_location="cpu", weights_only=False)
    agent = module.Agent(checkpoint["obs_dim"], checkpoint["act_dim"], **checkpoint["network"])
    agent.load_state_dict(checkpoint["agent"])
    return agent, checkpoint


def params_sha256(agent: torch.nn.Module) -> str:
    """The digest ``ddp_ppo.py`` reports: SHA-256 of the parameters' bytes, in ``parameters()`` order."""
    return hashlib.sha256(b"".join(p.detach().contiguous().numpy().tobytes() for p in agent.parameters())).hexdigest()


def test_rank0_logs_and_saves_a_train_ppo_checkpoint(ddp_run):
    result, reports, out_dir = ddp_run
    assert "2 rank(s) x cartpole x8 on cpu (0 worker(s) each)" in result.stdout
    assert "gs_gym in-process (cpu): starting" in result.stdout  # the env's start-up progress (verbose=True)
    assert re.search(r"SPS +\d+ \(all ranks\)", result.stdout), result.stdout[-3000:]
    assert result.stdout.count("settings (no preset): ") == 1  # rank 0 only
    agent, checkpoint = load_checkpoint(out_dir / "checkpoint.pt")
    assert set(checkpoint) == {"agent", "obs_rms", "obs_dim", "act_dim", "network", "args", "world_size"}
    assert (checkpoint["obs_dim"], checkpoint["act_dim"], checkpoint["world_size"]) == (4, 1, 2)
    assert params_sha256(agent) == reports[0]["params_sha256"]
    assert checkpoint["obs_rms"]["mean"].shape == (4,) and float(checkpoint["obs_rms"]["count"]) > 2 * NUM_ENVS
    metrics = strict_json(out_dir / "metrics.json")
    assert set(metrics) == {
        "args",
        "world_size",
        "iterations",
        "planned_iterations",
        "global_step",
        "final_return",
        "final_episodes",
        "final_lr",
        "sps",
        "times",
        "history",
    }
    assert metrics["world_size"] == 2 and metrics["global_step"] == reports[0]["global_step"]
    assert metrics["final_return"] == reports[0]["final_return"] and metrics["sps"] > 0
    assert [h["global_step"] for h in metrics["history"]] == [2 * NUM_ENVS * NUM_STEPS * i for i in (1, 2)]


def test_rank_failure_ends_the_job_with_its_error(tmp_path):
    """Rank 1 raises after its first update while rank 0 waits in a collective: torchrun must stop rank 0 (and the
    env workers of both ranks) and exit non-zero with rank 1's error, well within the timeout."""
    result = run_torchrun(ddp_arguments(tmp_path, "--fail-rank", "1", num_workers=1, updates=3))
    assert result.returncode != 0, result.stdout[-6000:]
    assert "injected failure on rank 1" in result.stdout, result.stdout[-6000:]
    assert not (tmp_path / "rank0.json").exists() and not (tmp_path / "rank1.json").exists()


# -- ddp_ppo.py's command line ---------------------------------------------------------------------------------------


def run_script(name: str, *argv: str, timeout: float = 120) -> subprocess.CompletedProcess:
    """``python examples/<name> argv...`` as a single process (no torchrun variables)."""
    env = {key: value for key, value in os.environ.items() if key not in TORCHRUN_VARS}
    command = [sys.executable, str(ROOT / "examples" / name), *argv]
    return subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout)


def flags(name: str) -> set[str]:
    return set(re.findall(r"(--[a-z][a-z-]*)", run_script(name, "--help").stdout))


def test_ddp_flags_are_train_ppo_flags_less_the_video_plus_the_distributed_ones():
    ddp = flags("ddp_ppo.py")
    video = {"--capture-video", "--video-envs", "--video-steps"}
    assert ddp == flags("train_ppo.py") - video | {"--gpus-per-rank", "--dist-backend", "--fail-rank"}
    mentioned = set()
    for line in (ROOT / "docs" / "distributed.md").read_text().splitlines():
        if "ddp_ppo.py" in line:
            mentioned |= set(re.findall(r"(?<![\w-])(--[a-z][a-z-]*)", line.split("ddp_ppo.py", 1)[1]))
    assert {"--num-envs", "--gpus-per-rank"} <= mentioned <= ddp, mentioned - ddp


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--eval-steps", "5"], "unrecognized arguments: --eval-steps 5"),
        (["--max-train-time", "0"], "--max-train-time must be > 0, got 0.0"),
        (["--desired-kl", "0"], "--desired-kl must be > 0, got 0.0"),
        (["--hidden-sizes", "32", "0"], "--hidden-sizes must be > 0, got [32, 0]"),
        (["--update-epochs", "0"], "--update-epochs must be >= 1, got 0"),
        (["--random-steps", "5"], "unrecognized arguments: --random-steps 5"),  # the baseline is play.py's
        (
            ["--num-envs", "6", "--num-steps", "3", "--num-minibatches", "4"],
            "num_envs * num_steps (18) must be divisible by --num-minibatches",
        ),
        (["--fail-rank", "1"], "--fail-rank must be a rank in [0, 1), got 1"),
        (
            ["--backend", "gpu", "--num-workers", "0"],
            "--num-workers 0 runs Genesis on its default GPU, not on this rank's; use >= 1 with --backend gpu",
        ),
    ],
)
def test_ddp_parser_errors(argv, message):
    run = run_script("ddp_ppo.py", "--backend", "cpu", *argv)
    assert run.returncode == 2 and run.stdout == ""
    assert run.stderr.splitlines()[-1].split(": error: ", 1)[1] == message


def test_go2_preset_gives_train_ppo_settings():
    """Both scripts print their effective settings before building the env (here stopped by an unknown task
    option): the same go2-walk values but for train_ppo.py's video and ddp_ppo.py's own options and defaults."""
    argv = ["--task", "go2-walk", "--backend", "cpu", "--task-kwargs", '{"no_such_option": 1}']
    settings = []
    for name in ("ddp_ppo.py", "train_ppo.py"):
        run = run_script(name, *argv, timeout=300)
        assert run.returncode != 0 and "no_such_option" in run.stderr, run.stderr[-3000:]
        assert run.stdout.startswith("settings (preset go2-walk): "), run.stdout[-3000:]
        settings.append(json.loads(run.stdout.splitlines()[0].split(": ", 1)[1]))
    ddp, train = settings
    keys = ddp.keys() | train.keys()
    differing = {key: (ddp.get(key), train.get(key)) for key in keys if ddp.get(key) != train.get(key)}
    assert differing == {
        "capture_video": (None, False),
        "video_envs": (None, 1),
        "video_steps": (None, 250),
        "num_workers": (None, 1),  # ddp_ppo.py: one env worker per GPU of the rank
        "out_dir": ("runs/ddp-go2-walk-1", "runs/go2-walk-1"),
        "gpus_per_rank": (1, None),  # its other own options (--dist-backend, --fail-rank) default to None
    }
    assert (ddp["hidden_sizes"], ddp["lr_schedule"]) == ([512, 256, 128], "adaptive")


def test_adaptive_lr_and_time_limit_keep_the_ranks_in_step(tmp_path):
    """``--lr-schedule adaptive`` adapts on the KL averaged over ranks and ``--max-train-time`` stops on the mean
    training time: both ranks end with the same learning rate, iteration count and parameters; the checkpoint holds
    the ``--hidden-sizes`` / ``--activation`` network and no observation statistics."""
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
            "--init-log-std",
            "-0.5",
            "--norm-obs",
            "false",
            updates=3,
        )
    )
    assert result.returncode == 0, result.stdout[-6000:]
    assert "stopping after 1 of 3 iterations: --max-train-time reached" in result.stdout
    r0, r1 = (json.loads((tmp_path / f"rank{rank}.json").read_text()) for rank in (0, 1))
    assert (r0["iterations"], r0["planned_iterations"]) == (r1["iterations"], r1["planned_iterations"]) == (1, 3)
    assert r0["global_step"] == r1["global_step"] == 2 * NUM_ENVS * NUM_STEPS
    assert r0["final_lr"] == r1["final_lr"] != 1e-3, "the adaptive schedule left the learning rate alone"
    assert r0["params_sha256"] == r1["params_sha256"] != r0["initial_params_sha256"]
    assert r0["obs_rms_sha256"] is None and r1["obs_rms_sha256"] is None
    agent, checkpoint = load_checkpoint(tmp_path / "checkpoint.pt")
    layers = [(type(m).__name__, getattr(m, "out_features", 0)) for m in agent.actor_mean]
    assert layers == [("Linear", 16), ("ELU", 0), ("Linear", 8), ("ELU", 0), ("Linear", 1)]
    assert [(type(m).__name__, getattr(m, "out_features", 0)) for m in agent.critic][-1] == ("Linear", 1)
    assert params_sha256(agent) == r0["params_sha256"] and checkpoint["obs_rms"] is None
    metrics = strict_json(tmp_path / "metrics.json")
    assert (metrics["args"]["preset"], metrics["args"]["lr_schedule"], metrics["iterations"]) == (None, "adaptive", 1)
    assert [h["lr"] for h in metrics["history"]] == [r0["final_lr"]]
