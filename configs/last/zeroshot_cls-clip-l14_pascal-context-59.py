# Zero-shot seg., OpenAI CLIP ViT-L/14 fine-tuned with the CLS token
# (configs/last/clip_cls-*), PASCAL Context-59: the same-recipe twin of
# zeroshot_last-clip-l14_pascal-context-59.py, all but the checkpoint and the
# embeddings of its text tower.
_base_ = './zeroshot_last-clip-l14_pascal-context-59.py'
model = dict(
    backbone=dict(
        init_cfg=dict(checkpoint='checkpoints/cls-clip-vit-l14_mmlocat.pth')),
    text_embeddings='data/embeddings/pascal-context-59_cls-clip-l14.npy')
