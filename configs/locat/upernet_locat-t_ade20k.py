# UperNet + LocAtViT-T on ADE20K: the model base
# (_base_/seg/upernet_locat-t.py) with mmseg's ViT-UperNet data and schedule,
# the dataset's classes and crop set in place.
_base_ = [
    '../_base_/seg/upernet_locat-t.py',
    '../_base_/seg/upernet_vit_ade20k-512x512_160k.py'
]

_base_.model.data_preprocessor.size = (512, 512)
_base_.model.decode_head.num_classes = 150
_base_.model.auxiliary_head.num_classes = 150
