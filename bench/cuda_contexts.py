"""Which CUDA context Genesis's kernels and torch's run in, in a fresh process, for both import orders.

    python bench/cuda_contexts.py        # on a GPU machine: one line per order, then JSON

A worker initializes Genesis (quadrants) before it touches torch.cuda; this benchmark's parent and most scripts do
it the other way round. Were quadrants to create a context of its own in one order and share torch's primary context
in the other, a worker would switch contexts between Genesis's launches and torch's every step. This prints the
current context (``cuCtxGetCurrent``) after each library starts, and the device's primary context, per order.
"""

from __future__ import annotations

import json
import subprocess
import sys

PROBE = """
import ctypes, json, sys
import torch
cuda = ctypes.CDLL("libcuda.so.1")
def current():
    ctx = ctypes.c_void_p()
    cuda.cuCtxGetCurrent(ctypes.byref(ctx))
    return ctx.value
def primary():
    ctx, device = ctypes.c_void_p(), ctypes.c_int()
    cuda.cuDeviceGet(ctypes.byref(device), 0)
    cuda.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), device)
    return ctx.value
def start_torch():
    torch.zeros(1, device="cuda")
    torch.cuda.synchronize()
def start_genesis():
    import genesis as gs
    gs.init(backend=gs.gpu, logging_level="warning")
seen = {}
for name in sys.argv[1].split(","):
    {"torch": start_torch, "genesis": start_genesis}[name]()
    seen[f"current after {name}"] = current()
seen["primary"] = primary()
print("RESULT " + json.dumps(seen))
"""


def probe(order: str) -> dict[str, int | None]:
    result = subprocess.run(
        [sys.executable, "-c", PROBE, order], capture_output=True, text=True, timeout=300, check=False
    )
    for line in result.stdout.splitlines():
        if line.startswith("RESULT "):
            return json.loads(line.removeprefix("RESULT "))
    raise RuntimeError(f"probe {order} failed:\n{result.stdout[-2000:]}\n{result.stderr[-2000:]}")


def main() -> None:
    results = {}
    for order in ("torch,genesis", "genesis,torch"):
        seen = probe(order)
        contexts = {value for key, value in seen.items() if key.startswith("current")}
        verdict = "one context (the primary)" if contexts == {seen["primary"]} else "DIFFERENT contexts"
        print(f"{order}: {verdict}: {seen}")
        results[order] = seen
    print(json.dumps(results))


if __name__ == "__main__":
    main()
