# LaSt-CLIP EVA02-CLIP L/14-336 with LazyStrike pooling at 336 px; output
# checkpoints/last-eva02-clip-l14-336_mmlocat.pth
# (configs/ovd/fvit_last-eva02-clip-l14-336_*,
# configs/last/zeroshot_last-eva02-clip-l14-336_*): the B/16 config with the
# L/14-336 image and text towers at 336 px, activation checkpointing per
# block (with_cp) for 64 images per GPU within 40-80 GB.
_base_ = './clip_last-eva02-b16_8xb64_cc3m.py'
model = dict(
    image_encoder=dict(_base_.eva02_clip_l14_336, with_cp=True),
    text_encoder=dict(
        model_name='EVA02-L-14-336',
        weights='checkpoints/open_clip_EVA02-L-14-336.bin'))
img_size = 336
image_size = (img_size, img_size)
# The base pipelines edited in place for 336 px.
train_pipeline = _base_.train_pipeline
train_pipeline[0].scale = img_size
test_pipeline = _base_.test_pipeline
test_pipeline[1].scale = test_pipeline[2].crop_size = img_size
zero_shot_pipeline = _base_.zero_shot_pipeline
zero_shot_pipeline[1].scale = zero_shot_pipeline[2].crop_size = img_size
train_crop = train_pipeline[0]
eval_resize, eval_crop = test_pipeline[1:3]
train_dataloader = dict(dataset=dict(pipeline=train_pipeline))
val_dataloader = dict(dataset=dict(pipeline=test_pipeline))
test_dataloader = dict(dataset=dict(pipeline=zero_shot_pipeline))
test_evaluator = dict(
    embeddings='data/imagenet/embeddings/imagenet_eva02-clip-l14-336.npy',
    clip_checkpoint='checkpoints/eva02-clip-l14-336_mmlocat.pth')
