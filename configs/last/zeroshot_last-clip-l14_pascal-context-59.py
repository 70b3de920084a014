# Zero-shot seg., OpenAI CLIP ViT-L/14 with LaSt weights, PASCAL Context-59:
# the baseline config with the LaSt checkpoint and the embeddings of its text
# tower (configs/last/README.md).
_base_ = './zeroshot_clip-l14_pascal-context-59.py'
model = dict(
    backbone=dict(
        init_cfg=dict(checkpoint='checkpoints/last-clip-vit-l14_mmlocat.pth')),
    text_embeddings='data/embeddings/pascal-context-59_last-clip-l14.npy')
