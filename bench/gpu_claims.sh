#!/usr/bin/env bash
# The vision claims at GPU scale, in one go within about 8 minutes on one CUDA GPU (an H200):
#
#   bash bench/gpu_claims.sh               (from the repository root or anywhere)
#
# Parts, in order (each under `timeout`, each allowed to fail without stopping the others; a shared
# deadline of GPU_CLAIMS_BUDGET seconds, default 470, skips what no longer fits):
#   1. split-bn: bench/step.py --device cuda, resnet50, 224 px, batch 256, bf16, moco with one-GPU
#      split-BN (8 groups) and moco with plain BatchNorm (--bn-mode sync): the split-BN overhead
#      (target: at most 20% over plain BN)
#   2. eqco: `mitool vision sweep`, SiMo with eqco (alpha 256) and with infonce, K = 4, 16, 64, 256,
#      2 seeds, and MoCo v2 infonce (queue 4096, 2 seeds) as the reference; resnet18 with the small
#      stem, full Fashion-MNIST, batch 512, bf16, --gpu-augment decode, --parallel 4
#   3. dcl: `mitool vision sweep`, SimCLR with infonce, dcl, dclw at batch 32, 64, 128, 256, 512,
#      2 seeds, same network and data
#   4. lightly: bench/lightly_compare.py --device cuda, resnet18, simclr, dcl and moco, one run of
#      each library at a time (mitool's views made on the GPU, lightly's CPU transforms, as many
#      loader workers each); lightly comes from bench/.wheels (see below) when not installed
# Optional part (GPU_CLAIMS_PARTS=recipe, about 9 minutes on its own, so for a session of its own):
#   recipe: the Fashion-MNIST recipe at GPU scale: moco, simo and simclr + dcl, resnet18, three runs
#      side by side, each cosine schedule fitted to 8 minutes (--max-minutes 8)
#
# The sweeps are resumable: running the script again on the same machine continues unfinished runs
# (their scratch folder is GPU_CLAIMS_SCRATCH, default /tmp/mitool-gpu-claims). What comes back is
# small: the log, the sweeps' summary.csv, figures, and each run's run.json, result.json and
# metrics.jsonl (no checkpoints), the JSON of step.py and lightly_compare.py, in $OUT when set,
# else bench/results/claims/gpu/.
#
# lightly on a machine without network: on a machine with PyPI access, before the GPU session,
#   pip download --no-deps -d bench/.wheels lightly lightning-utilities tqdm
# (about 0.4 MB of pure-Python wheels; untracked files travel with the working tree); the script
# installs them with pip --no-index --target into its scratch folder and puts that on PYTHONPATH.
#
# Knobs: GPU_CLAIMS_BUDGET (seconds), GPU_CLAIMS_PARTS (comma-separated, default
# split-bn,eqco,dcl,lightly), PY, OUT, GPU_CLAIMS_PARALLEL (default 4), GPU_CLAIMS_EPOCHS_EQCO
# (default 2), GPU_CLAIMS_EPOCHS_DCL (default 1). GPU_CLAIMS_REHEARSAL=1: the same parts on the CPU
# at toy sizes (small CNN, synthetic images for the sweeps, a few steps of lightly_compare), a
# check of this script itself within about 3 minutes.
set -u

cd "$(dirname "$0")/.." || exit 1
ROOT=$(pwd)
REHEARSAL=${GPU_CLAIMS_REHEARSAL:-0}
if [ "$REHEARSAL" = 1 ]; then BUDGET=${GPU_CLAIMS_BUDGET:-240}; else BUDGET=${GPU_CLAIMS_BUDGET:-470}; fi
PARTS=${GPU_CLAIMS_PARTS:-split-bn,eqco,dcl,lightly}
DESTINATION=${OUT:-$ROOT/bench/results/claims/gpu}
mkdir -p "$DESTINATION" || DESTINATION=$(mktemp -d)
SCRATCH=${GPU_CLAIMS_SCRATCH:-/tmp/mitool-gpu-claims}
mkdir -p "$SCRATCH"
LOG="$DESTINATION/gpu_claims.log"
: >"$LOG"
. "$ROOT/bench/source_tree.sh" # mitool importable without an install
export PYTHONUNBUFFERED=1

