# Zero-shot segmentation (Tab. 4 baseline), frozen EVA02-CLIP B/16, ADE20K.
# Protocol: configs/last/README.md.
_base_ = ['./_base_/zeroshot_eva02-clip-b16.py', './_base_/zeroshot_ade20k.py']
model = dict(
    text_embeddings='data/embeddings/ade20k_eva02-clip-b16.npy',
    **_base_.zero_shot_dataset)
