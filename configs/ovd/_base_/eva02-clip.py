# EVA02-CLIP image towers for F-ViT (mmlocat.EVA02CLIPViT: 2-D RoPE, SwiGLU,
# sub-LN) and F-ViT's ImageNet normalisation of their inputs; the
# fvit_eva02-clip-* configs merge them into the OpenAI-CLIP recipes.
eva02_clip_b16 = dict(
    type='mmlocat.EVA02CLIPViT',
    arch='b',
    patch_size=16,
    img_size=224,
    init_cfg=dict(checkpoint='checkpoints/eva02-clip-b16_mmlocat.pth'))
eva02_clip_l14_336 = dict(
    eva02_clip_b16,
    arch='l',
    patch_size=14,
    img_size=336,
    init_cfg=dict(checkpoint='checkpoints/eva02-clip-l14-336_mmlocat.pth'))
# F-ViT normalises EVA02-CLIP inputs with ImageNet's mean / std.
imagenet_norm = dict(
    mean=[123.675, 116.28, 103.53], std=[58.395, 57.12, 57.375])
