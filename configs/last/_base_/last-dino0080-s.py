# The LaSt-ViT authors' released DINO ViT-S/16 trained with LazyStrike
# (dino0080.pth of github ChengShiest/LAST-ViT), converted by
#   python tools/model_converters/dino2mmlocat.py dino0080.pth \
#       checkpoints/last-dino0080-s_mmlocat.pth
# A leaf sets model.backbone.init_cfg to it.
last_dino0080_init = dict(
    type='Pretrained',
    checkpoint='checkpoints/last-dino0080-s_mmlocat.pth',
    prefix='backbone.')
