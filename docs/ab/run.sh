#!/usr/bin/env bash
# A/B twins from the shipped recipes on generated ImageNet-format data, CPU.
# Each recipe is shrunk only by --cfg-options (64-px inputs, 10 classes,
# batch 8, 4 epochs of 50 iterations, schedules compressed to 4 epochs,
# fp32 OptimWrapper instead of AMP, which needs an accelerator); every twin
# pair differs only in the model (GAug + PRR, or the pooling). The data are
# the same for every seed; SEED seeds the runs (default 0).
#   bash docs/ab/run.sh [WORK_DIR [SEED [OUT_PNG]]]   (from the repo root)
set -euo pipefail
PY=${PYTHON:-python}
WORK=${1:-work_dirs/ab}
SEED=${2:-0}
OUT=${3:-docs/ab/ab_curves.png}
DATA=$WORK/imagenet
export OMP_NUM_THREADS=1 MKL_NUM_THREADS=1
[ -f $DATA/meta/val.txt ] || $PY -c "from mmlocat.testing import generate; \
generate('imagenet', '$DATA', num_train=40, num_val=10, img_size=(80, 80), \
seed=0)"

COMMON=(randomness.seed=$SEED data_preprocessor.num_classes=10
  model.head.num_classes=10 model.backbone.img_size=64
  train_dataloader.batch_size=8 train_dataloader.num_workers=0
  train_dataloader.persistent_workers=False
  train_dataloader.dataset.data_root=$DATA
  train_dataloader.dataset.pipeline.1.scale=64
  val_dataloader.batch_size=50 val_dataloader.num_workers=0
  val_dataloader.persistent_workers=False
  val_dataloader.dataset.data_root=$DATA
  val_dataloader.dataset.pipeline.1.scale=72
  val_dataloader.dataset.pipeline.2.crop_size=64
  train_cfg.max_epochs=4 train_cfg.val_interval=1
  default_hooks.logger.interval=5 default_hooks.checkpoint.interval=100)
# LocAtViT recipe: AMP -> fp32 (no accelerator); 1-D parameters (norms,
# biases) stay without weight decay (the recipe's norm/bias/flat multipliers;
# its custom keys for cls_token / pos_embed cannot be written as options).
LOCAT=(optim_wrapper._delete_=True optim_wrapper.type=OptimWrapper
  optim_wrapper.optimizer.type=AdamW optim_wrapper.optimizer.lr=1e-3
  optim_wrapper.optimizer.weight_decay=0.05
  optim_wrapper.clip_grad.max_norm=5.0
  optim_wrapper.paramwise_cfg.norm_decay_mult=0.0
  optim_wrapper.paramwise_cfg.bias_decay_mult=0.0
  optim_wrapper.paramwise_cfg.flat_decay_mult=0.0
  param_scheduler.0.end=1 param_scheduler.1.begin=1
  param_scheduler.1.end=4)
LAST=(model.backbone.arch=deit-tiny model.head.in_channels=192
  param_scheduler.1.end=4)

for name in locat-t vit-t; do
  $PY tools/train.py configs/locat/${name}_8xb128_in1k.py \
    --work-dir $WORK/s$SEED/$name --cfg-options "${COMMON[@]}" "${LOCAT[@]}"
done
for name in last-b vit-b; do
  $PY tools/train.py configs/last/${name}_8xb512_in1k.py \
    --work-dir $WORK/s$SEED/${name/-b/-t}_last --cfg-options "${COMMON[@]}" \
    "${LAST[@]}"
done
$PY tools/analysis_tools/plot_ab_curves.py \
  "LocAtViT-T=$WORK/s$SEED/locat-t" "ViT-T=$WORK/s$SEED/vit-t" \
  "LaSt-T=$WORK/s$SEED/last-t_last" "ViT-T (CLS)=$WORK/s$SEED/vit-t_last" \
  --out $OUT
