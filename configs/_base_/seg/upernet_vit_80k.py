# mmseg's ViT-UperNet optimisation recipe (as in
# mmseg::vit/vit_vit-b16_mln_upernet_8xb2-80k_ade20k-512x512.py) for datasets
# that mmseg ships no ViT config for. Dataset configs add data on top.
_base_ = [
    'mmseg::_base_/models/upernet_vit-b16_ln_mln.py',
    'mmseg::_base_/default_runtime.py',
    'mmseg::_base_/schedules/schedule_80k.py'
]

custom_imports = dict(imports=['mmlocat'], allow_failed_imports=False)
model = dict(pretrained=None)

optim_wrapper = dict(
    _delete_=True,
    type='OptimWrapper',
    optimizer=dict(
        type='AdamW', lr=0.00006, betas=(0.9, 0.999), weight_decay=0.01),
    paramwise_cfg=dict(
        custom_keys={
            'pos_embed': dict(decay_mult=0.),
            'cls_token': dict(decay_mult=0.),
            'norm': dict(decay_mult=0.)
        }))
param_scheduler = [
    dict(
        type='LinearLR', start_factor=1e-6, by_epoch=False, begin=0, end=1500),
    dict(
        type='PolyLR',
        eta_min=0.0,
        power=1.0,
        begin=1500,
        end=80000,
        by_epoch=False)
]
# Batch sizes (8 GPUs x 2 images) are set by the dataset configs: mmengine
# rejects a key defined in two bases of one file.
