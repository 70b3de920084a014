# Zero-shot segmentation (Tab. 4 baseline), frozen OpenAI CLIP ViT-L/14, COCO-
# Stuff-164k. Protocol: configs/last/README.md.
_base_ = [
    './_base_/zeroshot_clip-l14.py', './_base_/zeroshot_coco-stuff164k.py'
]
model = dict(
    text_embeddings='data/embeddings/coco-stuff164k_clip-l14.npy',
    **_base_.zero_shot_dataset)
