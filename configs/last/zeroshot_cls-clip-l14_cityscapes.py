# Zero-shot seg., OpenAI CLIP ViT-L/14 fine-tuned with the CLS token
# (configs/last/clip_cls-*), Cityscapes: the same-recipe twin of
# zeroshot_last-clip-l14_cityscapes.py, all but the checkpoint and the
# embeddings of its text tower.
_base_ = './zeroshot_last-clip-l14_cityscapes.py'
model = dict(
    backbone=dict(
        init_cfg=dict(checkpoint='checkpoints/cls-clip-vit-l14_mmlocat.pth')),
    text_embeddings='data/embeddings/cityscapes_cls-clip-l14.npy')
