# ViT-UperNet data and schedule on ADE20K (150 classes, crop 512, 160k
# iterations, 8 GPUs x 2 images), mmseg's own recipe. Defines no model: the
# leaves combine it with a model base and set the classes and crop there.
_base_ = ['mmseg::_base_/datasets/ade20k.py', './upernet_vit_160k.py']

train_dataloader = dict(batch_size=2)
val_dataloader = dict(batch_size=1)
test_dataloader = val_dataloader