if [ -z "${PY:-}" ]; then
    if [ -x "$ROOT/.venv/bin/python" ] && "$ROOT/.venv/bin/python" -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() or '"$REHEARSAL"' == 1 else 1)' 2>/dev/null; then
        PY="$ROOT/.venv/bin/python"
    else
        PY=python3
    fi
fi
MITOOL=("$PY" -m mitool.cli.main)

SUMMARY=()
PART_TIMEOUT_NOTE="a sweep resumes where it stopped when the script runs again"
part_left_out() { [[ ",$PARTS," == *",$1,"* ]] || echo silent; }
. "$ROOT/bench/parts.sh"

collect() {
    # collect SWEEP_DIR NAME: the small files of a sweep into $DESTINATION/NAME
    local source=$1 target="$DESTINATION/$2"
    [ -d "$source" ] || return 0
    mkdir -p "$target"
    cp "$source"/*.csv "$source"/*.png "$target"/ 2>/dev/null
    for run in "$source"/runs/*/; do
        [ -d "$run" ] || continue
        mkdir -p "$target/runs/$(basename "$run")"
        cp "$run"/run.json "$run"/result.json "$run"/metrics.jsonl "$target/runs/$(basename "$run")"/ 2>/dev/null
    done
    return 0
}

say "gpu_claims: $(date -u +%Y-%m-%dT%H:%M:%SZ), python $PY, budget $BUDGET s, parts $PARTS, output in $DESTINATION"
"$PY" -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda, torch.cuda.get_device_name(0) if torch.cuda.is_available() else "no GPU")' 2>&1 | tee -a "$LOG"

