# Zero-shot segmentation (Tab. 4 baseline), frozen OpenAI CLIP ViT-L/14,
# Cityscapes. Protocol: configs/last/README.md.
_base_ = ['./_base_/zeroshot_clip-l14.py', './_base_/zeroshot_cityscapes.py']
model = dict(
    text_embeddings='data/embeddings/cityscapes_clip-l14.npy',
    **_base_.zero_shot_dataset)
