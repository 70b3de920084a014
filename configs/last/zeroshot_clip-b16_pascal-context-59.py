# Zero-shot segmentation (Tab. 4 baseline), frozen OpenAI CLIP ViT-B/16, PASCAL
# Context-59. Protocol: configs/last/README.md.
_base_ = [
    './_base_/zeroshot_clip-b16.py', './_base_/zeroshot_pascal-context-59.py'
]
model = dict(
    text_embeddings='data/embeddings/pascal-context-59_clip-b16.npy',
    **_base_.zero_shot_dataset)
