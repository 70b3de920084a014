# mmseg's ViT-UperNet optimisation (as in
# mmseg::vit/vit_vit-b16_mln_upernet_8xb2-80k_ade20k-512x512.py): AdamW 6e-5,
# no decay on position embedding, CLS token and norms, 1500 linear warm-up
# iterations, then poly decay to iteration 80k; mmseg's runtime.
_base_ = [
    'mmseg::_base_/schedules/schedule_80k.py',
    'mmseg::_base_/default_runtime.py', '../mmlocat_runtime.py'
]
# mmseg's visualizer with a legend (tools/test.py --show-dir, tools/infer.py)
visualizer = dict(type='mmlocat.SegLegendVisualizer')

optim_wrapper = dict(
    _delete_=True,
    type='OptimWrapper',
    optimizer=dict(
        type='AdamW', lr=0.00006, betas=(0.9, 0.999), weight_decay=0.01),
    # mmengine's default, its per-parameter log lines summarised
    constructor='mmlocat.SummarisedOptimWrapperConstructor',
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
