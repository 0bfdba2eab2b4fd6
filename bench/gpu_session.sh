#!/usr/bin/env bash
# Everything a GPU session measures on the lent H200 (see ../shared/device/README.md), in phases that each fit one
# device call (10 minutes). Results land in $OUT (or ./gpu-out); each phase prints its tables last.
#   bash bench/gpu_session.sh warm      # first builds of every scene used later, in parallel; records build times
#   bash bench/gpu_session.sh measure   # context switches (with and without MPS), performance_mode, transport
#   bash bench/gpu_session.sh tests     # pytest tests/gpu
#   bash bench/gpu_session.sh profile   # where one worker's step spends the parent's time, without and with MPS
#   bash bench/gpu_session.sh spin      # the same step without and with spin_wait_us=2000, twice
#   bash bench/gpu_session.sh train [train_ppo.py args...]   # go2-walk PPO
# Issue 14 (go2-walk against the reference env), after `warm` of go2-walk and franka-reach:
#   bash bench/gpu_session.sh warm-v2   # first builds of go2-walk, franka-reach and cartpole at 4096, in parallel
#   bash bench/gpu_session.sh go2       # bench/go2_vs_reference.py on go2-walk, every path
#   bash bench/gpu_session.sh franka    # the same for franka-reach (merge its JSON with --merge), then go2 with fewer resets
#   bash bench/gpu_session.sh first-step   # bench/time_to_first_step.py, cold and warm kernel cache
# Issue 14, third session (cartpole and franka-reach kernels carried in .xfer/c/qcache-h200.tgz):
#   bash bench/gpu_session.sh warm-go2  # go2-walk's first build beside pytest tests/gpu; the kernel cache to $OUT
#   bash bench/gpu_session.sh go2       # then franka, as above
#   bash bench/gpu_session.sh worker-gap   # after warm-go2: host time per task hook in process and in the worker,
#                                          # the worker path with no Genesis in the parent, and with CUDA MPS
# Issue 14, fourth session (go2, cartpole and franka-reach kernels carried in .xfer/c/qcache-h200.tgz):
#   bash bench/gpu_session.sh final     # the committed table: go2-walk a b c d b', franka-reach b c d b', 11 rounds
#   bash bench/gpu_session.sh checks    # what the step's one wait (check_observations/actions) costs: b, b-nochecks,
#                                       # d, b', c-nochecks
#   bash bench/gpu_session.sh wait-profile  # where the worker's host waits: torch.profiler inside the worker (b, c,
#                                           # c-nochecks), syncs and the time they block per step
# Issue 14, fifth session (the non-finite flag read by the parent, the worker's step without a host wait):
#   bash bench/gpu_session.sh warm-go2     # first: pytest tests/gpu beside go2-walk's build; kernel cache to $OUT
#   bash bench/gpu_session.sh parent-wait  # go2-walk a b c d b' b-nochecks c-nochecks and franka-reach b c d b',
#                                          # 11 rounds each
#   bash bench/gpu_session.sh one-call  # with little device time: tests/gpu beside go2-walk's build, then go2-walk
#                                       # a b c d b' c-nochecks c-samestep in 7 rounds, within one device call
#   bash bench/gpu_session.sh rsl-rl    # examples/rsl_rl_go2.py: gs_gym default, reference env, gs_gym in process
#   bash bench/gpu_session.sh rsl-rl-profile  # bench/profile_rsl_rl.py: where a step of rsl_rl's rollout goes, on the
#                                             # reference env (a), gs_gym in process (b) and one worker (c)
#   bash bench/gpu_session.sh rsl-rl-frozen   # the same with the policy frozen, then c under CUDA MPS
# Session 12 (Task.read_reset_state):
#   bash bench/gpu_session.sh reset-state        # rsl_rl frozen-policy rollout a b c, with cProfile's host functions,
#                                                # then go2-walk a b-samestep b-samestep-reread for what time is left
#   bash bench/gpu_session.sh reset-state-steps  # go2-walk a b b-samestep b-samestep-reread c c-samestep, 7 rounds
# Session 13 (random draws with reusable quadrants launches, final_obs=False for rsl_rl):
#   bash bench/gpu_session.sh nofinal    # tests/gpu, go2-walk a b c d b' and the SAME_STEP variants, rsl_rl pairs
# Session 14 (at most 8 files come back from one device call):
#   bash bench/gpu_session.sh steps-and-training  # go2-walk's step benchmark as in nofinal (and b' without checks),
#                                                 # then examples/rsl_rl_go2.py in process and on the reference env
#                                                 # as pairs b a a b
#   bash bench/gpu_session.sh wrapper   # bench/wrapper_overhead.py: gs_gym's own step cost with a task of no scene
# Session 16 (Task.fresh_outputs: in process with copy=True the env clones nothing):
#   bash bench/gpu_session.sh fresh-ab  # bench/wrapper_overhead.py in process, the committed gs_gym/ against the one
#                                       # in .abold/ (an untracked copy of the previous commit's), old new old new
#   bash bench/gpu_session.sh paths-profile  # bench/profile_paths.py: d against b' on go2-walk, host time function by
#                                            # function under cProfile (~4 min with go2's first build); before it
#                                            # wall, CPU and gc time per step, and d with a host wait per step
#   bash bench/gpu_session.sh apart  # go2-walk a b c d b' b'-nochecks, one process per path, then all in one
#   bash bench/gpu_session.sh flags-event  # after `warm-go2`: profile_paths with the waits, then go2-walk's table
# Session 18 (what b' adds to d, part by part; each path in a process of its own):
#   bash bench/gpu_session.sh decompose  # go2-walk a b c d b' b'-nochecks b'-nowait, --apart, 15 rounds
#   bash bench/gpu_session.sh decompose-tests  # with little device time, on a fresh machine: decompose (cold
#                                              # builds), then pytest tests/gpu in what is left of one call
# Session 20 (the wait costs nothing measurable; is the wrapper's cost beside a real step what it is alone?):
#   bash bench/gpu_session.sh additive  # go2-walk d b' idle d+idle, --apart, 21 rounds, then the same for franka-reach
#   bash bench/gpu_session.sh table-apart  # issue 14's table in one call on a fresh machine: go2-walk a b c d b'
#                                          # b'-eager (REPEATS, 11) and franka-reach b c d b' b'-eager (11), --apart,
#                                          # into one JSON per card
#   bash bench/gpu_session.sh video     # go2-walk PPO with --capture-video, play.py's evaluation and video (needs
#                                       # imageio, imageio-ffmpeg and pillow on PYTHONPATH: the video extra)
# Session 21 (d+idle costs what b' does: the wrapper costs beside a real step what any such host work costs there):
#   bash bench/gpu_session.sh resets    # franka-reach then go2-walk, b and b' with each hook's host time
#                                       # (--hook-timers): what reset_envs costs the host per step (franka-reach's
#                                       # b - b' was 0.8-1.1 ms on the H100s)
#   bash bench/gpu_session.sh fused     # bench/fused_hooks.py: go2-walk's and franka-reach's observe, rewards and
#                                       # terminated eager, under torch.compile and from one CUDA graph (~6 min cold)
#   bash bench/gpu_session.sh fused-steps  # the same fusion in the step: go2-walk a b b-fused (15 rounds), franka-reach
#                                          # b b-fused (11), --apart (b-fused: bench/go2_vs_reference.py's patch)
# Session 22 (the task's math from a CUDA graph):
#   bash bench/gpu_session.sh graph-steps  # go2-walk b b-graph, --apart, 11 rounds (b-graph: read_state's torch math
#                                          # and the three output hooks replayed from one CUDA graph, bench only)
#   bash bench/gpu_session.sh cuda-graph  # go2-walk a b-eager b c-eager c (the cuda_graph option, off and on), --apart
#   bash bench/gpu_session.sh graph-check  # tests/gpu/test_cuda_graph_gpu.py beside go2-walk's first build, then
#                                          # cuda-graph on go2-walk only: one call of a fresh machine
#   bash bench/gpu_session.sh worker-ab  # bench/wrapper_overhead.py in process and with one worker, the committed
#                                        # gs_gym/ against .abold/gs_gym (the step outputs in one block: 13aeed2's)
# Session 24:
#   bash bench/gpu_session.sh confirm  # on a fresh machine: the GPU tests not yet run on the graph's default (the
#                                      # replaced-tensor test, SAME_STEP, state views), then table-apart
# Session 25 (c/b at the 0.9 line: is the worker path's fixed cost the GPU switching between two contexts?):
#   bash bench/gpu_session.sh wrapper-mps  # bench/wrapper_overhead.py in process and with one worker (no Genesis
#                                          # scene, no compilation), without CUDA MPS, with it, without it again
# Session 26 (does MPS take the default worker path to in process on the current code?):
#   bash bench/gpu_session.sh mps-go2  # go2-walk b and c, --apart, without CUDA MPS then with it (~5 min cold)
#   bash bench/gpu_session.sh host-speed  # bench/host_speed.py: Python and kernel launches' host time in this process
#                                         # and in spawned children (is a worker's host slower?), ~1 min
# Session 27 (the pipes' messages pickled by the standard pickler, the spin on one select.poll, the output views by
# one split):
#   mkdir -p .abold && git archive ced312a gs_gym | tar x -C .abold   # the code before, then
#   bash bench/gpu_session.sh worker-ab  # ~2 min; then table-apart for issue 14's c/b on the new code
set -uo pipefail
out=${OUT:-gpu-out}; mkdir -p "$out"
card=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -n 1 | grep -o "H[0-9]00" | tr H h)
card=${card:-gpu}  # results are named after the card they ran on (h100, h200)
phase=${1:?phase: warm, measure, profile, spin, tests, train, warm-v2, go2, franka or first-step}; shift
quiet() { grep --line-buffered -v "frontend_ir\|Graphical python\|^\[Quadrants\]"; }

