# LaSt-CLIP EVA02-CLIP L/14-336 with LazyStrike pooling at 336 px; output
# checkpoints/last-eva02-clip-l14-336_mmlocat.pth
# (configs/ovd/fvit_last-eva02-clip-l14-336_*).
_base_ = ['./_base_/clip_coco-caption.py', '../ovd/_base_/eva02-clip.py']
model = dict(
    image_encoder={{_base_.eva02_clip_l14_336}},
    text_encoder=dict(
        model_name='EVA02-L-14-336',
        weights='checkpoints/open_clip_EVA02-L-14-336.bin'))
img_size = 336
image_size = (img_size, img_size)
train_crop = dict(
    type='RandomResizedCrop',
    scale=img_size,
    crop_ratio_range=(0.9, 1.0),
    interpolation='bicubic',
    backend='pillow')
eval_resize = dict(
    type='ResizeEdge',
    scale=img_size,
    edge='short',
    interpolation='bicubic',
    backend='pillow')
eval_crop = dict(type='CenterCrop', crop_size=img_size)
train_dataloader = dict(
    dataset=dict(pipeline=[{{_base_.load}}, train_crop, {{_base_.tokenizer}},
                           {{_base_.pack}}]))
val_dataloader = dict(
    dataset=dict(pipeline=[{{_base_.load}}, eval_resize, eval_crop,
                           {{_base_.tokenizer}}, {{_base_.pack}}]))
test_dataloader = dict(
    dataset=dict(pipeline=[{{_base_.load}}, eval_resize, eval_crop,
                           dict(type='PackInputs')]))
test_evaluator = dict(
    embeddings='data/imagenet/embeddings/imagenet_eva02-clip-l14-336.npy')
