# Coarse segmentation from patch scores (LaSt-ViT Tab. 6), PASCAL VOC 2012
# val: full-resolution images in the discovery protocol's (LOST's) geometry
# (no resize; PIL decoding without EXIF rotation, the image size checked
# against its label map; the model zero-pads to a multiple of 16), the
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
            dict(
                type='LoadImageFromFile',
                color_type='color_ignore_orientation',
                imdecode_backend='pillow'),
            dict(type='mmseg.LoadAnnotations'),
            dict(type='mmlocat.CheckAnnotatedSize'),
            dict(type='PackInputs', algorithm_keys=('gt_seg_map', )),
        ]))
coarseseg_evaluator = [dict(type='mmlocat.CoarseSegIoU', patch_size=16)]
