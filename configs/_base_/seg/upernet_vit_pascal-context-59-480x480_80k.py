# ViT-UperNet data and schedule on PASCAL Context-59 (59 classes, crop 480,
# 80k iterations, 8 GPUs x 2 images). Defines no model (see
# upernet_vit_ade20k-512x512_160k.py) but its sliding-window test.
_base_ = [
    'mmseg::_base_/datasets/pascal_context_59.py', './upernet_vit_80k.py'
]

train_dataloader = dict(batch_size=2)
val_dataloader = dict(batch_size=1)
test_dataloader = val_dataloader
# mmseg's sliding-window test on this dataset (480 crops, stride 320),
# for the leaves' model.test_cfg.
slide_test_cfg = dict(
    mode='slide', crop_size=_base_.crop_size, stride=(320, 320))
