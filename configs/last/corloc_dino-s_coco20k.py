# Object discovery CorLoc, DINO ViT-S/16 + LaSt, COCO20k (LaSt-ViT Tab. 7:
# 51.6 CorLoc, the paper's): the 19,817 COCO train2014 images of LOST's
# list, boxes from a COCO JSON built by
#   python tools/dataset_converters/coco20k.py \
#       data/coco/annotations/instances_train2014.json \
#       coco_20k_filenames.txt data/coco/annotations/coco20k.json
# (non-crowd boxes; coco_20k_filenames.txt is LOST's file, supplied by you).
_base_ = './corloc_dino-s_voc07.py'
test_dataloader = dict(
    dataset=dict(
        _delete_=True,
        type='mmlocat.CocoBoxesDataset',
        data_root='data/coco',
        ann_file='annotations/coco20k.json',
        data_prefix=dict(img_path='train2014'),
        pipeline={{_base_.test_pipeline}}))
