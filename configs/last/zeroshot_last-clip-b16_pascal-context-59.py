# Zero-shot seg., OpenAI CLIP ViT-B/16 with LaSt weights, PASCAL Context-59:
# the baseline config with the LaSt checkpoint and the embeddings of its text
# tower (configs/last/README.md).
_base_ = './zeroshot_clip-b16_pascal-context-59.py'
model = dict(
    backbone=dict(
        init_cfg=dict(checkpoint='checkpoints/last-clip-vit-b16_mmlocat.pth')),
    text_embeddings='data/embeddings/pascal-context-59_last-clip-b16.npy')
