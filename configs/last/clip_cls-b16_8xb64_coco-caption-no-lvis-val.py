# Same-recipe CLS baseline of clip_last-b16_8xb64_coco-caption-no-lvis-val.py.
_base_ = './clip_last-b16_8xb64_coco-caption-no-lvis-val.py'
model = dict(image_encoder=dict(pooling='cls'))