mps_start() {
    command -v nvidia-cuda-mps-control >/dev/null || { echo "MPS: nvidia-cuda-mps-control not found"; return 1; }
    export CUDA_MPS_PIPE_DIRECTORY=/tmp/gs-mps-pipe CUDA_MPS_LOG_DIRECTORY=/tmp/gs-mps-log
    mkdir -p "$CUDA_MPS_PIPE_DIRECTORY" "$CUDA_MPS_LOG_DIRECTORY"
    nvidia-cuda-mps-control -d && sleep 1 && echo "MPS: daemon started"
}
tests_beside_go2_build() {
    # pytest tests/gpu while go2-walk's 4096-env scene builds (a first build compiles); the tests' last $1 lines
    nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv | tee "$out/nvidia-smi.txt"
    python3 bench/performance_mode.py --cache cold --build-only --task go2-walk --n-envs 4096 --performance-mode 0 \
        --out "$out/warm-go2.jsonl" 2>&1 | quiet > "$out/warm-go2.log" &
    python3 -m pytest tests/gpu -q -p no:cacheprovider 2>&1 | quiet > "$out/gpu-tests.log"
    wait
    tail -n "$1" "$out/gpu-tests.log"
}
unpack_kernel_cache() {
    # this card's kernel cache from .xfer/c into ~/.cache when the call carried one; fails (status 1) when it did not
    [ -f ".xfer/c/qcache-${card}.tgz" ] && mkdir -p ~/.cache && tar xzf ".xfer/c/qcache-${card}.tgz" -C ~/.cache
}
mps_stop() {
    echo quit | nvidia-cuda-mps-control
    unset CUDA_MPS_PIPE_DIRECTORY CUDA_MPS_LOG_DIRECTORY
    sleep 1
}
mps_sides() {
    # mps_sides "off on off2" FUNCTION: FUNCTION SIDE for each side in turn, with CUDA MPS running for side "on"
    # only (skipped where MPS cannot start)
    local side
    for side in $1; do
        if [ "$side" = on ]; then mps_start || continue; fi
        "$2" "$side"
        if [ "$side" = on ]; then mps_stop; fi
    done
}

