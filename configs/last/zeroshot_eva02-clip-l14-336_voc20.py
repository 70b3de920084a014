# Zero-shot segmentation (Tab. 4 baseline), frozen EVA02-CLIP L/14-336, VOC20.
# Protocol: configs/last/README.md.
_base_ = [
    './_base_/zeroshot_eva02-clip-l14-336.py', './_base_/zeroshot_voc20.py'
]
model = dict(
    text_embeddings='data/embeddings/voc20_eva02-clip-l14-336.npy',
    **_base_.zero_shot_dataset)
