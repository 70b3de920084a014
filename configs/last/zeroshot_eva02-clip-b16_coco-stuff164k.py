# Zero-shot segmentation (Tab. 4 baseline), frozen EVA02-CLIP B/16, COCO-
# Stuff-164k. Protocol: configs/last/README.md.
_base_ = [
    './_base_/zeroshot_eva02-clip-b16.py',
    './_base_/zeroshot_coco-stuff164k.py'
]
model = dict(
    text_embeddings='data/embeddings/coco-stuff164k_eva02-clip-b16.npy',
    **_base_.zero_shot_dataset)
