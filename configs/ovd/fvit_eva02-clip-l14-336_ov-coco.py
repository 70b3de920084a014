# F-ViT, frozen EVA02-CLIP L/14-336 (plain weights), OV-COCO, LSJ 896: the
# LaSt-ViT paper's large F-ViT backbone. Same detector as
# fvit_clip-l14_ov-coco.py (strides 3.5 / 7 / 14 / 28 with 14-px patches)
# with the EVA02-CLIP image tower; its position embedding (24x24 at 336 px)
# is resampled and its RoPE recomputed for every input grid.
_base_ = './fvit_clip-l14_ov-coco.py'
model = dict(
    # F-ViT normalises EVA02-CLIP inputs with ImageNet's mean / std.
    data_preprocessor=dict(
        mean=[123.675, 116.28, 103.53], std=[58.395, 57.12, 57.375]),
    backbone=dict(
        type='mmlocat.EVA02CLIPViT',
        arch='l',
        patch_size=14,
        img_size=336,
        init_cfg=dict(
            checkpoint='checkpoints/eva02-clip-l14-336_mmlocat.pth')),
    roi_head=dict(
        bbox_head=dict(text_embeddings='data/coco/embeddings/'
                       'ov-coco_eva02-clip-l14-336.npy')))
