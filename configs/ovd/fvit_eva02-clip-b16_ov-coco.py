# F-ViT, frozen EVA02-CLIP B/16 (plain weights), OV-COCO: the LaSt-ViT
# paper's F-ViT backbone. Same detector as fvit_clip-b16_ov-coco.py with
# the EVA02-CLIP image tower (RoPE, SwiGLU, sub-LN) in place of OpenAI's.
# Inputs are normalised with ImageNet's mean / std, as F-ViT does.
_base_ = './fvit_clip-b16_ov-coco.py'
model = dict(
    # F-ViT normalises EVA02-CLIP inputs with ImageNet's mean / std.
    data_preprocessor=dict(
        mean=[123.675, 116.28, 103.53], std=[58.395, 57.12, 57.375]),
    backbone=dict(
        type='mmlocat.EVA02CLIPViT',
        arch='b',
        patch_size=16,
        img_size=224,
        init_cfg=dict(checkpoint='checkpoints/eva02-clip-b16_mmlocat.pth')),
    roi_head=dict(
        bbox_head=dict(
            text_embeddings='data/coco/embeddings/ov-coco_eva02-clip-b16.npy'))
)
