#!/usr/bin/env bash
# The vision claims at GPU scale, in one go within about 8 minutes on one CUDA GPU (an H200):
#
#   bash bench/gpu_claims.sh               (from the repository root or anywhere)
#
# Parts, in order (each under `timeout`, each allowed to fail without stopping the others; a shared
# deadline of GPU_CLAIMS_BUDGET seconds, default 470, skips what no longer fits):
#   1. split-bn: bench/step.py --device cuda, resnet50, 224 px, batch 256, bf16, moco with one-GPU
#      split-BN (8 groups) and moco with plain BatchNorm (--bn-mode sync): the split-BN overhead
#      (target: at most 20% over plain BN; plain BN is a cost reference only: on one process it
#      is MoCo's BN leak, which `mitool vision pretrain` refuses, and bench/step.py builds the
#      model without that check)
#   2. eqco: `mitool vision sweep`, SiMo with eqco (alpha 256) and with infonce, K = 4, 16, 64, 256,
#      2 seeds, and MoCo v2 infonce (queue 4096, 2 seeds) as the reference; resnet18 with the small
#      stem, full Fashion-MNIST, batch 512, bf16, --gpu-augment decode, --parallel 4
#   3. dcl: `mitool vision sweep`, SimCLR with infonce, dcl, dclw at batch 32, 64, 128, 256, 512,
#      2 seeds, same network and data
#   4. lightly: bench/lightly_compare.py --device cuda, resnet18, simclr, dcl and moco, one run of
#      each library at a time (mitool's views made on the GPU, lightly's CPU transforms, as many
#      loader workers each); lightly comes from bench/.wheels (see below) when not installed
# Optional parts (each for a session of its own):
#   nnclr (GPU_CLAIMS_PARTS=nnclr, about 5 minutes): the NNCLR grid of bench/claims_cpu.sh nnclr at GPU
#      scale: NNCLR + DCL, NNCLR + InfoNCE and SimCLR + DCL, 3 seeds, equal steps (GPU_CLAIMS_EPOCHS_NNCLR
#      epochs, default 8, of batch 512), resnet18 with the small stem, full Fashion-MNIST, bf16,
#      --gpu-augment decode, --parallel 3 (GPU_CLAIMS_PARALLEL_NNCLR); the Fashion-MNIST defaults
#      (nnclr's support set 4096, tau 0.2, LARS at base lr 0.3 as the default from batch 512, warmup 0.1 epoch); kNN on the full sets, and
#      alignment and uniformity on the held-out batch, in nnclr/summary.csv (a table and a figure:
#      python bench/claims_table.py DESTINATION/nnclr/summary.csv --columns knn_top1,alignment,uniformity
#      --figure DESTINATION/nnclr/nnclr.png)
#   recipe (GPU_CLAIMS_PARTS=recipe, about 9 minutes): the Fashion-MNIST recipe at GPU scale: moco,
#      simo and simclr + dcl, resnet18, three runs side by side, each cosine schedule fitted to
#      8 minutes (--max-minutes 8)
#   issue30 (GPU_CLAIMS_PARTS=issue30, about 4 minutes): images/s before and after the fixes of
#      issue 30's items 5-7, each pair on this machine in one run:
#      5. `mitool vision pretrain` (simclr, resnet50, synthetic 224 px images, batch 256, 8 workers)
#         with --gpu-augment off (the old default) against the default (decode on CUDA);
#      6. training_step of moco, simo and simclr (resnet50, 224 px, bf16, batch 256, in-memory views),
#         before = the old per-step reads (plain SGD whose gradient norm is read every step,
#         simclr's boolean-mask scores, cudnn.benchmark off) against after = the defaults (fused SGD,
#         index-tensor scores, cudnn.benchmark on), interleaved rounds, with the host waits per step
#         counted by torch.cuda.set_sync_debug_mode; the device augmentation with blocking against
#         pinned non-blocking parameter copies; the linear probe's loop reading its loss every step
#         against every 50;
#      7. the kNN monitor's feature extraction (resnet50, 2048 + 2048 synthetic 224 px images) in
#         fp32 (before) against bf16 autocast (after); its sharding across ranks needs several GPUs
#         (tested on the CPU with two gloo processes), so one GPU shows the autocast half only.
#      JSON in $DESTINATION/issue30_*.json, a table in the log.
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
# (default 2), GPU_CLAIMS_EPOCHS_DCL (default 1), GPU_CLAIMS_EPOCHS_NNCLR (default 8),
# GPU_CLAIMS_PARALLEL_NNCLR (default 3). GPU_CLAIMS_REHEARSAL=1: the same parts on the CPU
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
DCL=(--batch-size 32,64,128,256,512 --optimizer sgd --epochs "${GPU_CLAIMS_EPOCHS_DCL:-1}")
NNCLR=(--batch-size 512 --epochs "${GPU_CLAIMS_EPOCHS_NNCLR:-8}" --seeds 0,1,2)
NNCLR_PARALLEL=${GPU_CLAIMS_PARALLEL_NNCLR:-3}
STEP=(--arch resnet50 --image-size 224 --batch-size 256 --precision bf16 --rounds 5)
LIGHTLY=(--arch resnet18 --epochs 1 --batch-size 512 --workers 8 --gpu-augment decode --sequential)
ISSUE30=(--arch resnet50 --image-size 224 --batch-size 256 --rounds 4 --steps 8 --knn-images 2048 --workers 8)
ISSUE30_PRETRAIN=(--arch resnet50 --dataset synthetic --synthetic-size 4096 --image-size 224 --batch-size 256
    --max-steps 16 --log-every 8 --knn-every 0 --workers 8 --precision bf16)
