# Cityscapes val (500 images, 19 classes) for zero-shot segmentation, as
# SCLIP's configs/cfg_city_scapes.py: mmseg's dataset base, images resized
# to short side 560 (cfg_city_scapes.py:14), SCLIP's class names
# (cfg_city_scapes.py:5). mmlocat's earlier protocol:
# ./zeroshot_cityscapes_mmlocat.py.
_base_ = ['mmseg::_base_/datasets/cityscapes.py']
test_pipeline = _base_.test_pipeline
test_pipeline[1] = dict(test_pipeline[1], scale=(2048, 560))  # the Resize
test_dataloader = dict(dataset=dict(pipeline=test_pipeline))
# test only; crop_size (the training crop) unset: the window is the model's
train_dataloader = val_dataloader = val_evaluator = crop_size = None
# The segmentor's settings for this dataset (a leaf passes them on).
zero_shot_dataset = dict(
    class_name_file='{{ fileDirname }}/../class_names/cityscapes.txt')
