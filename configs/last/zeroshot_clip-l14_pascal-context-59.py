# Zero-shot segmentation (Tab. 4 baseline), frozen OpenAI CLIP ViT-L/14, PASCAL
# Context-59. Protocol: configs/last/README.md.
_base_ = [
    './_base_/zeroshot_clip-l14.py', './_base_/zeroshot_pascal-context-59.py'
]
model = dict(
    text_embeddings='data/embeddings/pascal-context-59_clip-l14.npy',
    **_base_.zero_shot_dataset)
