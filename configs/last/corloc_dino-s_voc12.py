# Object discovery CorLoc, DINO ViT-S/16 + LaSt, VOC12 trainval (LaSt-ViT
# Tab. 7: 67.6 CorLoc, the paper's): corloc_dino-s_voc07.py on VOC 2012.
#   python tools/test.py configs/last/corloc_dino-s_voc12.py CHECKPOINT
_base_ = './corloc_dino-s_voc07.py'
test_dataloader = dict(dataset=dict(data_root='data/VOCdevkit/VOC2012'))
