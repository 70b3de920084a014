# COCO-Stuff-164k val (5,000 images, 171 classes) for zero-shot
# segmentation, as SCLIP's configs/cfg_coco_stuff164k.py: mmseg's dataset
# base, images resized to short side 448 (cfg_coco_stuff164k.py:14), SCLIP's
# class names (cfg_coco_stuff164k.py:5). mmlocat's earlier protocol:
# ./zeroshot_coco-stuff164k_mmlocat.py.
_base_ = ['mmseg::_base_/datasets/coco-stuff164k.py']
test_pipeline = _base_.test_pipeline
test_pipeline[1] = dict(test_pipeline[1], scale=(2048, 448))  # the Resize
test_dataloader = dict(dataset=dict(pipeline=test_pipeline))
# test only; crop_size (the training crop) unset: the window is the model's
train_dataloader = val_dataloader = val_evaluator = crop_size = None
# The segmentor's settings for this dataset (a leaf passes them on).
zero_shot_dataset = dict(
    class_name_file='{{ fileDirname }}/../class_names/coco-stuff164k.txt')
