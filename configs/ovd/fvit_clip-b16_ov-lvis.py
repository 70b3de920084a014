# F-ViT, frozen OpenAI CLIP ViT-B/16 (plain weights), OV-LVIS, with a
# class-agnostic FCN mask head.
_base_ = [
    'mmdet::_base_/default_runtime.py', '../_base_/mmlocat_runtime.py',
    './_base_/fvit_clip-b16.py', './_base_/ov-lvis_lsj-1024.py'
]
model = dict(
    # F-ViT pads training batches to the fixed crop size after
    # normalisation (and test batches to a square).
    data_preprocessor=dict(
        pad_mask=True,
        batch_augments=[
            dict(
                type='BatchFixedSizePad',
                size={{_base_.image_size}},
                pad_mask=True)
        ]),
    # F-ViT's OV-LVIS RPN normalises its two shared convolutions.
    rpn_head=dict(type='mmlocat.NormRPNHead', norm_cfg={{_base_.norm_cfg}}),
    roi_head=dict(
        bbox_head=dict(
            # The 1203 class names come from the embedding sidecar, which
            # dump_text_embeddings.py --ann-file lvis_v1_val.json writes in
            # category-id order (= LVISV1Dataset's labels), spelled as the
            # real file spells them (e.g. 'speaker_(stero_equipment)').
            text_embeddings='data/lvis_v1/embeddings/lvis-v1_clip-vit-b16.npy',
            # Frequent + common names, written by
            # tools/misc/dump_text_embeddings.py --ann-file ... (*.base.json).
            base_class_names='data/lvis_v1/embeddings/'
            'lvis-v1_clip-vit-b16.base.json',
            bg_class_weight=0.9,
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
    train_cfg=dict(
        rcnn=dict(assigner=dict(match_low_quality=True), mask_size=28)),
    test_cfg=dict(
        rcnn=dict(
            score_thr=1e-4,
            nms=dict(type='nms', iou_threshold=0.5),
            max_per_img=300,
            mask_thr_binary=0.5)))
default_hooks = dict(checkpoint=dict(interval=4, max_keep_ckpts=3))
