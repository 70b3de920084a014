# CIFAR-100 upsampled to 224 through the same timm augmentations.
_base_ = './locat_small_data.py'

dataset_type = 'CIFAR100'
# CIFAR images are decoded RGB arrays: no file loading, no channel swap.
data_preprocessor = dict(to_rgb=False)
# The ImageNet training pipeline without its file loading.
train_pipeline = _base_.train_pipeline[1:]
test_pipeline = [
    dict(type='Resize', scale=(224, 224), interpolation='bicubic'),
    dict(type='PackInputs'),
]
# CIFAR100 takes the base ImageNet datasets' keys (type, data_root, split,
# pipeline): merged, not deleted; split stays 'train' here.
train_dataloader = dict(
    dataset=dict(
        type=dataset_type, data_root='data/cifar100', pipeline=train_pipeline))
val_dataloader = dict(
    dataset=dict(
        train_dataloader['dataset'], split='test', pipeline=test_pipeline))
test_dataloader = val_dataloader
