# Same-recipe CLS baseline of clip_last-eva02-l14-336_8xb64_coco-caption.py.
_base_ = './clip_last-eva02-l14-336_8xb64_coco-caption.py'
model = dict(image_encoder=dict(pooling='cls'))
