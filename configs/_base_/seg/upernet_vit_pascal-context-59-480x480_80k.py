# ViT-UperNet on PASCAL Context-59: 59 classes, crop 480, 80k iterations.
_base_ = [
    './upernet_vit_80k.py', 'mmseg::_base_/datasets/pascal_context_59.py'
]

crop_size = (480, 480)
model = dict(
    data_preprocessor=dict(size=crop_size),
    decode_head=dict(num_classes=59),
    auxiliary_head=dict(num_classes=59),
    test_cfg=dict(mode='slide', crop_size=crop_size, stride=(320, 320)))
# 8 GPUs x 2 images
train_dataloader = dict(batch_size=2)
val_dataloader = dict(batch_size=1)
test_dataloader = val_dataloader
