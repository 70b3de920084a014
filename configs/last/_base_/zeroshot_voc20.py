# VOC20 for zero-shot segmentation, as SCLIP's configs/cfg_voc20.py: PASCAL
# VOC 2012 val (1,449 images) without its background class (mmseg's
# PascalVOCDataset with the 20 object classes as metainfo: its label map
# sends background to 255, ignored, as SCLIP's PascalVOC20Dataset with
# reduce_zero_label), images resized to short side 336 (cfg_voc20.py:14),
# SCLIP's class names with synonyms (cfg_voc20.py:5). mmlocat's earlier
# protocol: ./zeroshot_voc20_mmlocat.py.
_base_ = ['mmseg::_base_/datasets/pascal_voc12.py']
test_pipeline = _base_.test_pipeline
test_pipeline[1] = dict(test_pipeline[1], scale=(2048, 336))  # the Resize
test_dataloader = dict(
    dataset=dict(
        pipeline=test_pipeline,
        metainfo=dict(
            classes=('aeroplane', 'bicycle', 'bird', 'boat', 'bottle', 'bus',
                     'car', 'cat', 'chair', 'cow', 'diningtable', 'dog',
                     'horse', 'motorbike', 'person', 'pottedplant', 'sheep',
                     'sofa', 'train', 'tvmonitor'))))
# test only; crop_size (the training crop) unset: the window is the model's
train_dataloader = val_dataloader = val_evaluator = crop_size = None
# The segmentor's settings for this dataset (a leaf passes them on:
# model = dict(..., **_base_.zero_shot_dataset)).
zero_shot_dataset = dict(
    class_name_file='{{ fileDirname }}/../class_names/voc20.txt')
