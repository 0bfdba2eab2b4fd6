"""What one worker step's control-plane work costs the host, piece by piece (no worker, no GPU: timeit in one process).

A worker step sends one request and one reply and has each side poll its pipe while it waits; the parent then makes
the four output views of the block it cloned. This times each way of doing those pieces that gs_gym has used: the
request and reply pickled by multiprocessing's pickler (``Connection.send``) or the standard one
(``gs_gym.transport.protocol.send_message``); a pipe polled by ``Connection.poll(0)`` or by a ``select.poll`` object
(``gs_gym.transport.spinning``), and then waited on again or read at once (``WorkerPool.collect``); the views made by
four slices or one ``split_with_sizes`` (``gs_gym.transport.buffers.step_output_views``).

    python bench/pipe_messages.py --out bench/results/pipe-messages-cpu.json
"""

from __future__ import annotations

import argparse
import json
import math
import multiprocessing
import pickle
import select
import timeit
from multiprocessing.connection import wait
from multiprocessing.reduction import ForkingPickler
from pathlib import Path
from typing import Any

import torch

from gs_gym.benchmark import machine_description
from gs_gym.transport.buffers import step_output_views
from gs_gym.transport.protocol import Command, Ok, Request


def sliced_views(block: torch.Tensor, num_envs: int, obs_shape: tuple[int, ...]) -> tuple[torch.Tensor, ...]:
    """``step_output_views`` as it was before one split: four slices."""
    rewards_start = 4 * num_envs * math.prod(obs_shape)
    terminated_start = rewards_start + 4 * num_envs
    truncated_start = terminated_start + num_envs
    return (
        block[:rewards_start].view(torch.float32).view(num_envs, *obs_shape),
        block[rewards_start:terminated_start].view(torch.float32),
        block[terminated_start:truncated_start].view(torch.bool),
        block[truncated_start:].view(torch.bool),
    )


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--n-envs", type=int, default=4096)
    p.add_argument("--number", type=int, default=20_000, help="calls per timing")
    p.add_argument("--repeats", type=int, default=7, help="timings per piece; the table gives the fastest")
    p.add_argument("--out", type=Path, default=None, help="JSON results (default: print only)")
    args = p.parse_args()

    reader, _writer = multiprocessing.Pipe(duplex=False)
    readable, writer = multiprocessing.Pipe(duplex=False)
    writer.send_bytes(b"reply")  # never read: stays readable
    sentinel, _process_end = multiprocessing.Pipe(duplex=False)  # stands for a worker's process sentinel
    poller = select.poll()
    poller.register(reader.fileno(), select.POLLIN)
    request, reply = Request(Command.STEP, 12345), Ok(12345, None, 0.004)
    highest = pickle.HIGHEST_PROTOCOL  # what send_message uses
    n, obs_shape = args.n_envs, (45,)
    block = torch.zeros((math.prod(obs_shape) + 1) * 4 * n + 2 * n, dtype=torch.uint8)
    pieces: dict[str, tuple[Any, Any]] = {
        "pickle the STEP request": (lambda: ForkingPickler.dumps(request), lambda: pickle.dumps(request, highest)),
        "pickle the STEP reply": (lambda: ForkingPickler.dumps(reply), lambda: pickle.dumps(reply, highest)),
        "poll an empty pipe once": (lambda: reader.poll(0), lambda: poller.poll(0)),
        "wait on the pipe the spin found readable": (lambda: wait([readable, sentinel], None), lambda: None),
        "the four output views": (
            lambda: sliced_views(block, n, obs_shape),
            lambda: step_output_views(block, n, obs_shape),
        ),
    }
    ways = ("before", "now")
    us = {
        piece: {
            way: min(timeit.repeat(call, number=args.number, repeat=args.repeats)) / args.number * 1e6
            for way, call in zip(ways, calls, strict=True)
        }
        for piece, calls in pieces.items()
    }
    print("| piece | before (us) | now (us) |\n|---|---:|---:|")
    for piece, times in us.items():
        print(f"| {piece} | {times['before']:.2f} | {times['now']:.2f} |")
    if args.out:
        result = {
            "machine": machine_description("cpu"),
            "settings": {k: str(v) if isinstance(v, Path) else v for k, v in vars(args).items()},
            "before": "Connection.send's pickler, Connection.poll(0), four slices",
            "now": "pickle.dumps (send_message), select.poll, one split_with_sizes",
            "us_per_call": us,
        }
        args.out.write_text(json.dumps(result, indent=1))
        print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
