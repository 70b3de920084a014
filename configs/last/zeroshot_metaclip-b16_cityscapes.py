# Zero-shot segmentation (Tab. 4 baseline), frozen MetaCLIP ViT-B/16 (fullcc
# 2.5B), Cityscapes. Protocol: configs/last/README.md.
_base_ = [
    './_base_/zeroshot_metaclip-b16.py', './_base_/zeroshot_cityscapes.py'
]
model = dict(
    text_embeddings='data/embeddings/cityscapes_metaclip-b16.npy',
    **_base_.zero_shot_dataset)
