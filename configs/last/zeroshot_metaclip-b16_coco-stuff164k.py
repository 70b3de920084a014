# Zero-shot segmentation (Tab. 4 baseline), frozen MetaCLIP ViT-B/16 (fullcc
# 2.5B), COCO-Stuff-164k. Protocol: configs/last/README.md.
_base_ = [
    './_base_/zeroshot_metaclip-b16.py', './_base_/zeroshot_coco-stuff164k.py'
]
model = dict(
    text_embeddings='data/embeddings/coco-stuff164k_metaclip-b16.npy',
    **_base_.zero_shot_dataset)
