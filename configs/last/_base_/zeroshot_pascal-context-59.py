# PASCAL Context-59 val (5,105 images) for zero-shot segmentation: mmseg's
# dataset base (background ignored), images resized to short side 336
# (ours).
_base_ = ['mmseg::_base_/datasets/pascal_context_59.py']
test_pipeline = _base_.test_pipeline
test_pipeline[1] = dict(test_pipeline[1], scale=(2048, 336))  # the Resize
test_dataloader = dict(dataset=dict(pipeline=test_pipeline))
# test only; crop_size (the training crop) unset: the window is the model's
train_dataloader = val_dataloader = val_evaluator = crop_size = None
