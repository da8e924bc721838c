#!/usr/bin/env bash
# The two papers' claims at CPU scale (2-core machine, small CNN, Fashion-MNIST, kNN k = 200, t = 0.1
# on the 10 000 test images), each with `mitool vision sweep`, about 30 minutes each:
#
#   bash bench/claims_cpu.sh eqco     # SiMo eqco (alpha 256) vs infonce, K = 4, 16, 64, 256, 2 seeds; MoCo v2 reference
#   bash bench/claims_cpu.sh dcl      # SimCLR infonce / dcl / dclw at batch 32 ... 512, 2 seeds
#   bash bench/claims_cpu.sh recipe   # the Fashion-MNIST recipe: simclr + dcl and simo, 19 minutes each + kNN
#   bash bench/claims_cpu.sh nnclr    # NNCLR + DCL vs NNCLR + InfoNCE vs SimCLR + DCL, 300 steps, 3 seeds (~20 min)
#
# Two runs at a time (--parallel 2, one torch thread each), the views made in the run's process
# (--gpu-augment decode on the CPU: the batched augmentation, no loader workers). The runs go to
# CLAIMS_SCRATCH (default /tmp/mitool-claims/<claim>; resumable: the same command continues); the
# summary, the figures and each run's run.json, result.json and metrics.jsonl are copied to
# bench/results/claims/cpu/<claim>/ (no checkpoints).
set -eu

cd "$(dirname "$0")/.." || exit 1
CLAIM=${1:?usage: bash bench/claims_cpu.sh eqco|dcl|recipe|nnclr}
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
    # one epoch at every batch size (equal images seen), lr = 0.8 x batch / 256, SGD at every batch (LARS,
    # the default from 512, would change the optimizer within the grid)
    "$MITOOL" vision sweep "${COMMON[@]}" --method simclr --loss infonce,dcl,dclw \
        --batch-size 32,64,128,256,512 --epochs 1 --base-lr 0.8 --optimizer sgd --out "$SCRATCH"
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
nnclr)
    # equal steps for the three: 300 steps of batch 128 (0.64 epoch; the 1-epoch cosine schedule cut at
    # step 300), the Fashion-MNIST defaults (base lr 0.8, warmup 0.1 epoch, tau 0.2; nnclr's support set
    # 4096), kNN on 20 000 training images as memory and the 10 000 test images; alignment and uniformity
    # on the fixed held-out batch (512 test images) at the last step
    NNCLR=(--arch small-cnn --dataset fashion-mnist --gpu-augment decode --workers 0 --parallel 2 --seeds 0,1,2
        --checkpoint-every 100 --epochs 1 --max-steps 300 --knn-max-samples 20000)
    "$MITOOL" vision sweep "${NNCLR[@]}" --method nnclr --loss dcl,infonce --out "$SCRATCH"
    "$MITOOL" vision sweep "${NNCLR[@]}" --method simclr --loss dcl --out "$SCRATCH"
    # the reference: each seed's network at step 0 (kNN on the same sets; alignment and uniformity of
    # nnclr's and simclr's heads at initialisation)
    "${PY:-.venv/bin/python}" - "$SCRATCH/init_reference.json" <<'PYTHON'
import json, random, sys

import numpy as np
import torch

from mitool.vision.alignment import HeldOutBatch
from mitool.vision.config import PretrainConfig, resolve_defaults
from mitool.vision.evaluate import evaluate_knn
from mitool.vision.methods import build_method

held_out, rows = HeldOutBatch.of_dataset("fashion-mnist", None, 28), []
for seed in (0, 1, 2):
    row = {"seed": seed}
    for method in ("nnclr", "simclr"):  # seeded as a run is, before its model is built
        random.seed(seed), np.random.seed(seed), torch.manual_seed(seed)
        config = resolve_defaults(PretrainConfig(method=method, arch="small-cnn", dataset="fashion-mnist"), 28)
        model = build_method(config, 1, torch.device("cpu"))
        row[method] = held_out.measure(model, torch.device("cpu"))
    knn = evaluate_knn(model.backbone, "fashion-mnist", None, 28, torch.device("cpu"), batch_size=256, workers=0,
                       max_samples=20000)
    rows.append({**row, "knn_top1": knn["knn_top1"]})
    print(json.dumps(rows[-1]), flush=True)
json.dump(rows, open(sys.argv[1], "w"), indent=1)
PYTHON
    mkdir -p "$RESULTS" && cp "$SCRATCH/init_reference.json" "$RESULTS"/
    ;;
*)
    echo "usage: bash bench/claims_cpu.sh eqco|dcl|recipe|nnclr" >&2
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
if [ "$CLAIM" = nnclr ]; then  # the table of docs/vision-claims.md and its figure
    "${PY:-.venv/bin/python}" bench/claims_table.py "$RESULTS/summary.csv" \
        --columns knn_top1,alignment,uniformity,mi_final,npc_final --figure "$RESULTS/nnclr.png" \
        --reference "$RESULTS/init_reference.json"
fi
