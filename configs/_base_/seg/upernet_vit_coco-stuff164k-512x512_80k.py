# ViT-UperNet data and schedule on COCO-Stuff-164k (171 classes, crop 512,
# 80k iterations, 8 GPUs x 2 images). Defines no model (see
# upernet_vit_ade20k-512x512_160k.py).
_base_ = ['mmseg::_base_/datasets/coco-stuff164k.py', './upernet_vit_80k.py']

train_dataloader = dict(batch_size=2)
val_dataloader = dict(batch_size=1)
test_dataloader = val_dataloader
