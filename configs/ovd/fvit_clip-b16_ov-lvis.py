# F-ViT, frozen OpenAI CLIP ViT-B/16 (plain weights), OV-LVIS, with a
# class-agnostic FCN mask head.
_base_ = [
    'mmdet::_base_/default_runtime.py', './_base_/fvit_clip-b16.py',
    './_base_/ov-lvis_lsj-1024.py'
]
model = dict(
    roi_head=dict(
        bbox_head=dict(
            text_embeddings='data/lvis_v1/embeddings/lvis-v1_clip-vit-b16.npy',
            # The label space of LVISV1Dataset (all 1203 classes).
            class_names='LVISV1Dataset',
            # Frequent + common names, written by
            # tools/misc/dump_text_embeddings.py --ann-file ... (*.base.json).
            base_class_names='data/lvis_v1/embeddings/'
            'lvis-v1_clip-vit-b16.base.json',
            bg_class_weight=1.0,
            vlm_temperature=50.0,
            alpha=0.1,
            beta=0.6),
        mask_roi_extractor=dict(
            type='SingleRoIExtractor',
            roi_layer=dict(type='RoIAlign', output_size=14, sampling_ratio=0),
            out_channels=256,
            featmap_strides=[4, 8, 16, 32]),
        mask_head=dict(
            type='FCNMaskHead',
            num_convs=4,
            in_channels=256,
            conv_out_channels=256,
            num_classes=1203,
            class_agnostic=True,
            norm_cfg={{_base_.norm_cfg}},
            loss_mask=dict(
                type='CrossEntropyLoss', use_mask=True, loss_weight=1.0))),
    train_cfg=dict(rcnn=dict(mask_size=28)),
    test_cfg=dict(
        rcnn=dict(score_thr=1e-4, max_per_img=300, mask_thr_binary=0.5)))
default_hooks = dict(checkpoint=dict(interval=4, max_keep_ckpts=3))
