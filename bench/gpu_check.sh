#!/usr/bin/env bash
# Everything a GPU check needs, on the lent H200 (see ../shared/device/README.md): the GPU tests, then the
# transport benchmark. Results land in $OUT (or ./gpu-out).
set -uo pipefail
out=${OUT:-gpu-out}; mkdir -p "$out"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv | tee "$out/nvidia-smi.txt"
python3 -m pytest tests/gpu -q -p no:cacheprovider 2>&1 | tee "$out/gpu-tests.log" | tail -25
python3 bench/transport.py --out "$out/transport-h200.json" "$@" 2>&1 | grep -v "frontend_ir\|Graphical python" | tee "$out/transport.log" | tail -30
