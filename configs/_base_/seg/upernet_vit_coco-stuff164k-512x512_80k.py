# ViT-UperNet on COCO-Stuff-164k: 171 classes, crop 512, 80k iterations.
_base_ = ['./upernet_vit_80k.py', 'mmseg::_base_/datasets/coco-stuff164k.py']

crop_size = (512, 512)
model = dict(
    data_preprocessor=dict(size=crop_size),
    decode_head=dict(num_classes=171),
    auxiliary_head=dict(num_classes=171))
# 8 GPUs x 2 images
train_dataloader = dict(batch_size=2)
val_dataloader = dict(batch_size=1)
test_dataloader = val_dataloader