case "$phase" in
warm)
    nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv | tee "$out/nvidia-smi.txt"
    perf="python3 bench/performance_mode.py --cache cold --build-only --out $out/performance_mode.jsonl"
    $perf --task go2-walk --n-envs 4096 --performance-mode 0 2>&1 | quiet > "$out/warm-go2-0.log" &
    $perf --task go2-walk --n-envs 4096 --performance-mode 1 2>&1 | quiet > "$out/warm-go2-1.log" &
    $perf --task cartpole --n-envs 4096 --performance-mode 0 2>&1 | quiet > "$out/warm-cartpole-0.log" &
    $perf --task cartpole --n-envs 4096 --performance-mode 1 2>&1 | quiet > "$out/warm-cartpole-1.log" &
    wait
    tail -n 3 "$out"/warm-*.log
    python3 bench/performance_mode.py --table "$out/performance_mode.jsonl"
    ;;
measure)
    python3 bench/context_switch.py --label "default" --out "$out/context_switch.json" 2>&1 | tail -8
    if mps_start; then
        python3 bench/context_switch.py --label "MPS on" --out "$out/context_switch-mps.json" 2>&1 | tail -8
        python3 bench/transport.py --only 2 3 --n-envs 64 4096 16384 --seconds 0.5 --label "MPS on" \
            --out "$out/transport-mps.json" 2>&1 | quiet > "$out/transport-mps.log"
        mps_stop
    fi
    perf="python3 bench/performance_mode.py --out $out/performance_mode.jsonl"
    for task in go2-walk cartpole; do
        for mode in 0 1; do $perf --task $task --n-envs 4096 --performance-mode $mode 2>&1 | quiet | tail -1; done
    done
    python3 bench/transport.py --n-envs 64 4096 16384 1024 --seconds 0.5 --label "default (no MPS)" \
        --out "$out/transport-${card}.json" 2>&1 | quiet > "$out/transport.log"
    tail -n 12 "$out/transport-mps.log" 2>/dev/null
    tail -n 20 "$out/transport.log"
    python3 bench/performance_mode.py --table "$out/performance_mode.jsonl"
    ;;
spin)
    for us in 0 2000 0 2000; do
        python3 bench/profile_step.py --spin-wait-us $us --label "spin_wait_us=$us" --steps 1000 \
            --out "$out/profile-spin-$us.txt" 2>&1 | quiet | grep -A1 "no profiler"
    done
    ;;
profile)
    python3 bench/profile_step.py --label "no MPS" --out "$out/profile-step.txt" 2>&1 | quiet | head -40
    if mps_start; then
        python3 bench/profile_step.py --label "MPS on" --out "$out/profile-step-mps.txt" 2>&1 | quiet | head -40
        mps_stop
    fi
    ;;
warm-v2)
    nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv | tee "$out/nvidia-smi.txt"
    perf="python3 bench/performance_mode.py --cache cold --build-only --out $out/warm-v2.jsonl"
    for task in go2-walk franka-reach cartpole; do
        $perf --task $task --n-envs 4096 --performance-mode 0 2>&1 | quiet > "$out/warm-$task.log" &
    done
    wait
    tail -n 3 "$out"/warm-*.log
    ;;
worker-gap)
    # priority order: each step writes its JSON to $out as it finishes, so a call cut short keeps what ran
    lscpu | grep -E "^(Model name|CPU\(s\)|Thread|Core|Socket|NUMA)" | tee "$out/lscpu.txt"
    gap="timeout 150 python3 bench/go2_vs_reference.py --tasks go2-walk --hook-timers --repeats 5 --steps 200"
    $gap --paths b c --out "$out/go2-hooks-${card}.json" 2>&1 | quiet | tail -16
    $gap --paths c --out "$out/go2-hooks-c-alone-${card}.json" 2>&1 | quiet | tail -8  # no Genesis in the parent
    if [ -f .xfer/c/torch-first.patch ]; then  # the worker starts torch's CUDA context before quadrants
        patch -p1 < .xfer/c/torch-first.patch
        $gap --paths c --out "$out/go2-hooks-c-alone-torch-first-${card}.json" 2>&1 | quiet | tail -8
        patch -R -p1 < .xfer/c/torch-first.patch
    fi
    timeout 120 python3 bench/cuda_contexts.py 2>&1 | quiet | tail -3 | tee "$out/cuda-contexts.txt"
    if mps_start; then
        $gap --paths b c --out "$out/go2-hooks-mps-${card}.json" 2>&1 | quiet | tail -16
        mps_stop
    fi
    ;;
