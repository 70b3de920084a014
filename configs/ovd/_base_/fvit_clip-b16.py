# F-ViT (CLIPSelf, https://arxiv.org/abs/2310.01403) on a frozen OpenAI
# CLIP ViT-B/16: taps (3, 5, 7, 11) -> pyramid x4/x2/x1/x0.5 -> FPN ->
# RPN -> RoI head with a cosine text-embedding classifier and CLIP score
# fusion. Every value follows CLIPSelf's F-ViT configs
# (F-ViT/configs/ov_*/*_eva_original.py); configs/ovd/README.md lists the
# named options. The data config sets the classes and the embedding file.
norm_cfg = dict(type='SyncBN', requires_grad=True)
model = dict(
    type='mmlocat.FViT',
    vlm_fusion=True,
    # F-ViT: the stride-32 tap is the last block on the value path, no
    # final norm ('block': the ordinary last block + final norm).
    last_tap='value_path',
    data_preprocessor=dict(
        # Pads test batches to a square after normalisation, as F-ViT; the
        # data config adds the fixed-size training pad (batch_augments).
        type='mmlocat.SquarePadDetDataPreprocessor',
        # OpenAI CLIP's normalisation (RGB, 0-255 scale); the EVA02-CLIP
        # configs use F-ViT's ImageNet mean / std.
        mean=[122.771, 116.746, 104.094],
        std=[68.501, 66.632, 70.323],
        bgr_to_rgb=True,
        pad_size_divisor=32,
        test_pad_to_square=True),
    backbone=dict(
        type='mmlocat.CLIPViT',
        arch='b',
        patch_size=16,
        img_size=224,
        out_type='featmap',
        out_indices=(3, 5, 7, 11),
        frozen=True,
        # clip2mmlocat / eva02_clip2mmlocat write the tower under 'backbone.'
        init_cfg=dict(
            type='Pretrained',
            checkpoint='checkpoints/clip-vit-b16_mmlocat.pth',
            prefix='backbone.')),
    neck=[
        # The trainable single-scale -> pyramid step (tap i -> level i).
        dict(
            type='mmlocat.PatchScoreNeck',
            in_channels=768,
            scales=(4, 2, 1, 0.5),
            modulate=False,
            pooling='gap',
            norm_cfg=norm_cfg),
        dict(
            type='FPN',
            in_channels=[768, 768, 768, 768],
            out_channels=256,
            num_outs=5,
            norm_cfg=norm_cfg),
    ],
    rpn_head=dict(
        type='RPNHead',
        in_channels=256,
        feat_channels=256,
        num_convs=2,
        anchor_generator=dict(
            type='AnchorGenerator',
            scales=[8],
            ratios=[0.5, 1.0, 2.0],
            strides=[4, 8, 16, 32, 64]),
        bbox_coder=dict(
            type='DeltaXYWHBBoxCoder',
            target_means=[0.0, 0.0, 0.0, 0.0],
            target_stds=[1.0, 1.0, 1.0, 1.0]),
        loss_cls=dict(
            type='CrossEntropyLoss', use_sigmoid=True, loss_weight=1.0),
        loss_bbox=dict(type='L1Loss', loss_weight=1.0)),
    roi_head=dict(
        type='mmlocat.FViTRoIHead',
        bbox_roi_extractor=dict(
            type='SingleRoIExtractor',
            roi_layer=dict(type='RoIAlign', output_size=7, sampling_ratio=0),
            out_channels=256,
            featmap_strides=[4, 8, 16, 32]),
        bbox_head=dict(
            type='mmlocat.CosineSimBBoxHead',
            in_channels=256,
            roi_feat_size=7,
            num_shared_convs=4,
            num_shared_fcs=2,
            # F-ViT: one more FC per branch; the cosine is taken on the
            # ReLU'd cls FC, as wide as the text embedding (512 for B/16).
            num_cls_fcs=1,
            num_reg_fcs=1,
            cls_embed='relu_fc',
            conv_out_channels=256,
            fc_out_channels=512,
            norm_cfg=norm_cfg,
            bbox_coder=dict(
                type='DeltaXYWHBBoxCoder',
                target_means=[0.0, 0.0, 0.0, 0.0],
                target_stds=[0.1, 0.1, 0.2, 0.2]),
            reg_class_agnostic=True,
            temperature=50.0,
            # F-ViT: the fixed text embedding of "background".
            background='text',
            alpha=0.1,
            loss_cls=dict(type='mmlocat.OVCrossEntropyLoss', loss_weight=1.0),
            loss_bbox=dict(type='L1Loss', loss_weight=1.0)),
        # 1x1 RoIAlign of the dense CLIP map for the fused region scores.
        vlm_roi_extractor=dict(
            type='SingleRoIExtractor',
            roi_layer=dict(type='RoIAlign', output_size=1, sampling_ratio=0),
            out_channels=512,
            featmap_strides=[16])),
    train_cfg=dict(
        rpn=dict(
            assigner=dict(
                type='MaxIoUAssigner',
                pos_iou_thr=0.7,
                neg_iou_thr=0.3,
                min_pos_iou=0.3,
                match_low_quality=True,
                ignore_iof_thr=-1),
            sampler=dict(
                type='RandomSampler',
                num=256,
                pos_fraction=0.5,
                neg_pos_ub=-1,
                add_gt_as_proposals=False),
            allowed_border=-1,
            pos_weight=-1,
            debug=False),
        rpn_proposal=dict(
            nms_pre=2000,
            max_per_img=1000,
            nms=dict(type='nms', iou_threshold=0.7),
            min_bbox_size=0),
        rcnn=dict(
            assigner=dict(
                type='MaxIoUAssigner',
                pos_iou_thr=0.5,
                neg_iou_thr=0.5,
                min_pos_iou=0.5,
                match_low_quality=False,
                ignore_iof_thr=-1),
            sampler=dict(
                type='RandomSampler',
                num=512,
                pos_fraction=0.25,
                neg_pos_ub=-1,
                add_gt_as_proposals=True),
            pos_weight=-1,
            debug=False)),
    test_cfg=dict(
        # F-ViT tests in fp16 (mmcv's wrap_fp16_model); 'float16' does so
        # here (FViT's autocast; 'bfloat16' too), None tests in fp32.
        autocast=None,
        rpn=dict(
            nms_pre=2000,
            max_per_img=1000,
            nms=dict(type='nms', iou_threshold=0.7),
            min_bbox_size=0),
        rcnn=dict(
            score_thr=0.01,
            nms=dict(type='nms', iou_threshold=0.4),
            max_per_img=100)))

custom_imports = dict(imports=['mmlocat'], allow_failed_imports=False)
