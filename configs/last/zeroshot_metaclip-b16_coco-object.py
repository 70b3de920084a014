# Zero-shot segmentation (Tab. 4 baseline), frozen MetaCLIP ViT-B/16 (fullcc
# 2.5B), COCO-Object. Protocol: configs/last/README.md.
_base_ = [
    './_base_/zeroshot_metaclip-b16.py', './_base_/zeroshot_coco-object.py'
]
model = dict(
    text_embeddings='data/embeddings/coco-object_metaclip-b16.npy',
    **_base_.zero_shot_dataset)
