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
# The same one-cycle schedule of the ImageNet recipe, re-timed in place.
_base_.param_scheduler[0].update(start_factor=min_lr_ratio, end=warmup_epochs)
_base_.param_scheduler[1].update(
    end_factor=min_lr_ratio, begin=warmup_epochs, end=max_epochs)
train_cfg = dict(by_epoch=True, max_epochs=max_epochs, val_interval=10)
