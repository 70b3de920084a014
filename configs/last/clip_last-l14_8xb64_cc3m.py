# LaSt-CLIP L/14: OpenAI CLIP ViT-L/14 with LazyStrike pooling; output
# checkpoints/last-clip-vit-l14_mmlocat.pth (configs/ovd/fvit_last-l14_*,
# configs/last/zeroshot_last-clip-l14_*). Activation checkpointing per block
# (with_cp) keeps 64 images per GPU within 40-80 GB.
_base_ = './_base_/clip_cc3m.py'
model = dict(
    image_encoder=dict(
        arch='l',
        patch_size=14,
        with_cp=True,
        init_cfg=dict(checkpoint='checkpoints/clip-vit-l14_mmlocat.pth')),
    text_encoder=dict(
        model_name='ViT-L-14-quickgelu', weights='checkpoints/ViT-L-14.pt'))
test_evaluator = dict(
    embeddings='data/imagenet/embeddings/imagenet_clip-vit-l14.npy',
    clip_checkpoint='checkpoints/clip-vit-l14_mmlocat.pth')