if [ "$REHEARSAL" = 1 ]; then
    ISSUE30=(--arch small-cnn --image-size 32 --batch-size 16 --rounds 2 --steps 2 --knn-images 64 --workers 0)
    ISSUE30_PRETRAIN=(--arch small-cnn --dataset synthetic --synthetic-size 128 --image-size 32 --batch-size 16
        --max-steps 4 --log-every 2 --knn-every 0 --workers 0)
    DEVICE=cpu PARALLEL=2 WORKERS=0
    NETWORK=(--arch small-cnn --dataset synthetic --synthetic-size 256 --image-size 28 --knn-max-samples 256)
    EQCO=(--negatives 4,16 --batch-size 32 --epochs 1)
    MOCO=(--negatives 64 --batch-size 32 --epochs 1)
    DCL=(--batch-size 16,32 --optimizer sgd --epochs 1)
    NNCLR=(--batch-size 32 --support-size 64 --epochs 1 --seeds 0,1,2)
    NNCLR_PARALLEL=2
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

if [ -n "$(part_left_out lightly)" ]; then
    :
elif [ "$REHEARSAL" = 1 ] && [ ! -d /usr/share/datasets/fashion-mnist ]; then
    say "=== lightly: skipped in the rehearsal (no Fashion-MNIST here)"
else
    part lightly 150 "$PY" "$ROOT/bench/lightly_compare.py" --device $DEVICE "${LIGHTLY[@]}" \
        --methods simclr,dcl,moco --scratch "$SCRATCH/lightly-runs" --json "$DESTINATION/lightly_${DEVICE}.json"
fi

if [[ ",$PARTS," == *",issue30,"* ]]; then
    # issue 30, items 5-7: images/s before and after (see the header); the harness is written here
    cat >"$SCRATCH/issue30.py" <<'PYTHON'
"""Images/s before and after issue 30's items 6 and 7 (item 5 is two `vision pretrain` runs)."""
import argparse, json, statistics, time, warnings

import torch

from mitool.vision import gpu_augment, simclr
from mitool.vision.config import PretrainConfig, resolve_defaults
from mitool.vision.datasets import dataset_info
from mitool.vision.evaluate import evaluate_knn
from mitool.vision.methods import build_method
from mitool.vision.step import make_optimizer, training_step

parser = argparse.ArgumentParser()
for name, kind in (("device", str), ("arch", str), ("image-size", int), ("batch-size", int), ("rounds", int),
                   ("steps", int), ("knn-images", int), ("workers", int), ("json", str)):
    parser.add_argument("--" + name, type=kind, required=True)
args = parser.parse_args()
device = torch.device(args.device)
cuda = device.type == "cuda"
precision = "bf16" if cuda else "fp32"
real_scores, real_to_device = simclr.in_batch_scores, gpu_augment.to_device


def old_in_batch_scores(local_1, local_2, all_1, all_2, offset, temperature):
    """simclr's scores before issue 30: the product under autocast, a boolean mask."""
    local, total = local_1.shape[0], all_1.shape[0]
    anchors = torch.cat([local_1, local_2])
    scores = anchors @ torch.cat([all_1, all_2]).t() / temperature
    rows = torch.arange(2 * local, device=anchors.device)
    image = rows % local + offset
    itself = image + (rows >= local).long() * total
    positive = image + (rows < local).long() * total
    keep = torch.ones_like(scores, dtype=torch.bool)
    keep[rows, itself] = False
    keep[rows, positive] = False
    return scores[rows, positive].float(), scores[keep].view(2 * local, 2 * total - 2).float()


