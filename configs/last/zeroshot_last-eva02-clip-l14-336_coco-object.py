# Zero-shot seg., EVA02-CLIP L/14-336 with LaSt weights, COCO-Object: the
# baseline config with the LaSt checkpoint and the embeddings of its text tower
# (configs/last/README.md).
_base_ = './zeroshot_eva02-clip-l14-336_coco-object.py'
model = dict(
    backbone=dict(
        init_cfg=dict(
            checkpoint='checkpoints/last-eva02-clip-l14-336_mmlocat.pth')),
    text_embeddings='data/embeddings/coco-object_last-eva02-clip-l14-336.npy')
