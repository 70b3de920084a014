# Zero-shot seg., OpenAI CLIP ViT-L/14 with LaSt weights, COCO-Object: the
# baseline config with the LaSt checkpoint and the embeddings of its text tower
# (configs/last/README.md).
_base_ = './zeroshot_clip-l14_coco-object.py'
model = dict(
    backbone=dict(
        init_cfg=dict(checkpoint='checkpoints/last-clip-vit-l14_mmlocat.pth')),
    text_embeddings='data/embeddings/coco-object_last-clip-l14.npy')