if ! "$PY" -c 'import lightly' >/dev/null 2>&1 && ls "$ROOT"/bench/.wheels/*.whl >/dev/null 2>&1; then
    "$PY" -m pip install --quiet --no-deps --no-index --target "$SCRATCH/lightly" "$ROOT"/bench/.wheels/*.whl 2>&1 | tail -2 | tee -a "$LOG"
    export PYTHONPATH="$PYTHONPATH:$SCRATCH/lightly"
fi

# the sizes: GPU scale, or toy sizes on the CPU for a rehearsal of this script
DEVICE=cuda PARALLEL=${GPU_CLAIMS_PARALLEL:-4} WORKERS=3
NETWORK=(--arch resnet18 --dataset fashion-mnist --precision bf16 --gpu-augment decode)
EQCO=(--negatives 4,16,64,256 --batch-size 512 --base-lr 0.4 --epochs "${GPU_CLAIMS_EPOCHS_EQCO:-2}")
MOCO=(--negatives 4096 --batch-size 512 --base-lr 0.4 --epochs "${GPU_CLAIMS_EPOCHS_EQCO:-2}")
DCL=(--batch-size 32,64,128,256,512 --epochs "${GPU_CLAIMS_EPOCHS_DCL:-1}")
STEP=(--arch resnet50 --image-size 224 --batch-size 256 --precision bf16 --rounds 5)
LIGHTLY=(--arch resnet18 --epochs 1 --batch-size 512 --workers 8 --gpu-augment decode --sequential)
if [ "$REHEARSAL" = 1 ]; then
    DEVICE=cpu PARALLEL=2 WORKERS=0
    NETWORK=(--arch small-cnn --dataset synthetic --synthetic-size 256 --image-size 28 --knn-max-samples 256)
    EQCO=(--negatives 4,16 --batch-size 32 --epochs 1)
    MOCO=(--negatives 64 --batch-size 32 --epochs 1)
    DCL=(--batch-size 16,32 --epochs 1)
    STEP=(--arch small-cnn --image-size 32 --batch-size 32 --rounds 3)
    LIGHTLY=(--epochs 1 --batch-size 32 --max-steps 3 --knn-max-samples 300 --workers 0)
fi
SWEEP=("${MITOOL[@]}" vision sweep --device $DEVICE --parallel $PARALLEL --workers $WORKERS --seeds 0,1 --quiet)

part split-bn 90 "$PY" "$ROOT/bench/step.py" --device $DEVICE "${STEP[@]}" --methods moco --quiet \
    --json "$DESTINATION/step_${DEVICE}_moco_split_bn.json"
part split-bn 60 "$PY" "$ROOT/bench/step.py" --device $DEVICE "${STEP[@]}" --methods moco --bn-mode sync \
    --quiet --json "$DESTINATION/step_${DEVICE}_moco_plain_bn.json"

part eqco 200 "${SWEEP[@]}" "${NETWORK[@]}" --method simo --loss eqco,infonce --alpha 256 "${EQCO[@]}" \
    --out "$SCRATCH/eqco"
part eqco 60 "${SWEEP[@]}" "${NETWORK[@]}" --method moco "${MOCO[@]}" --out "$SCRATCH/eqco"
collect "$SCRATCH/eqco" eqco

part dcl 200 "${SWEEP[@]}" "${NETWORK[@]}" --method simclr --loss infonce,dcl,dclw "${DCL[@]}" \
    --out "$SCRATCH/dcl"
collect "$SCRATCH/dcl" dcl

if [ "$REHEARSAL" = 1 ] && [ ! -d /usr/share/datasets/fashion-mnist ]; then
    say "=== lightly: skipped in the rehearsal (no Fashion-MNIST here)"
else
    part lightly 150 "$PY" "$ROOT/bench/lightly_compare.py" --device $DEVICE "${LIGHTLY[@]}" \
        --methods simclr,dcl,moco --scratch "$SCRATCH/lightly-runs" --json "$DESTINATION/lightly_${DEVICE}.json"
fi

if [[ ",$PARTS," == *",recipe,"* ]]; then
    # moco and simo (their fashion-mnist defaults) and simclr + dcl side by side, each schedule fitted
    # to MINUTES (the optional part: run it alone, GPU_CLAIMS_PARTS=recipe)
    MINUTES=8 RECIPE_BATCH=512
    [ "$REHEARSAL" = 1 ] && MINUTES=0.3 RECIPE_BATCH=32
    say ""
    say "=== recipe ($MINUTES minutes a run, three side by side, ${SECONDS} s elapsed)"
    STARTED=$SECONDS
    timeout -k 15 660 "${MITOOL[@]}" vision sweep --device $DEVICE --parallel 2 --workers 4 --seeds 0 --quiet \
        "${NETWORK[@]}" --batch-size $RECIPE_BATCH --method moco,simo --epochs 200 --max-minutes $MINUTES --out "$SCRATCH/recipe" 2>&1 | tee -a "$LOG" &
    timeout -k 15 660 "${MITOOL[@]}" vision sweep --device $DEVICE --parallel 1 --workers 4 --seeds 0 --quiet \
        "${NETWORK[@]}" --batch-size $RECIPE_BATCH --method simclr --loss dcl --epochs 200 --max-minutes $MINUTES --out "$SCRATCH/recipe-dcl" 2>&1 | tee -a "$LOG" &
    wait
    SUMMARY+=("recipe: ended in $((SECONDS - STARTED)) s (the kNN figures are in recipe*/summary.csv)")
fi
collect "$SCRATCH/recipe" recipe
collect "$SCRATCH/recipe-dcl" recipe-dcl

say ""
say "gpu_claims summary (${SECONDS} s):"
for line in "${SUMMARY[@]}"; do
    say "  $line"
done
for name in eqco dcl recipe recipe-dcl; do
    [ -f "$DESTINATION/$name/summary.csv" ] && say "" && say "$name/summary.csv:" && tee -a "$LOG" <"$DESTINATION/$name/summary.csv"
done
exit 0
