#!/usr/bin/env bash
# The GPU parts of the benchmark suite and the CUDA test run, within 8 minutes, on one CUDA machine.
#
#   bash bench/gpu_check.sh            (from the repository root or anywhere)
#
# Parts, in order of importance (each under `timeout`, each allowed to fail without stopping the
# others; a shared deadline of GPU_CHECK_BUDGET seconds skips what no longer fits):
#   1. the test suite on CUDA:   MITOOL_TEST_DEVICE=cuda pytest -q tests
#   2. bench/step.py --device cuda: resnet50, 224 px, batch 256, bf16, channels_last, images/s of
#      each method next to the bare backbone's forward and backward
#   3. a short bf16 `mitool vision pretrain` (--max-steps 8) of each method, resnet50, synthetic
#      data at 224 px; then simo again with --gpu-augment decode (views made on the GPU)
#   4. bench/data.py --device cuda --images 6144 --batch-size 128 --workers 8: two-view images/s
#      of the CPU pipeline and of the GPU path
#   5. bench/bounds.py --device cuda, fp32 and bf16 embeddings (mitool's Triton kernels, its
#      chunked torch path, the plain bounds, against cat + cross_entropy)
#   6. bench/toy_speed.py --device cuda with R = 16 and R = 64 runs; bench/step.py for moco with
#      plain BatchNorm (--bn-mode sync, no split-BN); bench/step.py --compile (moco), if time is left
# Everything is printed; the log and the JSON files go to $OUT when it is set (else to
# bench/results/gpu/). Python: $PY if set, else .venv/bin/python if its torch sees CUDA, else python3.
# The command line is the `mitool` console script next to $PY when installed, otherwise
# `$PY -m mitool.cli.main` with the source tree on PYTHONPATH (bench/source_tree.sh).
# Environment knobs: GPU_CHECK_BUDGET (seconds, default 465), PY, OUT, GPU_CHECK_SKIP (comma-
# separated part names to leave out, e.g. data,pretrain-simo), GPU_CHECK_TESTS (pytest targets of
# the test part, default tests), GPU_CHECK_REHEARSAL=1: the
# same parts on the CPU at toy sizes, a check of this script itself (budget 110 s: it ends within
# 2 minutes, skipping what does not fit; the full test suite and --compile are left out).
set -u

cd "$(dirname "$0")/.." || exit 1
ROOT=$(pwd)
if [ "${GPU_CHECK_REHEARSAL:-0}" = 1 ]; then
    BUDGET=${GPU_CHECK_BUDGET:-110}
else
    BUDGET=${GPU_CHECK_BUDGET:-465}
fi
DESTINATION=${OUT:-$ROOT/bench/results/gpu}
mkdir -p "$DESTINATION" || DESTINATION=$(mktemp -d)
LOG="$DESTINATION/gpu_check.log"
SCRATCH=$(mktemp -d)
: >"$LOG"
. "$ROOT/bench/source_tree.sh"  # mitool importable without an install
export PYTHONUNBUFFERED=1

python_with_cuda() {
    "$1" -c 'import sys, torch; sys.exit(0 if torch.cuda.is_available() else 1)' >/dev/null 2>&1
}

if [ -n "${PY:-}" ]; then
    :
elif [ -x "$ROOT/.venv/bin/python" ] && python_with_cuda "$ROOT/.venv/bin/python"; then
    PY="$ROOT/.venv/bin/python"
else
    PY=python3
fi

SUMMARY=()
part_left_out() { [[ ",${GPU_CHECK_SKIP:-}," == *",$1,"* ]] && echo GPU_CHECK_SKIP; }
. "$ROOT/bench/parts.sh"

bench_script() {
    # bench_script NAME SECONDS SCRIPT ARGS...: a bench script, or a note when it does not exist yet
    local name=$1 wanted=$2 script=$3
    shift 3
    if [ ! -f "$ROOT/bench/$script" ]; then
        say "=== $name: bench/$script does not exist; skipped"
        SUMMARY+=("$name: missing (bench/$script)")
        return 0
    fi
    part "$name" "$wanted" "$PY" "$ROOT/bench/$script" "$@"
}

say "gpu_check: $(date -u +%Y-%m-%dT%H:%M:%SZ), python $PY, budget $BUDGET s, output in $DESTINATION"
"$PY" -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda, "available", torch.cuda.is_available(), torch.cuda.get_device_name(0) if torch.cuda.is_available() else "")' 2>&1 | tee -a "$LOG"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader 2>&1 | tee -a "$LOG" || true

