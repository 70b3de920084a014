# Zero-shot seg., OpenAI CLIP ViT-B/16 fine-tuned with the CLS token
# (configs/last/clip_cls-*), COCO-Stuff-164k: the same-recipe twin of
# zeroshot_last-clip-b16_coco-stuff164k.py, all but the checkpoint and the
# embeddings of its text tower.
_base_ = './zeroshot_last-clip-b16_coco-stuff164k.py'
model = dict(
    backbone=dict(
        init_cfg=dict(checkpoint='checkpoints/cls-clip-vit-b16_mmlocat.pth')),
    text_embeddings='data/embeddings/coco-stuff164k_cls-clip-b16.npy')
