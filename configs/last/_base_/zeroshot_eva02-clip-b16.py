# Zero-shot segmentation with a frozen EVA02-CLIP B/16: the OpenAI-CLIP
# protocol with the EVA02 tower (RoPE, SwiGLU, sub-LN). Normalisation:
# OpenAI's mean / std, as EVA-CLIP itself and open_clip's EVA02 models use it
# (inherited; F-ViT's detection configs use ImageNet's, an option here:
# data_preprocessor mean=[123.675, 116.28, 103.53], std=[58.395, 57.12,
# 57.375]).
_base_ = ['./zeroshot_clip-b16.py']
model = dict(
    backbone=dict(
        _delete_=True,
        type='mmlocat.EVA02CLIPViT',
        arch='b',
        init_cfg=dict(
            type='Pretrained',
            checkpoint='checkpoints/eva02-clip-b16_mmlocat.pth',
            prefix='backbone.')))
