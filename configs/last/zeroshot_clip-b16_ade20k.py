# Zero-shot segmentation (Tab. 4 baseline), frozen OpenAI CLIP ViT-B/16,
# ADE20K. Protocol: configs/last/README.md.
_base_ = ['./_base_/zeroshot_clip-b16.py', './_base_/zeroshot_ade20k.py']
model = dict(
    text_embeddings='data/embeddings/ade20k_clip-b16.npy',
    **_base_.zero_shot_dataset)
