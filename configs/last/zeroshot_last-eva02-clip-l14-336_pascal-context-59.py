# Zero-shot seg., EVA02-CLIP L/14-336 with LaSt weights, PASCAL Context-59: the
# baseline config with the LaSt checkpoint and the embeddings of its text tower
# (configs/last/README.md).
_base_ = './zeroshot_eva02-clip-l14-336_pascal-context-59.py'
model = dict(
    backbone=dict(
        init_cfg=dict(
            checkpoint='checkpoints/last-eva02-clip-l14-336_mmlocat.pth')),
    text_embeddings=('data/embeddings/'
                     'pascal-context-59_last-eva02-clip-l14-336.npy'))