final)
    nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv | tee "$out/nvidia-smi.txt"
    python3 bench/go2_vs_reference.py --tasks go2-walk --paths a b c d "b'" --repeats 11 --steps 100 \
        --out "$out/go2-vs-reference-${card}.json" 2>&1 | quiet | tee "$out/go2-vs-reference.log" | tail -14
    python3 bench/go2_vs_reference.py --tasks franka-reach --paths b c d "b'" --repeats 11 --steps 100 --merge \
        --out "$out/go2-vs-reference-${card}.json" 2>&1 | quiet | tee "$out/franka-vs-raw.log" | tail -12
    ;;
checks)
    python3 bench/go2_vs_reference.py --tasks go2-walk --paths b b-nochecks d "b'" c-nochecks --repeats 9 --steps 100 \
        --count-steps 2 --profile-steps 2 --out "$out/go2-checks-${card}.json" 2>&1 | quiet | tail -14
    ;;
one-call)
    # one device call (10 minutes) when little device time is left: pytest tests/gpu beside go2-walk's first
    # build, then go2-walk a b c d b', c without the checks and with SAME_STEP, 7 rounds, for what time remains
    # (the log keeps what finished); GS_PATHS replaces the paths; .xfer/c/qcache-<card>.tgz, when carried, is the
    # kernel cache of an earlier session on this kind of card
    start=$(date +%s)
    unpack_kernel_cache
    tests_beside_go2_build 8
    left=$(( ${GS_CALL_SECONDS:-585} - ($(date +%s) - start) ))
    echo "tests and build took $(( $(date +%s) - start )) s; ${left} s left for go2-walk"
    timeout "$left" python3 bench/go2_vs_reference.py --tasks go2-walk \
        --paths ${GS_PATHS:-a b c d "b'" c-nochecks c-samestep} --repeats 7 --steps 100 \
        --out "$out/go2-vs-reference-${card}.json" 2>&1 | quiet | tee "$out/go2-vs-reference.log" | tail -16
    ;;
parent-wait)
    nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv | tee "$out/nvidia-smi.txt"
    python3 bench/go2_vs_reference.py --tasks go2-walk --paths a b c d "b'" b-nochecks c-nochecks --repeats 11 \
        --steps 100 --out "$out/go2-vs-reference-${card}.json" 2>&1 | quiet | tee "$out/go2-vs-reference.log" | tail -16
    python3 bench/go2_vs_reference.py --tasks franka-reach --paths b c d "b'" --repeats 11 --steps 100 --merge \
        --out "$out/go2-vs-reference-${card}.json" 2>&1 | quiet | tee "$out/franka-vs-raw.log" | tail -12
    ;;
wait-profile)
    # how long the step's host syncs block the process that runs the task, in process and in the worker
    python3 bench/go2_vs_reference.py --tasks go2-walk --paths b c c-nochecks --hook-timers --repeats 5 --steps 100 \
        --profile-steps 20 --out "$out/go2-wait-profile-${card}.json" 2>&1 | quiet | tail -16
    ;;
video)
    export PYOPENGL_PLATFORM=egl
    python3 examples/train_ppo.py --task go2-walk --max-train-time 120 --log-every 10 --out-dir "$out/go2-walk" \
        --capture-video --video-envs 4 2>&1 | quiet | tee "$out/train.log" | tail -12
    python3 examples/play.py "$out/go2-walk/checkpoint.pt" --max-steps 250 --json "$out/play-go2.json" 2>&1 | quiet \
        | tee "$out/play.log" | tail -4
    python3 examples/play.py "$out/go2-walk/checkpoint.pt" --video "$out/go2-play.mp4" --video-envs 4 --max-steps 300 \
        2>&1 | quiet | tee "$out/play-video.log" | tail -4
    ;;
rsl-rl)
    # examples/rsl_rl_go2.py (Genesis's go2 recipe) on gs_gym's default path, on the reference env, in process
    for run in "gs_gym --num-workers 1" "reference" "gs_gym --num-workers 0"; do
        name=$(echo "$run" | sed 's/ --num-workers 1//; s/ --num-workers 0/-inprocess/')
        python3 examples/rsl_rl_go2.py --env $run --out "/tmp/rsl_rl_go2-$name" 2>&1 | quiet \
            > "$out/rsl_rl_go2-$name.log"
        cp "/tmp/rsl_rl_go2-$name/curve.json" "$out/rsl_rl_go2-$name-${card}.json"
        tail -n 4 "$out/rsl_rl_go2-$name.log"
    done
    ;;
rsl-rl-profile)
    # the reference env first: its scene compiles the kernels that go2-walk's builds then load
    for run in "a reference" "b gs_gym --num-workers 0" "c gs_gym --num-workers 1"; do
        set -- $run; path=$1; shift
        python3 bench/profile_rsl_rl.py --env "$@" --out "$out/profile-rsl-rl-$path-${card}.json" 2>&1 | quiet \
            > "$out/profile-rsl-rl-$path.log"
        tail -n 16 "$out/profile-rsl-rl-$path.log"
    done
    python3 bench/profile_rsl_rl.py --table "$out"/profile-rsl-rl-?-"${card}".json
    ;;
rsl-rl-frozen)
    # the same with the policy frozen (the same physics per step in every env), then c under CUDA MPS
    for run in "a reference" "b gs_gym --num-workers 0" "c gs_gym --num-workers 1" "c-mps gs_gym --num-workers 1"; do
        set -- $run; path=$1; shift
        label=""; mps=0
        case $path in
        *-mps) if mps_start >/dev/null; then label="MPS on"; mps=1; else label="MPS unavailable"; fi;;
        esac
        python3 bench/profile_rsl_rl.py --env "$@" --frozen-policy --label "$label" --iterations 8 \
            --out "$out/frozen-$path-${card}.json" 2>&1 | quiet > "$out/frozen-$path.log"
        if [ "$mps" = 1 ]; then mps_stop; fi
        tail -n 1 "$out/frozen-$path.log"
    done
    python3 bench/profile_rsl_rl.py --table "$out"/frozen-*-"${card}".json
    ;;
