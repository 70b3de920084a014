# Zero-shot seg., OpenAI CLIP ViT-B/16 with LaSt weights, COCO-Stuff-164k: the
# baseline config with the LaSt checkpoint and the embeddings of its text tower
# (configs/last/README.md).
_base_ = './zeroshot_clip-b16_coco-stuff164k.py'
model = dict(
    backbone=dict(
        init_cfg=dict(checkpoint='checkpoints/last-clip-vit-b16_mmlocat.pth')),
    text_embeddings='data/embeddings/coco-stuff164k_last-clip-b16.npy')
