"""The step's math after the physics, replayed from one CUDA graph (``cuda_graph=True``, tasks declaring
``Task.capturable``).

On the lent GPUs a step is host-bound: each torch operation costs 10-20 us of host time to launch, and go2-walk's
``observe``, ``compute_rewards`` and ``compute_terminated`` launch 31 of them, the shard's bookkeeping after them
(time limit, the resets' masks, done, the step flags) eight more. Captured once in a CUDA graph, they cost one launch
per step and the GPU runs the same kernels (``bench/results/README.md``, "The task's math from one CUDA graph").

A replay writes its results again into the tensors of the capture, computed from whatever the tensors the captured
function reads hold at that moment: hence ``Task.capturable``'s promise that the hooks' keep their storage, and the
shard's own inputs (episode counters, the envs to reset, the actions checked) are written in place too. The results
stay valid until the next replay: the shard copies what it hands out. The first ``CHECKED_REPLAYS`` replays also
compare the hooks' outputs with the hooks called as they are (a host wait each): a task that replaced a tensor
instead of writing into it would otherwise be read stale without a word; the difference raises ``TaskOutputError``.
On the CPU backend nothing is captured: the same object calls the function at each "replay", so that the rest of the
shard runs the same code there.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Generic, TypeVar

import torch

from gs_gym.errors import TaskOutputError

Outputs = tuple[torch.Tensor, torch.Tensor, torch.Tensor]
"""Observations, rewards and terminated, as the task's hooks return them."""
T = TypeVar("T")
R = TypeVar("R")

CHECKED_REPLAYS = 3
"""Replays compared with the hooks: the first steps, where a tensor replaced instead of written shows."""

WARMUP_CALLS = 3
"""Calls of the function on a side stream before the capture, as CUDA graph capture asks (lazy initialisations run
outside it)."""


@dataclasses.dataclass
class CapturedStep(Generic[R]):
    """A function of the step (the task's output hooks, then what the shard computes from them) as one CUDA graph
    (None on the CPU), and the tensors its replays write."""

    task_name: str
    function: Callable[[], tuple[Outputs, R]]
    """Returns the hooks' outputs as it used them, and its results. Called more than once for one step (warm-up,
    capture), so it must write nothing that it also reads."""
    hooks: Callable[[], Outputs]
    """The output hooks called as they are, for the check."""
    graph: torch.cuda.CUDAGraph | None
    captured: tuple[Outputs, R] | None
    """What the capture returned: the tensors each replay writes again (None without a graph)."""
    checks_left: int = CHECKED_REPLAYS

    @classmethod
    def capture(
        cls,
        task_name: str,
        function: Callable[[], tuple[Outputs, R]],
        hooks: Callable[[], Outputs],
        device: torch.device,
    ) -> CapturedStep[R]:
        """Capture ``function`` on ``device``; on the CPU, keep it as it is."""
        if device.type != "cuda":
            return cls(task_name, function, hooks, None, None)
        warm_up(function, device)
        try:
            graph, captured = capture_graph(function)
        except RuntimeError as error:
            raise TaskOutputError(
                f"task {task_name!r} declares capturable output hooks (Task.capturable), but capturing observe, "
                f"compute_rewards, compute_terminated and compute_truncated in a CUDA graph failed (cuda_graph=False "
                f"runs them as they are): {error}"
            ) from error
        return cls(task_name, function, hooks, graph, captured)

    def replay(self) -> R:
        """This step's results: the graph replayed (the function called, on the CPU). They hold until the next
        replay."""
        if self.graph is None or self.captured is None:
            return self.function()[1]
        self.graph.replay()
        outputs, results = self.captured
        if self.checks_left:
            self.checks_left -= 1
            check_replay(self.task_name, outputs, self.hooks())
        return results


def warm_up(function: Callable[[], object], device: torch.device) -> None:
    """``WARMUP_CALLS`` calls of ``function`` on a side stream, before ``capture_graph`` (as CUDA graph capture
    asks)."""
    side = torch.cuda.Stream(device)
    side.wait_stream(torch.cuda.current_stream(device))
    with torch.cuda.stream(side):
        for _ in range(WARMUP_CALLS):
            function()
    torch.cuda.current_stream(device).wait_stream(side)


def capture_graph(function: Callable[[], T]) -> tuple[torch.cuda.CUDAGraph, T]:
    """``function``'s CUDA work as one graph (after ``warm_up``), and what it returned during the capture: the
    tensors each ``graph.replay()`` writes again."""
    graph = torch.cuda.CUDAGraph()
    # thread_local: CUDA calls of the caller's other threads (an in-process env inside a training program) neither
    # break the capture nor are refused during it
    with torch.cuda.graph(graph, capture_error_mode="thread_local"):
        captured = function()
    return graph, captured


def check_replay(task_name: str, replayed: Outputs, called: Outputs) -> None:
    """Raise ``TaskOutputError`` unless the replayed outputs equal the hooks' (NaN equal to NaN), naming the first
    output that differs and in how many envs."""
    for name, got, expected in zip(("observations", "rewards", "terminated"), replayed, called, strict=True):
        same = (got == expected) | (got.isnan() & expected.isnan()) if got.is_floating_point() else got == expected
        differing = int((~same.reshape(same.shape[0], -1).all(dim=1)).sum())
        if differing:
            raise TaskOutputError(
                f"task {task_name!r}: the {name} replayed from the CUDA graph differ from its hooks' in {differing} "
                f"envs: its output hooks read a tensor that was replaced instead of written in place, which "
                f"Task.capturable rules out (write state with copy_, out= or in-place operations)"
            )
