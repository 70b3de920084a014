# Zero-shot seg., OpenAI CLIP ViT-L/14 with LaSt weights, Cityscapes: the
# baseline config with the LaSt checkpoint and the embeddings of its text tower
# (configs/last/README.md).
_base_ = './zeroshot_clip-l14_cityscapes.py'
model = dict(
    backbone=dict(
        init_cfg=dict(checkpoint='checkpoints/last-clip-vit-l14_mmlocat.pth')),
    text_embeddings='data/embeddings/cityscapes_last-clip-l14.npy')
