# Object discovery CorLoc (LaSt-ViT Tab. 7: 64.4, the paper's) with the
# LaSt-ViT authors' released DINO ViT-S/16 trained with LazyStrike
# (dino0080.pth of github ChengShiest/LAST-ViT, trained with DINO's
# main_dino.py; the converter reads its training-checkpoint layout and bare
# backbones alike), VOC07 trainval: corloc_dino-s_voc07.py (the training-free
# twin: LazyStrike on DINO's own weights) with these weights. Convert (the
# teacher), then test:
#   python tools/model_converters/dino2mmlocat.py dino0080.pth \
#       checkpoints/last-dino0080-s_mmlocat.pth
#   python tools/test.py configs/last/corloc_last-dino0080-s_voc07.py \
#       checkpoints/last-dino0080-s_mmlocat.pth
# The paper's arch is ViT-S/16; the converter prints the checkpoint's own
# args.arch / args.patch_size, and a checkpoint of another arch does not load
# (strict Pretrained loading).
_base_ = ['./corloc_dino-s_voc07.py', './_base_/last-dino0080-s.py']
model = dict(backbone=dict(init_cfg=_base_.last_dino0080_init))
