# Zero-shot seg., MetaCLIP ViT-B/16 (fullcc 2.5B) with LaSt weights, PASCAL
# Context-59: the baseline config with the LaSt checkpoint and the embeddings
# of its text tower (configs/last/README.md).
_base_ = './zeroshot_metaclip-b16_pascal-context-59.py'
model = dict(
    backbone=dict(
        init_cfg=dict(
            checkpoint='checkpoints/last-metaclip-b16-fullcc_mmlocat.pth')),
    text_embeddings='data/embeddings/pascal-context-59_last-metaclip-b16.npy')
