# Same-recipe CLS baseline of clip_last-l14_8xb64_cc3m.py; converted to
# checkpoints/cls-clip-vit-l14_mmlocat.pth.
_base_ = './clip_last-l14_8xb64_cc3m.py'
model = dict(image_encoder=dict(pooling='cls'))
