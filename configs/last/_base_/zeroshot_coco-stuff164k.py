# COCO-Stuff-164k val (5,000 images, 171 classes) for zero-shot
# segmentation: mmseg's dataset base, images resized to short side 336
# (ours).
_base_ = ['mmseg::_base_/datasets/coco-stuff164k.py']
test_pipeline = _base_.test_pipeline
test_pipeline[1] = dict(test_pipeline[1], scale=(2048, 336))  # the Resize
test_dataloader = dict(dataset=dict(pipeline=test_pipeline))
# test only; crop_size (the training crop) unset: the window is the model's
train_dataloader = val_dataloader = val_evaluator = crop_size = None
