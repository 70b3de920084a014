# Zero-shot seg., EVA02-CLIP B/16 fine-tuned with the CLS token
# (configs/last/clip_cls-*), ADE20K: the same-recipe twin of
# zeroshot_last-eva02-clip-b16_ade20k.py, all but the checkpoint and the
# embeddings of its text tower.
_base_ = './zeroshot_last-eva02-clip-b16_ade20k.py'
model = dict(
    backbone=dict(
        init_cfg=dict(
            checkpoint='checkpoints/cls-eva02-clip-b16_mmlocat.pth')),
    text_embeddings='data/embeddings/ade20k_cls-eva02-clip-b16.npy')