def use(before):
    torch.backends.cudnn.benchmark = not before
    simclr.in_batch_scores = old_in_batch_scores if before else real_scores
    gpu_augment.to_device = (lambda tensor, where: tensor.to(where)) if before else real_to_device


def synchronise():
    if cuda:
        torch.cuda.synchronize()


def waits(function):
    """Host waits for the device during function(), counted by torch's sync debug mode (CUDA)."""
    if not cuda:
        function()
        return None
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        torch.cuda.set_sync_debug_mode("warn")
        try:
            function()
        finally:
            torch.cuda.set_sync_debug_mode(0)
    return sum("synchroniz" in str(warning.message) for warning in caught)


def interleaved(run, images):
    """Median images/s of run(before) and run(after) over rounds in the order b a a b ..."""
    rates = {True: [], False: []}
    for index in range(args.rounds):
        for before in ((True, False) if index % 2 == 0 else (False, True)):
            use(before)
            synchronise()
            started = time.perf_counter()
            run(before)
            synchronise()
            rates[before].append(images / (time.perf_counter() - started))
    use(False)
    before, after = statistics.median(rates[True]), statistics.median(rates[False])
    return {"before_images_per_s": before, "after_images_per_s": after, "after_over_before": after / before}


results = {}
views = [torch.randn(args.batch_size, 3, args.image_size, args.image_size, device=device) for _ in range(2)]
views = [view.contiguous(memory_format=torch.channels_last) for view in views]
for method in ("moco", "simo", "simclr"):
    options = {"moco": dict(negatives=4096), "simo": dict(negatives=min(16, args.batch_size - 1)),
               "simclr": {}}[method]
    config = resolve_defaults(PretrainConfig(method=method, arch=args.arch, device=args.device, **options),
                              args.image_size)
    runs = {}
    for before in (True, False):
        torch.manual_seed(0)
        model = build_method(config, 3, device)
        trained = [p for p in model.parameters() if p.requires_grad]
        optimizer = (torch.optim.SGD(trained, lr=0.01, momentum=0.9, weight_decay=1e-4) if before
                     else make_optimizer(trained, 0.01, 0.9, 1e-4, device))
        runs[before] = [model, optimizer, torch.amp.GradScaler(device.type, enabled=False), 0, None]

    def steps(before, count=args.steps):
        state = runs[before]
        model, optimizer, scaler = state[:3]
        for _ in range(count):
            result = training_step(model, optimizer, scaler, *views, 0.01, precision, state[3], (), state[4])
            state[3] += 1
            state[4] = None if result.grad_norm_checked else result.grad_norm

    for before in (True, False):  # warm-up: cuDNN's autotuning, the queue pointer, the caches
        use(before)
        steps(before, 2)
    figures = interleaved(steps, args.steps * args.batch_size)
    for before in (True, False):
        use(before)
        figures[("before" if before else "after") + "_waits_per_step"] = (
            None if not cuda else waits(lambda: steps(before, 3)) / 3)
    use(False)
    results[f"step_{method}"] = figures
    del runs

# the device augmentation: blocking parameter copies (before) against pinned non-blocking ones
info = dataset_info("synthetic")
augment = gpu_augment.GPUTwoViewAugment.for_dataset(info, args.image_size, seed=0)
source = torch.randint(0, 256, (args.batch_size, 3, args.image_size + 32, args.image_size + 32),
                       dtype=torch.uint8, device=device)
augment(source)
results["gpu_augment"] = interleaved(lambda before: [augment(source) for _ in range(args.steps)],
                                     args.steps * args.batch_size)
results["gpu_augment"]["before_waits_per_batch"] = waits(lambda: (use(True), augment(source), use(False)))

# the linear probe's loop on cached features: loss.item() every step against a read every 50 steps
features = torch.randn(args.batch_size * 50, 2048, device=device)
labels = torch.randint(0, 10, (features.shape[0],), device=device)
classifier = torch.nn.Linear(2048, 10).to(device)
optimizer = torch.optim.SGD(classifier.parameters(), lr=0.1)


def linear_epoch(before):
    total = torch.zeros((), device=device)
    for index, batch in enumerate(torch.arange(features.shape[0], device=device).split(args.batch_size), 1):
        loss = torch.nn.functional.cross_entropy(classifier(features[batch]), labels[batch])
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        if before:
            loss.item()
        else:
            total += loss.detach()
            if index % 50 == 0:
                float(total)


