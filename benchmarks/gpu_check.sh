#!/usr/bin/env bash
# The checks that need an NVIDIA GPU, as one script for a lent GPU machine (one GPU, PyTorch and
# Lightning installed, nothing fetchable), in under 10 minutes (TOTAL_BUDGET): the `gpu`-marked tests;
# the data-parallel learner's collectives on nccl with one rank and the Doom model's sizes
# (benchmarks/gpu_collectives.py); Doom battle at the machine's cores (a rollout worker per core,
# `nproc`, on both sides), Sample Factory 2.1.1 (batched inference + learner on the GPU) against ours
# with the learner on CUDA and one CUDA inference server (`server`, fp32, no CUDA graphs: the
# baseline variant) and the same with one feature on at a time (`server_bf16`, `server_graphs`):
# steady FPS, FPS per core and wall per system; the acting step with and without the fused path
# (benchmarks/act_call.py, CartPole on the CPU: Doom battle's conv + GRU policy never takes it, and no
# key turns it off). Results: $OUT/results.md (GPU model, cores, the tables) and the logs beside it;
# copy results.md into benchmarks/README.md's "On a GPU machine: gpu_check.sh" section, dated.
# Without an NVIDIA GPU it refuses at once (exit 2), running nothing.
#   bash benchmarks/gpu_check.sh --list-variants   # each variant's overrides (runs nothing; any machine)
#
# Packages the machine lacks travel as wheels (Python 3.12): ours in .whl/, Sample Factory's
# in .whl_sf/ (it wants gymnasium<1, so it gets a folder of its own and vizdoom twice):
#   P="--no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
#      --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64"
#   pip download $P -d .whl hydra-core==1.3.8 omegaconf==2.3.1 gymnasium==1.4.0 farama-notifications \
#       multiprocess==0.70.19 dill vizdoom==1.3.2 submitit hydra-submitit-launcher
#   pip wheel --no-deps -w .whl antlr4-python3-runtime==4.9.3     # an sdist only: built here
#   pip download $P -d .whl_sf sample-factory==2.1.1 faster-fifo signal-slot-mp colorlog tensorboardX \
#       gymnasium==0.29.1 numpy==1.26.4     # SF 2.1.1 fails on numpy 2.5 ("setting an array element with a sequence")
# The call carries at most 64 MiB: vizdoom's wheel is repacked without freedoom1.wad (unused here).
# then, from the repository root: bash benchmarks/gpu_check.sh  (results under $OUT)
set -u
VARIANT_NAMES="server server_bf16 server_graphs server_bf16_learner server2 server4 in_worker"
variant_overrides() {  # the Hydra overrides of one of ours (VARIANTS), on top of the preset's
    local server="hardware.inference=server hardware.inference_device=cuda hardware.worker_num_splits=2"
    case $1 in
        server) echo "$server" ;;  # the baseline of the on/off pairs: fp32, the policy step run eagerly
        server_bf16) echo "$server hardware.precision=bf16-mixed" ;;  # learner step and the server's acting in bf16
        server_bf16_learner) echo "$server hardware.learner_precision=bf16" ;;  # the learner's forward passes only
        server_graphs) echo "$server hardware.inference_cuda_graphs=true" ;;  # the policy step replayed as CUDA graphs
        server2) echo "$server hardware.inference_workers=2" ;;
        server4) echo "${server/worker_num_splits=2/worker_num_splits=4}" ;;
        in_worker) echo "hardware.inference=in_worker" ;;
        *) echo "unknown variant $1 ($VARIANT_NAMES)" >&2; return 2 ;;
    esac
}
if [ "${1:-}" = --list-variants ]; then  # label<TAB>overrides, one a line (tests compose each one)
    for v in $VARIANT_NAMES; do printf '%s\t%s\n' "$v" "$(variant_overrides "$v")"; done
    exit 0
fi
# No GPU, no checks: refuse before installing or running anything.
if ! command -v nvidia-smi >/dev/null 2>&1 || ! nvidia-smi -L >/dev/null 2>&1; then
    echo "gpu_check.sh needs an NVIDIA GPU: nvidia-smi is missing or lists no GPU here; nothing run" >&2
    exit 2
