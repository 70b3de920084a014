# Zero-shot segmentation with a frozen EVA02-CLIP B/16: the OpenAI-CLIP
# protocol with the EVA02 tower (RoPE, SwiGLU, sub-LN) and ImageNet mean /
# std (EVA-CLIP's and F-ViT's normalisation).
_base_ = ['./zeroshot_clip-b16.py']
model = dict(
    data_preprocessor=dict(
        mean=[123.675, 116.28, 103.53], std=[58.395, 57.12, 57.375]),
    backbone=dict(
        _delete_=True,
        type='mmlocat.EVA02CLIPViT',
        arch='b',
        init_cfg=dict(
            type='Pretrained',
            checkpoint='checkpoints/eva02-clip-b16_mmlocat.pth',
            prefix='backbone.')))
