# Object discovery CorLoc, DINO ViT-S/16 + LazyStrike (training-free), VOC12
# trainval (11,540 images): corloc_dino-s_voc07.py on VOC 2012.
#   python tools/test.py configs/last/corloc_dino-s_voc12.py CHECKPOINT
_base_ = './corloc_dino-s_voc07.py'
test_dataloader = dict(
    dataset=dict(
        data_root='data/VOCdevkit/VOC2012', expected_num_images=11540))
