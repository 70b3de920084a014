# Coarse segmentation from patch scores (LaSt-ViT Tab. 6), PASCAL VOC 2012
# val: full-resolution images (no resize, as the discovery protocol), the
# ground-truth labels packed beside the patch scores, foreground = every
# object class (mmlocat.CoarseSegIoU). The leaves take the model of a
# discovery config and put these in place of its data:
#   test_dataloader = dict(_base_.coarseseg_dataloader, _delete_=True)
coarseseg_dataloader = dict(
    batch_size=1,  # full-resolution images of different sizes
    num_workers=4,
    sampler=dict(type='DefaultSampler', shuffle=False),
    dataset=dict(
        type='mmseg.PascalVOCDataset',
        data_root='data/VOCdevkit/VOC2012',
        data_prefix=dict(
            img_path='JPEGImages', seg_map_path='SegmentationClass'),
        ann_file='ImageSets/Segmentation/val.txt',
        pipeline=[
            dict(type='LoadImageFromFile'),
            dict(type='mmseg.LoadAnnotations'),
            dict(type='PackInputs', algorithm_keys=('gt_seg_map', )),
        ]))
coarseseg_evaluator = [dict(type='mmlocat.CoarseSegIoU', patch_size=16)]