fi
OUT=${OUT:-/tmp/gpu_check}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
TOTAL_BUDGET=${TOTAL_BUDGET:-570}  # seconds for the whole script (the 10-minute bar, less a margin)
ENV_STEPS=${ENV_STEPS:-300000}
REPEATS=${REPEATS:-2}
BENCH_TIMEOUT=${BENCH_TIMEOUT:-330}  # seconds for all the Doom battle runs together (less if the budget has less left)
RUN_TIMEOUT=${RUN_TIMEOUT:-75}  # seconds for one run (300k frames: ~30 s of ours on an H200 at 16 workers)
TESTS_TIMEOUT=${TESTS_TIMEOUT:-120}
WORKERS=${WORKERS:-$(nproc)}  # rollout workers on both sides: a worker per core
VARIANTS=${VARIANTS:-server server_bf16 server_graphs}  # ours: any of VARIANT_NAMES, in this order
SYSTEMS=${SYSTEMS:-sf,ours}  # sf,ours or ours: without Sample Factory's runs
BASELINE=${BASELINE:-}  # an older revision's folder (git archive REV train.py src conf | tar -x -C DIR): run beside ours
for v in $VARIANTS; do variant_overrides "$v" >/dev/null || exit 2; done  # a typo refused before anything runs
ulimit -n 65536 2>/dev/null
mount -o remount,size=16G /dev/shm 2>/dev/null  # shared trajectory buffers live there

left() {  # left(reserve): seconds of TOTAL_BUDGET left after keeping `reserve` for what follows, at least 1
    local n=$((TOTAL_BUDGET - SECONDS - $1))
    [ "$n" -lt 1 ] && n=1
    echo "$n"
}
at_most() { [ "$1" -lt "$2" ] && echo "$1" || echo "$2"; }  # the smaller of two whole numbers

