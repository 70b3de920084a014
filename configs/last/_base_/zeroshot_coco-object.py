# COCO-Object for zero-shot segmentation, as SCLIP's
# configs/cfg_coco_object.py: COCO val2017 (5,000 images), background + the
# 80 thing classes, maps converted from COCO-Stuff-164k's by
# tools/dataset_converters/coco_object.py (GroupViT's rule: stuff and
# unlabelled are background, nothing ignored), images resized to short side
# 336 (cfg_coco_object.py:16). Background is a text class of stuff words
# (line 1 of the class-name file, cfg_coco_object.py:5); logit scale 50
# (:6); pixels whose best class probability is below 0.1 become background
# (:7). mmlocat's earlier protocol: ./zeroshot_coco-object_mmlocat.py.
test_pipeline = [
    dict(type='LoadImageFromFile'),
    dict(type='Resize', scale=(2048, 336), keep_ratio=True),
    dict(type='LoadAnnotations'),
    dict(type='PackSegInputs')
]
test_dataloader = dict(
    batch_size=1,
    num_workers=4,
    persistent_workers=True,
    sampler=dict(type='DefaultSampler', shuffle=False),
    dataset=dict(
        type='mmlocat.COCOObjectDataset',
        data_root='data/coco_stuff164k',
        data_prefix=dict(
            img_path='images/val2017', seg_map_path='coco_object/val2017'),
        pipeline=test_pipeline))
test_evaluator = dict(type='IoUMetric', iou_metrics=['mIoU'])
# The segmentor's settings for this dataset (a leaf passes them on).
zero_shot_dataset = dict(
    class_name_file='{{ fileDirname }}/../class_names/coco-object.txt',
    logit_scale=50.,
    prob_thd=0.1)
