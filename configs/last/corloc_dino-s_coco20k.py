# Object discovery CorLoc, DINO ViT-S/16 + LazyStrike (training-free),
# COCO20k: the 19,817 COCO train2014 images of LOST's list, boxes from a
# COCO JSON built by
#   python tools/dataset_converters/coco20k.py \
#       data/coco/annotations/instances_train2014.json \
#       coco_20k_filenames.txt data/coco/annotations/coco20k.json
# (coco_20k_filenames.txt is LOST's file, supplied by you). As LOST: crowd
# boxes dropped, x1, y1, x2, y2 rounded to integers (round_boxes=False
# keeps the floats).
_base_ = './corloc_dino-s_voc07.py'
test_dataloader = dict(
    dataset=dict(
        _delete_=True,
        type='mmlocat.CocoBoxesDataset',
        data_root='data/coco',
        ann_file='annotations/coco20k.json',
        data_prefix=dict(img_path='train2014'),
        round_boxes=True,
        expected_num_images=19817,
        pipeline={{_base_.test_pipeline}}))
