# F-ViT head on a frozen LocAtViT-B/16 (LocAt weights), OV-COCO:
# fvit_clip-b16_ov-coco.py edited in place. A LocAtViT has no CLIP text
# alignment, so there is no CLIP score fusion; everything else is the CLIP
# config's.
_base_ = './fvit_clip-b16_ov-coco.py'

_base_.model.vlm_fusion = False
# No value path without a CLIP: the ordinary last block + final norm.
_base_.model.last_tap = 'block'
_base_.model.roi_head.vlm_roi_extractor = None
# ImageNet mean / std instead of CLIP's.
_base_.model.data_preprocessor.update(
    mean=[123.675, 116.28, 103.53], std=[58.395, 57.12, 57.375])
# The same taps of a LocAtViT-B/16 (frozen, as the CLIP tower).
_base_.model.backbone.type = 'mmlocat.LocAtViT'
_base_.model.backbone.init_cfg.checkpoint = (
    'checkpoints/locat-b16_mmlocat.pth')
