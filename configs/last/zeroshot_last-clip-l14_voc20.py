# Zero-shot seg., OpenAI CLIP ViT-L/14 with LaSt weights, VOC20: the baseline
# config with the LaSt checkpoint and the embeddings of its text tower
# (configs/last/README.md).
_base_ = './zeroshot_clip-l14_voc20.py'
model = dict(
    backbone=dict(
        init_cfg=dict(checkpoint='checkpoints/last-clip-vit-l14_mmlocat.pth')),
    text_embeddings='data/embeddings/voc20_last-clip-l14.npy')
