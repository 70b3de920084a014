# Same-recipe CLS baseline of clip_last-eva02-l14-336_8xb64_cc3m.py;
# converted to checkpoints/cls-eva02-clip-l14-336_mmlocat.pth.
_base_ = './clip_last-eva02-l14-336_8xb64_cc3m.py'
model = dict(image_encoder=dict(pooling='cls'))
