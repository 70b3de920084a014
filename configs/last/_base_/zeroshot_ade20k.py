# ADE20K val (2,000 images, 150 classes) for zero-shot segmentation, as
# SCLIP's configs/cfg_ade20k.py: mmseg's dataset base, images resized to
# short side 336 (cfg_ade20k.py:14), SCLIP's class names (cfg_ade20k.py:5).
# mmlocat's earlier protocol: ./zeroshot_ade20k_mmlocat.py.
_base_ = ['mmseg::_base_/datasets/ade20k.py']
test_pipeline = _base_.test_pipeline
test_pipeline[1] = dict(test_pipeline[1], scale=(2048, 336))  # the Resize
test_dataloader = dict(dataset=dict(pipeline=test_pipeline))
# test only; crop_size (the training crop) unset: the window is the model's
train_dataloader = val_dataloader = val_evaluator = crop_size = None
# The segmentor's settings for this dataset (a leaf passes them on).
zero_shot_dataset = dict(
    class_name_file='{{ fileDirname }}/../class_names/ade20k.txt')
