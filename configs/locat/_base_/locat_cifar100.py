# CIFAR-100 upsampled to 224 through the same timm augmentations.
_base_ = './locat_small_data.py'

dataset_type = 'CIFAR100'
# CIFAR images are decoded RGB arrays: no file loading, no channel swap.
data_preprocessor = dict(to_rgb=False)
train_pipeline = [
    dict(
        type='RandomResizedCrop',
        scale=224,
        backend='pillow',
        interpolation='bicubic'),
    dict(type='RandomFlip', prob=0.5, direction='horizontal'),
    dict(
        type='RandAugment',
        policies='timm_increasing',
        num_policies=2,
        total_level=10,
        magnitude_level=9,
        magnitude_std=0.5,
        hparams=dict(pad_val=[128, 128, 128], interpolation='bicubic')),
    dict(
        type='RandomErasing',
        erase_prob=0.25,
        mode='rand',
        min_area_ratio=0.02,
        max_area_ratio=1 / 3,
        fill_color={{_base_.pixel_mean}},
        fill_std={{_base_.pixel_std}}),
    dict(type='PackInputs'),
]
test_pipeline = [
    dict(type='Resize', scale=(224, 224), interpolation='bicubic'),
    dict(type='PackInputs'),
]
train_dataloader = dict(
    dataset=dict(
        _delete_=True,
        type=dataset_type,
        data_root='data/cifar100',
        split='train',
        pipeline=train_pipeline))
val_dataloader = dict(
    dataset=dict(
        _delete_=True,
        type=dataset_type,
        data_root='data/cifar100',
        split='test',
        pipeline=test_pipeline))
test_dataloader = val_dataloader
