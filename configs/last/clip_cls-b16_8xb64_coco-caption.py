# Same-recipe baseline of clip_last-b16_8xb64_coco-caption.py: the CLS
# token instead of LazyStrike pooling.
_base_ = './clip_last-b16_8xb64_coco-caption.py'
model = dict(image_encoder=dict(pooling='cls'))