reset-state)
    # Task.read_reset_state (the SAME_STEP state of new episodes written by the task): rsl_rl's rollout with the
    # policy frozen on a, b and c, with the host functions cProfile finds (a first: it compiles go2's kernels, unless
    # .xfer/c/qcache-${card}.tgz carries them); the kernel cache then goes to $OUT for the next session to carry
    unpack_kernel_cache
    nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv | tee "$out/nvidia-smi.txt"
    for run in "a reference" "b gs_gym --num-workers 0" "c gs_gym --num-workers 1"; do
        set -- $run; path=$1; shift
        python3 bench/profile_rsl_rl.py --env "$@" --frozen-policy --host-profile --iterations 8 \
            --out "$out/reset-state-$path-${card}.json" 2>&1 | quiet > "$out/reset-state-$path.log"
        tail -n 31 "$out/reset-state-$path.log" | cut -c1-160
    done
    python3 bench/profile_rsl_rl.py --table "$out"/reset-state-?-"${card}".json
    [ -f ".xfer/c/qcache-${card}.tgz" ] || tar czf "$out/qcache-${card}.tgz" -C ~/.cache quadrants
    left=$(( ${GS_CALL_SECONDS:-570} - SECONDS ))
    echo "${left} s left for the step benchmark"
    if [ "$left" -gt 90 ]; then
        timeout "$left" python3 bench/go2_vs_reference.py --tasks go2-walk --paths a b-samestep b-samestep-reread \
            --repeats 5 --steps 100 --out "$out/go2-reset-state-${card}.json" 2>&1 | quiet \
            | tee "$out/go2-reset-state.log" | tail -9
    fi
    ;;
reset-state-steps)
    # then the step benchmark: SAME_STEP in process with and without the task's read_reset_state, beside a b c
    timeout "${GS_CALL_SECONDS:-570}" python3 bench/go2_vs_reference.py --tasks go2-walk \
        --paths a b b-samestep b-samestep-reread c c-samestep --repeats 7 --steps 100 \
        --out "$out/go2-reset-state-${card}.json" 2>&1 | quiet | tee "$out/go2-reset-state.log" | tail -16
    ;;
nofinal)
    # Thirteenth session's changes (draws with reusable launches, final_obs=False in the rsl_rl adapter), one call:
    # tests/gpu beside go2-walk's build (from .xfer/c's kernel cache when it carries this card's), go2-walk's step
    # benchmark with the SAME_STEP variants, then rsl_rl's frozen-policy rollout as pairs b a a b while time is
    # left (GS_CALL_SECONDS); the kernel cache goes to $OUT right after the build when none was carried
    start=$(date +%s)
    carried=0
    unpack_kernel_cache && carried=1
    tests_beside_go2_build 3
    [ "$carried" = 1 ] || tar czf "$out/qcache-${card}.tgz" -C ~/.cache quadrants  # before what may time out
    timeout $(( ${GS_CALL_SECONDS:-540} - ($(date +%s) - start) )) python3 bench/go2_vs_reference.py --tasks go2-walk \
        --paths a b c d "b'" b-samestep b-samestep-nofinal c-samestep-nofinal --repeats 7 --steps 100 \
        --out "$out/go2-vs-reference-${card}.json" 2>&1 | quiet | tee "$out/go2-vs-reference.log" | tail -14
    for run in "b1 gs_gym --num-workers 0" "a1 reference" "a2 reference" "b2 gs_gym --num-workers 0"; do
        [ $(( $(date +%s) - start )) -lt "${GS_CALL_SECONDS:-540}" ] || break
        set -- $run; path=$1; shift
        python3 bench/profile_rsl_rl.py --env "$@" --frozen-policy --iterations 8 --profile-iterations 1 \
            --out "$out/frozen-$path-${card}.json" 2>&1 | quiet > "$out/frozen-$path.log"
    done
    python3 bench/profile_rsl_rl.py --table "$out"/frozen-*-"${card}".json 2>&1 | head -10
    ;;
steps-and-training)
    start=$(date +%s)
    unpack_kernel_cache
    timeout 220 python3 bench/go2_vs_reference.py --tasks go2-walk \
        --paths a b c d "b'" "b'-nochecks" b-samestep b-samestep-nofinal c-samestep-nofinal --repeats 7 --steps 100 \
        --out "$out/go2-vs-reference-${card}.json" 2>&1 | quiet > "$out/go2-vs-reference.log"
    tail -n 14 "$out/go2-vs-reference.log"
    for run in "b1 gs_gym --num-workers 0" "a1 reference" "a2 reference" "b2 gs_gym --num-workers 0"; do
        [ $(( $(date +%s) - start )) -lt "${GS_CALL_SECONDS:-540}" ] || break
        set -- $run; name=$1; shift
        python3 examples/rsl_rl_go2.py --env "$@" --out "/tmp/rsl_rl_go2-$name" 2>&1 | quiet \
            > "/tmp/rsl_rl_go2-$name.log"
        cp "/tmp/rsl_rl_go2-$name/curve.json" "$out/rsl_rl_go2-$name-${card}.json"
        { echo "== $name: $*"; tail -n 4 "/tmp/rsl_rl_go2-$name.log"; } | tee -a "$out/rsl_rl_go2.log"
    done
    ;;
