# Coarse segmentation (LaSt-ViT Tab. 6), DINO ViT-S/16 + LaSt (training-free
# LazyStrike on DINO weights), VOC12 val: the model of
# corloc_dino-s_voc07.py (LOST's padded geometry), foreground =
# s > mean(s) + std(s) per image.
#   python tools/test.py configs/last/coarseseg_last-dino-s_voc12.py CKPT
_base_ = ['./corloc_dino-s_voc07.py', './_base_/coarseseg_voc12.py']
test_dataloader = dict(_base_.coarseseg_dataloader, _delete_=True)
test_evaluator = _base_.coarseseg_evaluator