results["linear_probe"] = interleaved(linear_epoch, features.shape[0])

# item 7: the kNN monitor's feature extraction, fp32 (before) against the run's bf16 autocast (after)
torch.manual_seed(0)
backbone = build_method(resolve_defaults(PretrainConfig(method="simclr", arch=args.arch), args.image_size), 3,
                        device).backbone
knn = {}
for knn_precision in ("fp32", precision):
    started = time.perf_counter()
    result = evaluate_knn(backbone, "synthetic", None, args.image_size, device, batch_size=256, workers=args.workers,
                          synthetic_options={"size": args.knn_images}, precision=knn_precision)
    synchronise()
    knn[knn_precision] = {"seconds": time.perf_counter() - started, "knn_top1": result["knn_top1"]}
results["knn_monitor"] = knn

with open(args.json, "w") as file:
    json.dump({"device": torch.cuda.get_device_name(0) if cuda else "cpu", "arguments": vars(args),
               "results": results}, file, indent=1)
print(f"{'what':<16}{'before':>12}{'after':>12}{'after/before':>14}  (images/s; waits per step)")
for name, figures in results.items():
    if "before_images_per_s" in figures:
        print(f"{name:<16}{figures['before_images_per_s']:>12.1f}{figures['after_images_per_s']:>12.1f}"
              f"{figures['after_over_before']:>14.2f}  waits {figures.get('before_waits_per_step')} -> "
              f"{figures.get('after_waits_per_step')}")
print("knn monitor:", json.dumps(knn))
PYTHON
    part issue30 150 "$PY" "$SCRATCH/issue30.py" --device $DEVICE "${ISSUE30[@]}" --json "$DESTINATION/issue30_${DEVICE}.json"
    for mode in off default; do
        rm -rf "$SCRATCH/issue30-$mode"
        augment=(); [ $mode = off ] && augment=(--gpu-augment off)
        part issue30 90 "${MITOOL[@]}" vision pretrain --method simclr --device $DEVICE "${ISSUE30_PRETRAIN[@]}" \
            "${augment[@]}" --out "$SCRATCH/issue30-$mode" --quiet
        cp "$SCRATCH/issue30-$mode/metrics.jsonl" "$DESTINATION/issue30_pretrain_${mode}.jsonl" 2>/dev/null
        # the last record's images/s (the first interval includes the workers' start-up)
        rate=$(tail -n 1 "$SCRATCH/issue30-$mode/metrics.jsonl" 2>/dev/null | "$PY" -c 'import json, sys; print(round(json.load(sys.stdin)["images_per_second"], 1))' 2>/dev/null)
        SUMMARY+=("issue30 item 5: vision pretrain gpu_augment $mode: ${rate:-?} images/s")
    done
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

if [[ ",$PARTS," == *",nnclr,"* ]]; then
    # NNCLR + DCL vs NNCLR + InfoNCE vs SimCLR + DCL, 3 seeds, equal steps (the optional part: run it
    # alone, GPU_CLAIMS_PARTS=nnclr), two sweeps into one folder
    NNCLR_SWEEP=("${MITOOL[@]}" vision sweep --device $DEVICE --parallel "$NNCLR_PARALLEL" --workers $WORKERS --quiet)
    part nnclr 300 "${NNCLR_SWEEP[@]}" "${NETWORK[@]}" "${NNCLR[@]}" --method nnclr --loss dcl,infonce \
        --out "$SCRATCH/nnclr"
    part nnclr 150 "${NNCLR_SWEEP[@]}" "${NETWORK[@]}" "${NNCLR[@]}" --method simclr --loss dcl --out "$SCRATCH/nnclr"
    collect "$SCRATCH/nnclr" nnclr
    if [ -f "$DESTINATION/nnclr/summary.csv" ]; then
        "$PY" "$ROOT/bench/claims_table.py" "$DESTINATION/nnclr/summary.csv" \
            --columns knn_top1,alignment,uniformity,mi_final,npc_final --figure "$DESTINATION/nnclr/nnclr.png" \
            2>&1 | tee -a "$LOG"
    fi
fi

say ""
say "gpu_claims summary (${SECONDS} s):"
for line in "${SUMMARY[@]}"; do
    say "  $line"
done
for name in eqco dcl recipe recipe-dcl nnclr; do
    [ -f "$DESTINATION/$name/summary.csv" ] && say "" && say "$name/summary.csv:" && tee -a "$LOG" <"$DESTINATION/$name/summary.csv"
done
exit 0
