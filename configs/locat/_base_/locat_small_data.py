# Small-data recipe of the public code (mini-ImageNet protocol): the
# ImageNet-1k recipe with 600 epochs, 120 warmup epochs and lr 5e-4, for
# 100 classes. The dataset is set by the files inheriting this one.
_base_ = './locat_in1k.py'

base_lr = 5e-4
max_epochs = 600
warmup_epochs = 120
min_lr_ratio = 1e-7 / base_lr

data_preprocessor = dict(num_classes=100)
model = dict(head=dict(num_classes=100))
optim_wrapper = dict(optimizer=dict(lr=base_lr))
param_scheduler = [
    dict(
        type='LinearLR',
        start_factor=min_lr_ratio,
        end_factor=1.0,
        by_epoch=True,
        begin=0,
        end=warmup_epochs,
        convert_to_iter_based=True),
    dict(
        type='LinearLR',
        start_factor=1.0,
        end_factor=min_lr_ratio,
        by_epoch=True,
        begin=warmup_epochs,
        end=max_epochs,
        convert_to_iter_based=True),
]
train_cfg = dict(by_epoch=True, max_epochs=max_epochs, val_interval=10)
