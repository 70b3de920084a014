# VOC20 for zero-shot segmentation: PASCAL VOC 2012 val (1,449 images)
# without its background class: mmseg's PascalVOCDataset with the 20 object
# classes as metainfo (its label map sends background to 255, ignored).
# Images resized to short side 336 (ours).
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
