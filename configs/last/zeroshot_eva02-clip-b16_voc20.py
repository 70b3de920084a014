# Zero-shot segmentation (Tab. 4 baseline), frozen EVA02-CLIP B/16, VOC20.
# Protocol: configs/last/README.md.
_base_ = ['./_base_/zeroshot_eva02-clip-b16.py', './_base_/zeroshot_voc20.py']
model = dict(
    text_embeddings='data/embeddings/voc20_eva02-clip-b16.npy',
    **_base_.zero_shot_dataset)
