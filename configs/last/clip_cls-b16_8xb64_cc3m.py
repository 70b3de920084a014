# Same-recipe baseline of clip_last-b16_8xb64_cc3m.py: the CLS token instead
# of LazyStrike pooling; converted to checkpoints/cls-clip-vit-b16_mmlocat.pth
# (configs/ovd/fvit_cls-b16_*, configs/last/zeroshot_cls-clip-b16_*).
_base_ = './clip_last-b16_8xb64_cc3m.py'
model = dict(image_encoder=dict(pooling='cls'))
