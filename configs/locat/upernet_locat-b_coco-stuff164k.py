# UperNet + LocAtViT-B on COCO-Stuff-164k: the model base
# (_base_/seg/upernet_locat-b.py) with mmseg's ViT-UperNet data and schedule,
# the dataset's classes and crop set in place.
_base_ = [
    '../_base_/seg/upernet_locat-b.py',
    '../_base_/seg/upernet_vit_coco-stuff164k-512x512_80k.py'
]

_base_.model.data_preprocessor.size = (512, 512)
_base_.model.decode_head.num_classes = 171
_base_.model.auxiliary_head.num_classes = 171