fresh-ab)
    [ -d .abold/gs_gym ] || { echo "fresh-ab: .abold/gs_gym (the previous commit's gs_gym/) is missing"; exit 2; }
    for round in 1 2; do
        for side in old new; do
            path=$PYTHONPATH; [ "$side" = old ] && path="$PWD/.abold:$PYTHONPATH"
            PYTHONPATH=$path python3 bench/wrapper_overhead.py --backend gpu --variants "in process" \
                "in process, checks off" "in process, SAME_STEP" "in process, fresh outputs" \
                --out "$out/wrapper-ab-$side-$round-${card}.json" 2>&1 | quiet | tail -n 6 | sed "s/^/$side $round: /"
        done
    done
    ;;
cuda-graph)
    # the cuda_graph option timed (on by default for these tasks since 68c56eb's run of b b-cudagraph c c-cudagraph):
    # go2-walk a b-eager b c-eager c, then franka-reach b-eager b c-eager c, --apart; fits one call (FRANKA=0 leaves
    # franka-reach out)
    timeout "${LIMIT:-330}" python3 bench/go2_vs_reference.py --tasks go2-walk --paths a b-eager b c-eager c \
        --repeats "${REPEATS:-11}" --apart --out "$out/cuda-graph-${card}.json" 2>&1 | quiet > "$out/cuda-graph.log"
    tail -n 9 "$out/cuda-graph.log"
    [ "${FRANKA:-1}" = 1 ] || exit 0
    timeout "${FRANKA_LIMIT:-220}" python3 bench/go2_vs_reference.py --tasks franka-reach --paths b-eager b c-eager \
        c --repeats "${REPEATS:-11}" --apart --merge --out "$out/cuda-graph-${card}.json" 2>&1 | quiet \
        > "$out/cuda-graph-franka.log"
    tail -n 8 "$out/cuda-graph-franka.log"
    ;;
graph-check)
    # with little device time, on a fresh machine: the cuda_graph GPU tests beside go2-walk's first 4096-env build,
    # then cuda-graph on go2-walk only (LIMIT, REPEATS as there)
    nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv | tee "$out/nvidia-smi.txt"
    python3 bench/performance_mode.py --cache cold --build-only --task go2-walk --n-envs 4096 --performance-mode 0 \
        --out "$out/warm-go2.jsonl" 2>&1 | quiet > "$out/warm-go2.log" &
    timeout "${TESTS_LIMIT:-300}" python3 -m pytest tests/gpu/test_cuda_graph_gpu.py -q -p no:cacheprovider 2>&1 \
        | quiet > "$out/gpu-tests-graph.log"
    wait
    tail -n 12 "$out/gpu-tests-graph.log"
    FRANKA=0 bash "$0" cuda-graph
    ;;
confirm)
    # one call of a fresh machine: the GPU tests that did not run on af2ebaf's code (the replaced-tensor test as mended
    # in 0973a15, SAME_STEP, the state views; their first builds compile the kernels the table reuses at 4096 envs),
    # then table-apart
    nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv | tee "$out/nvidia-smi.txt"
    timeout "${TESTS_LIMIT:-300}" python3 -m pytest \
        tests/gpu/test_cuda_graph_gpu.py::test_a_replaced_tensor_is_caught_by_the_first_replays \
        tests/gpu/test_same_step_gpu.py tests/gpu/test_state_views_gpu.py -v --tb=short -p no:cacheprovider 2>&1 \
        | quiet | tee "$out/gpu-tests-confirm.log" | grep --line-buffered -E "PASSED|FAILED|ERROR|passed|failed|^E "
    bash "$0" table-apart
    ;;
worker-ab)
    # the worker path's step with the committed gs_gym/ against .abold/gs_gym (an untracked copy of an older commit's,
    # e.g. `mkdir -p .abold && git archive 13aeed2 gs_gym | tar x -C .abold`), old new old new, on one machine
    [ -d .abold/gs_gym ] || { echo "worker-ab: .abold/gs_gym (the older commit's gs_gym/) is missing"; exit 2; }
    for round in 1 2; do
        for side in old new; do
            path=$PYTHONPATH; [ "$side" = old ] && path="$PWD/.abold:$PYTHONPATH"
            PYTHONPATH=$path python3 bench/wrapper_overhead.py --backend gpu --variants "in process" "1 worker" \
                "1 worker, checks off" --out "$out/worker-ab-$side-$round-${card}.json" 2>&1 | quiet | tail -n 5 \
                | sed "s/^/$side $round: /"
        done
    done
    ;;
paths-profile)
    timeout 400 python3 bench/profile_paths.py --paths d "b'" --synced d --out "$out/profile-paths-${card}.json" 2>&1 \
        | quiet | tee "$out/profile-paths.log" | tail -n 62
    ;;
apart)
    # go2_vs_reference.py with each path in a process of its own (--apart), then the same paths in one process, on
    # the same machine
    timeout 330 python3 bench/go2_vs_reference.py --tasks go2-walk --paths a b c d "b'" "b'-nochecks" --repeats 7 \
        --apart --out "$out/go2-vs-reference-${card}-apart.json" 2>&1 | quiet > "$out/go2-vs-reference-apart.log"
    tail -n 14 "$out/go2-vs-reference-apart.log"
    timeout 230 python3 bench/go2_vs_reference.py --tasks go2-walk --paths a b c d "b'" "b'-nochecks" --repeats 7 \
        --out "$out/go2-vs-reference-${card}-one-process.json" 2>&1 | quiet > "$out/go2-vs-reference-one-process.log"
    tail -n 14 "$out/go2-vs-reference-one-process.log"
    ;;
