# LaSt-CLIP B/16 on COCO Captions train2017 instead of CC3M, without the
# images of LVIS v1 val (LVIS drew its val images largely from COCO
# train2017; their ids are COCO's): exclude_ids drops them and logs how
# many. The captions still name OV-COCO's novel classes: compare OV-COCO
# results of this tower with caption-supervised methods, not with F-ViT's.
_base_ = './clip_last-b16_8xb64_cc3m.py'
train_dataloader = dict(
    dataset=dict(
        _delete_=True,
        type='mmlocat.CocoCaptionDataset',
        data_root='data/coco',
        ann_file='annotations/captions_train2017.json',
        data_prefix=dict(img_path='train2017/'),
        exclude_ids='data/lvis_v1/annotations/lvis_v1_val.json',
        missing_images='error',
        pipeline=[_base_.load] + _base_.train_pipeline))
