# Point-in-Box (PiB) of LaSt-ViT-B/16 on ImageNet-val LOC boxes, with the
# geometrically exact protocol of _base_/pib_in1k.py. Test only:
#   python tools/test.py configs/last/pib_last-b_in1k.py CHECKPOINT
# CHECKPOINT: the released torchvision weights converted with
#   python tools/model_converters/last_vit2mmlocat.py SRC.pth CHECKPOINT.pth
_base_ = ['./_base_/pib_in1k.py']

# The same ViT-B/16 with LazyStrike pooling, scored against its LazyStrike
# token: the A/B is this one option.
model = dict(backbone=dict(pooling='lazy_strike', topk=1))
