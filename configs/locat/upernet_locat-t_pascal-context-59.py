# UperNet + LocAtViT-T on PASCAL Context-59: the model base
# (_base_/seg/upernet_locat-t.py) with mmseg's ViT-UperNet data and schedule,
# the dataset's classes and crop set in place.
_base_ = [
    '../_base_/seg/upernet_locat-t.py',
    '../_base_/seg/upernet_vit_pascal-context-59-480x480_80k.py'
]

_base_.model.data_preprocessor.size = (480, 480)
_base_.model.decode_head.num_classes = 59
_base_.model.auxiliary_head.num_classes = 59
_base_.model.test_cfg = _base_.slide_test_cfg
