# Zero-shot seg., OpenAI CLIP ViT-B/16 fine-tuned with the CLS token
# (configs/last/clip_cls-*), VOC20: the same-recipe twin of
# zeroshot_last-clip-b16_voc20.py, all but the checkpoint and the embeddings of
# its text tower.
_base_ = './zeroshot_last-clip-b16_voc20.py'
model = dict(
    backbone=dict(
        init_cfg=dict(checkpoint='checkpoints/cls-clip-vit-b16_mmlocat.pth')),
    text_embeddings='data/embeddings/voc20_cls-clip-b16.npy')
