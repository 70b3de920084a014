# LaSt-CLIP EVA02-CLIP B/16 with LazyStrike pooling; output
# checkpoints/last-eva02-clip-b16_mmlocat.pth
# (configs/ovd/fvit_last-eva02-clip-b16_*,
# configs/last/zeroshot_last-eva02-clip-b16_*). Text tower: open_clip's
# EVA02-B-16 with its open_clip-format weights file (convert the image tower
# from the same file: the towers' CLIP records are compared at build).
# Inputs keep CLIP's mean / std (open_clip's for EVA02-CLIP; F-ViT's
# ImageNet ones are its detection choice).
_base_ = ['./_base_/clip_cc3m.py', '../ovd/_base_/eva02-clip.py']
model = dict(
    image_encoder={{_base_.eva02_clip_b16}},
    text_encoder=dict(
        model_name='EVA02-B-16',
        weights='checkpoints/open_clip_EVA02-B-16.bin'))
test_evaluator = dict(
    embeddings='data/imagenet/embeddings/imagenet_eva02-clip-b16.npy',
    clip_checkpoint='checkpoints/eva02-clip-b16_mmlocat.pth')
