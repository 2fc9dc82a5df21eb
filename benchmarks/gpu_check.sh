#!/usr/bin/env bash
# The checks that need an NVIDIA GPU, as one script for a lent GPU machine (16 cores, one GPU,
# PyTorch and Lightning installed, nothing fetchable): the `gpu`-marked tests, then Doom battle
# frames/s of Sample Factory 2.1.1 (batched inference + learner on the GPU) against ours with
# the learner on CUDA, acting through an inference server on CUDA and in the rollout workers; the
# data-parallel learner's collectives on nccl with one rank and the Doom model's sizes
# (benchmarks/gpu_collectives.py). Without an NVIDIA GPU it refuses at once (exit 2), running nothing.
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
# No GPU, no checks: refuse before installing or running anything.
if ! command -v nvidia-smi >/dev/null 2>&1 || ! nvidia-smi -L >/dev/null 2>&1; then
    echo "gpu_check.sh needs an NVIDIA GPU: nvidia-smi is missing or lists no GPU here; nothing run" >&2
    exit 2
fi
OUT=${OUT:-/tmp/gpu_check}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
ENV_STEPS=${ENV_STEPS:-300000}
REPEATS=${REPEATS:-2}
BENCH_TIMEOUT=${BENCH_TIMEOUT:-330}  # seconds for all the Doom battle runs together
RUN_TIMEOUT=${RUN_TIMEOUT:-90}  # seconds for one run (SF takes ~76 s for 1M frames on an H200)
VARIANTS=${VARIANTS:-server server_graphs server2 in_worker}  # ours: any of these, in this order
SYSTEMS=${SYSTEMS:-sf,ours}  # sf,ours or ours: without Sample Factory's runs
BASELINE=${BASELINE:-}  # an older revision's folder (git archive REV train.py src conf | tar -x -C DIR): run beside ours
ulimit -n 65536 2>/dev/null
mount -o remount,size=16G /dev/shm 2>/dev/null  # shared trajectory buffers live there

variant_overrides() {  # the Hydra overrides of one of ours (VARIANTS)
    local server="hardware.inference=server hardware.inference_device=cuda hardware.worker_num_splits=2"
    case $1 in
        server) echo "$server" ;;
        server_graphs) echo "$server hardware.inference_cuda_graphs=true" ;;  # the policy step replayed as CUDA graphs
        server2) echo "$server hardware.inference_workers=2" ;;
        server4) echo "${server/worker_num_splits=2/worker_num_splits=4}" ;;
        in_worker) echo "hardware.inference=in_worker" ;;
        *) echo "unknown variant $1 (server, server_graphs, server2, server4, in_worker)" >&2; exit 2 ;;
    esac
}

install() {  # install(target, wheels...)
    local target=$1; shift
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target "$target" "$@"
}
install /tmp/site .whl/*.whl || exit 1
case ",$SYSTEMS," in  # Sample Factory's wheels only where its runs are asked for
    *,sf,*) install /tmp/sfsite .whl_sf/*.whl .whl/vizdoom-*.whl || exit 1 ;;
esac
export PYTHONPATH=/tmp/site:$PWD/src:$PWD

{
    nvidia-smi -L
    echo "cores: $(nproc), memory: $(free -g | awk '/Mem/ {print $2}') GiB, /dev/shm: $(df -h /dev/shm | awk 'NR==2 {print $2}')"
    python3 -c "import torch, lightning, sys; print('python', sys.version.split()[0], 'torch', torch.__version__,
'lightning', lightning.__version__, 'cuda', torch.cuda.is_available(), torch.cuda.get_device_name())"
    [ -d /tmp/sfsite ] && PYTHONPATH=/tmp/sfsite python3 -c "from importlib.metadata import version as v; print(
'sample-factory', v('sample-factory'), 'gymnasium', v('gymnasium'), 'numpy', v('numpy'))"
} 2>&1 | tee "$OUT/machine.txt"

[ "${SKIP_TESTS:-0}" = 1 ] || timeout 150 python3 -m pytest -p no:cacheprovider -q -rs -m gpu -o addopts="" \
    tests/learner/test_cuda_learner.py tests/train/test_server_inference.py tests/sampler/test_inference_server.py tests/sampler/test_graphed_act.py \
    2>&1 | tee "$OUT/gpu_tests.log"

# The nccl path with one rank: every collective of a data-parallel learner step, the Doom model's payloads.
timeout 120 python3 benchmarks/gpu_collectives.py --env doom/basic 2>&1 | tee "$OUT/gpu_collectives.log"

variant_args=()
if [ -n "$BASELINE" ]; then  # the older revision and ours alternate, both with the first variant's overrides
    first=${VARIANTS%% *}
    read -r -a shared <<< "$(variant_overrides "$first")" || exit 2
    variant_args=(--baseline "$BASELINE" -- "${shared[@]}")
else
    for v in $VARIANTS; do variant_args+=("--variant=$v=$(variant_overrides "$v")") || exit 2; done
fi
timeout "$BENCH_TIMEOUT" python3 benchmarks/vs_sample_factory.py --preset doom_battle_gpu_16x8 --repeats "$REPEATS" --systems "$SYSTEMS" \
    --env-steps "$ENV_STEPS" --timeout "$RUN_TIMEOUT" --work-dir /tmp/vs --sf-python python3 --sf-pythonpath /tmp/sfsite \
    "${variant_args[@]}" 2>&1 | tee "$OUT/doom_battle.log"

# Each run's summary (ours: profile per component) and log, in one archive (few files come back).
(cd /tmp/vs && tar czf "$OUT/runs.tgz" --exclude='*.pt' --exclude='*.pth' --exclude='checkpoint*' \
    $(find . -name summary.json -o -name stdout.log -o -name 'train.log' | head -200)) 2>/dev/null
ls -la "$OUT"
