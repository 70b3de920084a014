# Zero-shot seg., OpenAI CLIP ViT-L/14 with LaSt weights, ADE20K: the baseline
# config with the LaSt checkpoint and the embeddings of its text tower
# (configs/last/README.md).
_base_ = './zeroshot_clip-l14_ade20k.py'
model = dict(
    backbone=dict(
        init_cfg=dict(checkpoint='checkpoints/last-clip-vit-l14_mmlocat.pth')),
    text_embeddings='data/embeddings/ade20k_last-clip-l14.npy')
