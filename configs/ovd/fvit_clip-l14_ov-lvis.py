# F-ViT, frozen OpenAI CLIP ViT-L/14 (plain weights), OV-LVIS, input 896.
_base_ = './fvit_clip-b16_ov-lvis.py'
model = dict(
    data_preprocessor=dict(batch_augments=[
        dict(type='BatchFixedSizePad', size=(896, 896), pad_mask=True)
    ]),
    backbone=dict(
        arch='l',
        patch_size=14,
        out_indices=(6, 10, 14, 23),
        init_cfg=dict(checkpoint='checkpoints/clip-vit-l14_mmlocat.pth')),
    neck=[
        dict(
            type='mmlocat.PatchScoreNeck',
            in_channels=1024,
            scales=(4, 2, 1, 0.5),
            modulate=False,
            global_pool='gap',
            norm_cfg={{_base_.norm_cfg}}),
        dict(
            type='FPN',
            in_channels=[1024, 1024, 1024, 1024],
            out_channels=256,
            num_outs=5,
            norm_cfg={{_base_.norm_cfg}}),
    ],
    rpn_head=dict(anchor_generator=dict(strides=[3.5, 7, 14, 28, 56])),
    roi_head=dict(
        bbox_roi_extractor=dict(featmap_strides=[3.5, 7, 14, 28]),
        mask_roi_extractor=dict(featmap_strides=[3.5, 7, 14, 28]),
        bbox_head=dict(
            # As wide as the 768-d text embeddings (F-ViT L/14).
            fc_out_channels=768,
            text_embeddings='data/lvis_v1/embeddings/lvis-v1_clip-vit-l14.npy',
            base_class_names='data/lvis_v1/embeddings/'
            'lvis-v1_clip-vit-l14.base.json',
            beta=0.4),
        vlm_roi_extractor=dict(out_channels=768, featmap_strides=[14])))

image_size = (896, 896)
train_pipeline = [
    dict(type='LoadImageFromFile'),
    dict(type='LoadAnnotations', with_bbox=True, with_mask=True),
    dict(
        type='RandomResize',
        scale=image_size,
        ratio_range=(0.1, 2.0),
        keep_ratio=True),
    dict(
        type='RandomCrop',
        crop_type='absolute_range',
        crop_size=image_size,
        recompute_bbox=True,
        allow_negative_crop=True),
    dict(type='FilterAnnotations', min_gt_bbox_wh=(1e-2, 1e-2)),
    dict(type='RandomFlip', prob=0.5),
    dict(type='PackDetInputs')
]
test_pipeline = [
    dict(type='LoadImageFromFile'),
    dict(type='Resize', scale=image_size, keep_ratio=True),
    dict(type='LoadAnnotations', with_bbox=True, with_mask=True),
    dict(
        type='PackDetInputs',
        meta_keys=('img_id', 'img_path', 'ori_shape', 'img_shape',
                   'scale_factor'))
]
train_dataloader = dict(dataset=dict(pipeline=train_pipeline))
val_dataloader = dict(dataset=dict(pipeline=test_pipeline))
test_dataloader = val_dataloader