flags-event)
    # after `warm-go2` on the same machine (tests/gpu beside go2-walk's first build): d, b', b'-nochecks and d with
    # a stream or an event wait per step, then go2-walk's table (each part leaves its files in $OUT as it ends)
    timeout 200 python3 bench/profile_paths.py --paths d "b'" "b'-nochecks" --synced d --rounds 0 --plain-rounds 3 \
        --out "$out/profile-paths-${card}-event.json" 2>&1 | quiet > "$out/profile-paths-event.log"
    grep -A 8 "gc as is" "$out/profile-paths-event.log"
    timeout 250 python3 bench/go2_vs_reference.py --tasks go2-walk --paths a b c d "b'" "b'-nochecks" --repeats 7 \
        --out "$out/go2-vs-reference-${card}-event.json" 2>&1 | quiet > "$out/go2-vs-reference-event.log"
    tail -n 12 "$out/go2-vs-reference-event.log"
    ;;
decompose)
    # d -> b'-nochecks is the wrapper without its checks, -> b'-nowait adds the checks' kernels, -> b' their one host
    # wait; a, b and c for the table's ratios. On a fresh machine the paths' processes compile at once (~2 min)
    # shellcheck disable=SC2086  # PATHS is a list of words
    timeout "${LIMIT:-380}" python3 bench/go2_vs_reference.py --tasks go2-walk --paths ${PATHS:-a b c d b\' b\'-nochecks b\'-nowait} \
        --repeats "${REPEATS:-15}" --apart --out "$out/go2-vs-reference-${card}-decompose.json" 2>&1 | quiet \
        > "$out/go2-vs-reference-decompose.log"
    tail -n 16 "$out/go2-vs-reference-decompose.log"
    ;;
decompose-tests)
    bash "$0" decompose
    nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv > "$out/nvidia-smi.txt"
    timeout 180 python3 -m pytest tests/gpu -q -p no:cacheprovider 2>&1 | quiet > "$out/gpu-tests.log"
    tail -n 6 "$out/gpu-tests.log"
    ;;
table-apart)
    nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv | tee "$out/nvidia-smi.txt"
    # b' replays the CUDA graph by default while d calls the hooks eagerly: b'-eager (cuda_graph=False) beside it
    timeout 330 python3 bench/go2_vs_reference.py --tasks go2-walk --paths a b c d "b'" "b'-eager" \
        --repeats "${REPEATS:-11}" --apart \
        --out "$out/go2-vs-reference-${card}.json" 2>&1 | quiet > "$out/go2-vs-reference.log"
    tail -n 10 "$out/go2-vs-reference.log"
    timeout 220 python3 bench/go2_vs_reference.py --tasks franka-reach --paths b c d "b'" "b'-eager" --repeats 11 \
        --apart --merge \
        --out "$out/go2-vs-reference-${card}.json" 2>&1 | quiet > "$out/franka-vs-raw.log"
    tail -n 9 "$out/franka-vs-raw.log"
    ;;
additive)
    # d+idle - d against idle: the wrapper's own cost (a task of no scene) beside a real step and alone; b' - d for
    # comparison. Each path in a process of its own; on a fresh machine go2-walk's first build compiles (~3 min),
    # franka-reach's then reuses most of its kernels (~1 min): 330 + 240 s at most, within one call
    for task in go2-walk franka-reach; do
        limit=330; [ "$task" = franka-reach ] && limit=240
        timeout "$limit" python3 bench/go2_vs_reference.py --tasks "$task" --paths d "b'" idle d+idle \
            --repeats "${REPEATS:-21}" --apart --merge --out "$out/additive-${card}.json" 2>&1 | quiet \
            > "$out/additive-${task}.log"
        tail -n 9 "$out/additive-${task}.log"
    done
    ;;
resets)
    # what a step's resets cost the host: b against b' (episode ends lifted) with each task hook's host time
    # (reset_envs among them), franka-reach then go2-walk, each path in a process of its own
    for task in franka-reach go2-walk; do
        limit=240; [ "$task" = go2-walk ] && limit=330
        timeout "$limit" python3 bench/go2_vs_reference.py --tasks "$task" --paths b "b'" --hook-timers \
            --repeats "${REPEATS:-11}" --apart --merge --out "$out/resets-${card}.json" 2>&1 | quiet \
            > "$out/resets-${task}.log"
        grep "hooks of" "$out/resets-${task}.log"; tail -n 6 "$out/resets-${task}.log"
    done
    ;;
fused)
    # what fusing go2-walk's and franka-reach's observe + compute_rewards + compute_terminated would save per step:
    # eager, torch.compile (Triton), torch.compile with CUDA graphs, one CUDA graph; gs_gym itself is unchanged
    # (Triton builds its launchers with the machine's C compiler: say whether there is one)
    { command -v cc || command -v gcc || echo "no C compiler"
      python3 -c "import triton; print('triton', triton.__version__)"; } 2>&1 | tee "$out/compilers.txt"
    timeout "${LIMIT:-540}" python3 bench/fused_hooks.py --backend gpu --tasks go2-walk franka-reach \
        --out "$out/fused-hooks-${card}.json" 2>&1 | quiet > "$out/fused-hooks.log"
    tail -n 16 "$out/fused-hooks.log"
    ;;