install() {  # install(target, wheels...)
    local target=$1; shift
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target "$target" "$@"
}
install /tmp/site .whl/*.whl || exit 1
case ",$SYSTEMS," in  # Sample Factory's wheels only where its runs are asked for
    *,sf,*) install /tmp/sfsite .whl_sf/*.whl .whl/vizdoom-*.whl || exit 1 ;;
esac
export PYTHONPATH=/tmp/site:$PWD/src:$PWD

GPU_MODEL=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1)
{
    nvidia-smi -L
    echo "cores: $(nproc), memory: $(free -g | awk '/Mem/ {print $2}') GiB, /dev/shm: $(df -h /dev/shm | awk 'NR==2 {print $2}')"
    python3 -c "import torch, lightning, sys; print('python', sys.version.split()[0], 'torch', torch.__version__,
'lightning', lightning.__version__, 'cuda', torch.cuda.is_available(), torch.cuda.get_device_name())"
    [ -d /tmp/sfsite ] && PYTHONPATH=/tmp/sfsite python3 -c "from importlib.metadata import version as v; print(
'sample-factory', v('sample-factory'), 'gymnasium', v('gymnasium'), 'numpy', v('numpy'))"
} 2>&1 | tee "$OUT/machine.txt"

# What follows keeps back: the collectives 60 s, acting 40 s, the Doom battle runs (at least two rounds' worth).
[ "${SKIP_TESTS:-0}" = 1 ] || timeout "$(at_most "$TESTS_TIMEOUT" "$(left 400)")" python3 -m pytest \
    -p no:cacheprovider -q -rs -m gpu -o addopts="" \
    tests/learner/test_cuda_learner.py tests/train/test_server_inference.py tests/sampler/test_inference_server.py tests/sampler/test_graphed_act.py \
    2>&1 | tee "$OUT/gpu_tests.log"

# The nccl path with one rank: every collective of a data-parallel learner step, the Doom model's payloads.
timeout "$(at_most 60 "$(left 340)")" python3 benchmarks/gpu_collectives.py --env doom/basic 2>&1 | tee "$OUT/gpu_collectives.log"

# Fused acting on and off, where it applies (plain MLP policies; the workers act on the CPU): CartPole's
# acting step through the fused path (`policies_act`) against the model's own `act`, 1 and 2 policies.
timeout "$(at_most 40 "$(left 300)")" python3 benchmarks/act_call.py --cases cartpole:16 cartpole:64 --calls 500 --repeats 3 \
    2>&1 | tee "$OUT/act_call.log"

variant_args=()
if [ -n "$BASELINE" ]; then  # the older revision and ours alternate, both with the first variant's overrides
    first=${VARIANTS%% *}
    read -r -a shared <<< "$(variant_overrides "$first")"
    variant_args=(--baseline "$BASELINE" -- "${shared[@]}")
else
    for v in $VARIANTS; do variant_args+=("--variant=$v=$(variant_overrides "$v")"); done
fi
bench_s=$(at_most "$BENCH_TIMEOUT" "$(left 15)")
# --budget: no round started that would not end in time (the table then has the rounds that ran); timeout: a
# last guard, a little later
timeout "$((bench_s + 20))" python3 benchmarks/vs_sample_factory.py --preset doom_battle_gpu_16x8 --workers "$WORKERS" \
    --repeats "$REPEATS" --budget "$bench_s" --systems "$SYSTEMS" --env-steps "$ENV_STEPS" --timeout "$RUN_TIMEOUT" \
    --work-dir /tmp/vs --sf-python python3 --sf-pythonpath /tmp/sfsite --markdown "$OUT/doom_battle.md" \
    "${variant_args[@]}" 2>&1 | tee "$OUT/doom_battle.log"

# The results table: the machine, the Doom battle medians, the acting step, the tests' last line.
{
    echo "## gpu_check.sh, $(date -u +%Y-%m-%d), $GPU_MODEL, $(nproc) cores"
    echo
    echo "$(grep -m1 '^python' "$OUT/machine.txt"); $(grep -m1 '^sample-factory' "$OUT/machine.txt" 2>/dev/null)"
    echo
    echo "Doom battle, $WORKERS workers x 8 envs, 2 splits, batch 1024, rollout 32, $ENV_STEPS frames per run,"
    echo "medians of up to $REPEATS alternating rounds; variants (overrides on top of the preset):"
    for v in $VARIANTS; do echo "- \`$v\`: \`$(variant_overrides "$v")\`"; done
    echo
    if [ -s "$OUT/doom_battle.md" ]; then cat "$OUT/doom_battle.md"; else echo "(no table: see doom_battle.log)"; fi
    echo
    echo "Bars: ours >= 1.5x Sample Factory's steady FPS; Sample Factory's published single-machine figures,"
    echo "50k+ FPS on 10 cores (5.0k per core) and 100k+ on 36 (2.8k per core), as the anchor per core."
    echo "Fused acting: Doom battle's conv + GRU policy does not take the fused path (plain MLPs only); the acting"
    echo "step with and without it, CartPole on the CPU (act_call.py, us per call; \`model.act\` = off,"
    echo "\`policies_act (1 policy)\` and \`2 policies (fused)\` = on):"
    echo
    echo '```'
    grep -E "rows: |^model.act|^policies_act|^2 policies" "$OUT/act_call.log" 2>/dev/null
    echo '```'
    echo
    echo "gpu tests: $(grep -E 'passed|failed|error' "$OUT/gpu_tests.log" 2>/dev/null | tail -1)"
    echo "collectives: $OUT/gpu_collectives.log; whole script: ${SECONDS} s"
} > "$OUT/results.md"
cat "$OUT/results.md"

# Each run's summary (ours: profile per component) and log, in one archive (few files come back).
(cd /tmp/vs && find . -name summary.json -o -name stdout.log -o -name 'train.log' | head -200 |
    tar czf "$OUT/runs.tgz" --exclude='*.pt' --exclude='*.pth' --exclude='checkpoint*' -T -) 2>/dev/null
ls -la "$OUT"
echo "copy $OUT/results.md into benchmarks/README.md (section \"On a GPU machine: gpu_check.sh\"), dated"
