# Zero-shot segmentation (Tab. 4 baseline), frozen MetaCLIP ViT-L/14 (fullcc
# 2.5B), ADE20K. Protocol: configs/last/README.md.
_base_ = ['./_base_/zeroshot_metaclip-l14.py', './_base_/zeroshot_ade20k.py']
model = dict(
    text_embeddings='data/embeddings/ade20k_metaclip-l14.npy',
    **_base_.zero_shot_dataset)
