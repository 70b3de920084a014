# Zero-shot segmentation (Tab. 4 baseline), frozen EVA02-CLIP L/14-336,
# Cityscapes. Protocol: configs/last/README.md.
_base_ = [
    './_base_/zeroshot_eva02-clip-l14-336.py',
    './_base_/zeroshot_cityscapes.py'
]
model = dict(
    text_embeddings='data/embeddings/cityscapes_eva02-clip-l14-336.npy',
    **_base_.zero_shot_dataset)
