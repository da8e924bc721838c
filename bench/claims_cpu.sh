#!/usr/bin/env bash
# The two papers' claims at CPU scale (2-core machine, small CNN, Fashion-MNIST, kNN k = 200, t = 0.1
# on the 10 000 test images), each with `mitool vision sweep`, about 30 minutes each:
#
#   bash bench/claims_cpu.sh eqco     # SiMo eqco (alpha 256) vs infonce, K = 4, 16, 64, 256, 2 seeds; MoCo v2 reference
#   bash bench/claims_cpu.sh dcl      # SimCLR infonce / dcl / dclw at batch 32 ... 512, 2 seeds
#   bash bench/claims_cpu.sh recipe   # the Fashion-MNIST recipe: simclr + dcl and simo, 19 minutes each + kNN
#
# Two runs at a time (--parallel 2, one torch thread each), the views made in the run's process
# (--gpu-augment decode on the CPU: the batched augmentation, no loader workers). The runs go to
# CLAIMS_SCRATCH (default /tmp/mitool-claims/<claim>; resumable: the same command continues); the
# summary, the figures and each run's run.json, result.json and metrics.jsonl are copied to
# bench/results/claims/cpu/<claim>/ (no checkpoints).
set -eu

cd "$(dirname "$0")/.." || exit 1
CLAIM=${1:?usage: bash bench/claims_cpu.sh eqco|dcl|recipe}
SCRATCH=${CLAIMS_SCRATCH:-/tmp/mitool-claims}/$CLAIM
RESULTS=bench/results/claims/cpu/$CLAIM
MITOOL=${MITOOL:-.venv/bin/mitool}
# shared by both claims: the short-schedule settings measured for Fashion-MNIST on this CPU
COMMON=(--arch small-cnn --dataset fashion-mnist --temperature 0.2 --warmup-epochs 0.1 --gpu-augment decode
    --workers 0 --parallel 2 --seeds 0,1 --checkpoint-every 100)

case $CLAIM in
eqco)
    # K < batch for simo: batch 512 for K = 256; lr = 0.4 x 512 / 256; momentum encoder m = 0.99
    "$MITOOL" vision sweep "${COMMON[@]}" --method simo --loss eqco,infonce --alpha 256 --negatives 4,16,64,256 \
        --batch-size 512 --epochs 2 --base-lr 0.4 --key-momentum 0.99 --out "$SCRATCH"
    "$MITOOL" vision sweep "${COMMON[@]}" --method moco --negatives 4096 \
        --batch-size 512 --epochs 2 --base-lr 0.4 --key-momentum 0.99 --out "$SCRATCH"
    ;;
dcl)
    # one epoch at every batch size (equal images seen), lr = 0.8 x batch / 256
    "$MITOOL" vision sweep "${COMMON[@]}" --method simclr --loss infonce,dcl,dclw \
        --batch-size 32,64,128,256,512 --epochs 1 --base-lr 0.8 --out "$SCRATCH"
    ;;
recipe)
    # the Fashion-MNIST defaults, each run time-boxed to 19 minutes of pretraining (its cosine schedule
    # fitted to the time) + the kNN evaluation; simclr + dcl and simo side by side, one core each
    MITOOL_THREADS=1 "$MITOOL" vision sweep --method simclr --loss dcl --arch small-cnn --dataset fashion-mnist \
        --gpu-augment decode --workers 0 --max-minutes 19 --out "$SCRATCH/simclr-dcl" &
    MITOOL_THREADS=1 "$MITOOL" vision sweep --method simo --arch small-cnn --dataset fashion-mnist \
        --gpu-augment decode --workers 0 --max-minutes 19 --out "$SCRATCH/simo" &
    wait
    for name in simclr-dcl simo; do
        mkdir -p "$RESULTS/$name"
        cp "$SCRATCH/$name"/summary.csv "$SCRATCH/$name"/curves.png "$RESULTS/$name"/
        cp "$SCRATCH/$name"/runs/*/run.json "$SCRATCH/$name"/runs/*/result.json "$SCRATCH/$name"/runs/*/metrics.jsonl \
            "$RESULTS/$name"/
    done
    exit 0
    ;;
*)
    echo "usage: bash bench/claims_cpu.sh eqco|dcl|recipe" >&2
    exit 2
    ;;
esac

mkdir -p "$RESULTS"
cp "$SCRATCH"/summary.csv "$SCRATCH"/*.png "$RESULTS"/
for run in "$SCRATCH"/runs/*/; do
    mkdir -p "$RESULTS/runs/$(basename "$run")"
    cp "$run"/run.json "$run"/result.json "$run"/metrics.jsonl "$RESULTS/runs/$(basename "$run")"/
done
echo "copied the summary, figures and run records to $RESULTS"