# GPU_CHECK_REHEARSAL=1 runs the same parts on the CPU at toy sizes: a check of this script itself.
DEVICE=cuda ARCH=resnet50 SIZE=224 BATCH=256 PRETRAIN_BATCH=64 WORKERS=6
DATA=(--images 6144 --batch-size 128 --workers 8)
TOY_WIDE=64
SHAPES=(--shapes 256x16384x128,256x65536x128,4096x4095x128)
if [ "${GPU_CHECK_REHEARSAL:-0}" = 1 ]; then
    DEVICE=cpu ARCH=small-cnn SIZE=32 BATCH=32 PRETRAIN_BATCH=32 WORKERS=1
    DATA=(--images 48 --batch-size 16 --workers 1 --image-size 64)
    TOY_WIDE=4
    SHAPES=(--shapes 64x1024x32 --rounds 2)
fi

if [ -f "$(dirname "$PY")/mitool" ] && [ -x "$(dirname "$PY")/mitool" ]; then
    MITOOL=("$(dirname "$PY")/mitool")
else
    MITOOL=("$PY" -m mitool.cli.main)
fi
say "command line: ${MITOOL[*]}"

if [ "${GPU_CHECK_REHEARSAL:-0}" = 1 ]; then
    part "tests-fused-$DEVICE" 40 env MITOOL_TEST_DEVICE=$DEVICE "$PY" -m pytest -q -p no:cacheprovider \
        "$ROOT/tests/test_fused.py"
else
    # shellcheck disable=SC2086  # the targets are words
    part "tests-$DEVICE" 150 env MITOOL_TEST_DEVICE=$DEVICE "$PY" -m pytest -q -p no:cacheprovider \
        ${GPU_CHECK_TESTS:-tests}
fi
bench_script step-bf16 90 step.py --device $DEVICE --arch $ARCH --image-size $SIZE --batch-size $BATCH \
    --precision bf16 --rounds 5 --quiet --json "$DESTINATION/step_${DEVICE}.json"
pretrain() {
    # pretrain NAME OPTIONS...: 8 bf16 steps on synthetic images, the metrics printed afterwards
    local name=$1
    shift
    part "pretrain-$name" 40 "${MITOOL[@]}" vision pretrain --dataset synthetic --synthetic-size 512 \
        --image-size $SIZE --arch $ARCH --batch-size $PRETRAIN_BATCH --max-steps 8 --log-every 2 \
        --knn-every 0 --device $DEVICE --precision bf16 --workers $WORKERS --quiet \
        --out "$SCRATCH/pretrain-$name" "$@"
    [ -f "$SCRATCH/pretrain-$name/metrics.jsonl" ] && tee -a "$LOG" <"$SCRATCH/pretrain-$name/metrics.jsonl"
    return 0
}
for method in moco simo simclr; do
    pretrain "$method" --method "$method"
done
pretrain simo-gpu-augment --method simo --gpu-augment decode
bench_script data 90 data.py --device $DEVICE "${DATA[@]}" --quiet --json "$DESTINATION/data_${DEVICE}.json"
bench_script bounds-fp32 70 bounds.py --device $DEVICE --dtype float32 "${SHAPES[@]}" --quiet \
    --json "$DESTINATION/bounds_${DEVICE}_fp32.json"
bench_script bounds-bf16 60 bounds.py --device $DEVICE --dtype bfloat16 "${SHAPES[@]}" --quiet \
    --json "$DESTINATION/bounds_${DEVICE}_bf16.json"
bench_script toy-speed 30 toy_speed.py --device $DEVICE --json "$DESTINATION/toy_speed_${DEVICE}.json"
bench_script toy-speed-wide 90 toy_speed.py --device $DEVICE --runs $TOY_WIDE \
    --json "$DESTINATION/toy_speed_${DEVICE}_wide.json"
bench_script step-moco-sync-bn 40 step.py --device $DEVICE --arch $ARCH --image-size $SIZE \
    --batch-size $BATCH --precision bf16 --methods moco --bn-mode sync --rounds 5 --quiet
if [ "${GPU_CHECK_REHEARSAL:-0}" != 1 ]; then
    bench_script step-compile 80 step.py --device $DEVICE --arch $ARCH --image-size $SIZE --batch-size $BATCH \
        --precision bf16 --methods moco --compile --rounds 3 --quiet --json "$DESTINATION/step_${DEVICE}_compile.json"
fi

rm -rf "$SCRATCH"
say ""
say "gpu_check summary ($SECONDS s):"
for line in "${SUMMARY[@]}"; do
    say "  $line"
done
exit 0
