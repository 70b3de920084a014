# PASCAL Context-59 val (5,105 images) for zero-shot segmentation, as
# SCLIP's configs/cfg_context59.py: mmseg's dataset base (background
# ignored: reduce_zero_label), images resized to short side 336
# (cfg_context59.py:14), SCLIP's class names (cfg_context59.py:5). mmlocat's
# earlier protocol: ./zeroshot_pascal-context-59_mmlocat.py.
_base_ = ['mmseg::_base_/datasets/pascal_context_59.py']
test_pipeline = _base_.test_pipeline
test_pipeline[1] = dict(test_pipeline[1], scale=(2048, 336))  # the Resize
test_dataloader = dict(dataset=dict(pipeline=test_pipeline))
# test only; crop_size (the training crop) unset: the window is the model's
train_dataloader = val_dataloader = val_evaluator = crop_size = None
# The segmentor's settings for this dataset (a leaf passes them on).
zero_shot_dataset = dict(
    class_name_file='{{ fileDirname }}/../class_names/pascal-context-59.txt')
