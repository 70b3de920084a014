# Probe optimisation (docs/method.md#frozen-segmentation-probe): AdamW lr 1e-3
# wd 0.01, one-cycle with 25% linear warm-up, 20k iterations, batch 32 (8 x 4).
_base_ = 'mmseg::_base_/schedules/schedule_20k.py'

optim_wrapper = dict(
    _delete_=True,
    type='OptimWrapper',
    optimizer=dict(type='AdamW', lr=1e-3, weight_decay=0.01))
param_scheduler = [
    dict(
        type='OneCycleLR',
        eta_max=1e-3,
        total_steps=20000,
        pct_start=0.25,
        anneal_strategy='linear',
        by_epoch=False)
]
# OneCycle keeps a function in its state: the hook stores it by name so the
# checkpoints load under torch's weights-only default (resume, test.py).
custom_hooks = [dict(type='mmlocat.WeightsOnlyCheckpointHook')]
# Batch sizes (8 GPUs x 4 images) are set by the dataset configs: mmengine
# rejects a key defined in two bases of one file.
