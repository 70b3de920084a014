# Zero-shot seg., EVA02-CLIP B/16 with LaSt weights, COCO-Stuff-164k: the
# baseline config with the LaSt checkpoint and the embeddings of its text tower
# (configs/last/README.md).
_base_ = './zeroshot_eva02-clip-b16_coco-stuff164k.py'
model = dict(
    backbone=dict(
        init_cfg=dict(
            checkpoint='checkpoints/last-eva02-clip-b16_mmlocat.pth')),
    text_embeddings='data/embeddings/coco-stuff164k_last-eva02-clip-b16.npy')