fused-steps)
    # the same fusion in a real step (bench only): go2-walk a b b-fused, then franka-reach b b-fused, --apart
    timeout 330 python3 bench/go2_vs_reference.py --tasks go2-walk --paths a b b-fused --repeats "${REPEATS:-15}" \
        --apart --out "$out/fused-steps-${card}.json" 2>&1 | quiet > "$out/fused-steps-go2-walk.log"
    tail -n 8 "$out/fused-steps-go2-walk.log"
    timeout 220 python3 bench/go2_vs_reference.py --tasks franka-reach --paths b b-fused --repeats "${REPEATS:-11}" \
        --apart --merge --out "$out/fused-steps-${card}.json" 2>&1 | quiet > "$out/fused-steps-franka-reach.log"
    tail -n 7 "$out/fused-steps-franka-reach.log"
    ;;
graph-steps)
    # go2-walk's task math from one CUDA graph in a real step (bench only): b b-graph, --apart; fits a fresh machine
    # with ~5 minutes of device time left (go2-walk's first build ~2 min)
    timeout "${LIMIT:-280}" python3 bench/go2_vs_reference.py --tasks go2-walk --paths b b-graph \
        --repeats "${REPEATS:-11}" --apart --out "$out/graph-steps-${card}.json" 2>&1 | quiet > "$out/graph-steps.log"
    tail -n 7 "$out/graph-steps.log"
    ;;
wrapper-mps)
    nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv | tee "$out/nvidia-smi.txt"
    wrapper_side() {
        python3 bench/wrapper_overhead.py --backend gpu --variants "in process" "1 worker" "1 worker, checks off" \
            --out "$out/wrapper-mps-$1-${card}.json" 2>&1 | quiet | tail -n 5 | sed "s/^/MPS $1: /"
    }
    mps_sides "off on off2" wrapper_side
    ;;
mps-go2)
    # c/b with and without CUDA MPS, each side paired within its rounds; the first side pays go2-walk's first build
    nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv | tee "$out/nvidia-smi.txt"
    go2_side() {
        timeout 280 python3 bench/go2_vs_reference.py --tasks go2-walk --paths b c --repeats "${REPEATS:-9}" --apart \
            --out "$out/go2-mps-$1-${card}.json" 2>&1 | quiet > "$out/go2-mps-$1.log"
        tail -n 6 "$out/go2-mps-$1.log" | sed "s/^/MPS $1: /"
    }
    mps_sides "off on" go2_side
    ;;
host-speed)
    python3 bench/host_speed.py --out "$out/host-speed-${card}.json" 2>&1 | tail -n 6
    ;;
wrapper)
    python3 bench/wrapper_overhead.py --backend gpu --out "$out/wrapper-overhead-${card}.json" 2>&1 | quiet \
        | tee "$out/wrapper-overhead.log" | tail -10
    ;;
warm-go2)
    if [ -f .xfer/c/qcache-h200.tgz ]; then mkdir -p ~/.cache && tar xzf .xfer/c/qcache-h200.tgz -C ~/.cache; fi
    nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv | tee "$out/nvidia-smi.txt"
    python3 bench/performance_mode.py --cache cold --build-only --task go2-walk --n-envs 4096 --performance-mode 0 \
        --out "$out/warm-go2.jsonl" 2>&1 | quiet > "$out/warm-go2.log" &
    python3 bench/performance_mode.py --cache cold --build-only --task franka-reach --n-envs 4096 --performance-mode 0 \
        --out "$out/warm-franka.jsonl" 2>&1 | quiet > "$out/warm-franka.log" &
    python3 -m pytest tests/gpu -q -p no:cacheprovider 2>&1 | quiet > "$out/gpu-tests.log"
    wait
    tar czf "$out/qcache-h200.tgz" -C ~/.cache quadrants && ls -la "$out/qcache-h200.tgz"
    tail -n 3 "$out/warm-go2.log" "$out/warm-franka.log"; tail -n 15 "$out/gpu-tests.log"
    ;;
go2)
    python3 bench/go2_vs_reference.py --tasks go2-walk --out "$out/go2-vs-reference-${card}.json" 2>&1 | quiet \
        | tee "$out/go2-vs-reference.log" | tail -30
    ;;
franka)
    python3 bench/go2_vs_reference.py --tasks franka-reach --out "$out/franka-vs-raw-${card}.json" 2>&1 \
        | quiet | tee "$out/franka-vs-raw.log" | tail -20
    python3 bench/go2_vs_reference.py --tasks go2-walk --paths a b c --action-scale 0.1 \
        --out "$out/go2-vs-reference-scale0.1-${card}.json" 2>&1 | quiet | tee "$out/go2-scale0.1.log" | tail -20
    ;;
first-step)
    python3 bench/time_to_first_step.py --backend gpu --warm-runs 2 --out "$out/time-to-first-step-${card}.json" 2>&1 \
        | quiet | tail -20
    ;;
tests)
    # every file of tests/gpu, the CUDA graph's first (its first build compiles go2-walk's and franka-reach's kernels
    # for the rest); one line per test as it ends, so that a call cut short still says what passed
    nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv | tee "$out/nvidia-smi.txt"
    timeout "${TESTS_LIMIT:-570}" python3 -m pytest tests/gpu/test_cuda_graph_gpu.py \
        $(ls tests/gpu/test_*.py | grep -v test_cuda_graph_gpu) -v -p no:cacheprovider --durations=8 2>&1 | quiet \
        | tee "$out/gpu-tests.log" | grep --line-buffered -E "PASSED|FAILED|ERROR|SKIPPED|passed|failed|^E " | tail -45
    ;;
train)
    python3 examples/train_ppo.py --task go2-walk --out-dir "$out/go2-walk" "$@" 2>&1 | quiet | tee "$out/train.log" \
        | tail -40
    ;;
*)
    echo "unknown phase $phase"; exit 2
    ;;
esac
