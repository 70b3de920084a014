# PiB of the plain ViT-B/16 baseline with the public script's rule (see
# pib_last-b_in1k_public.py): CLS-output patch scores, raw-integer boxes
# mapped by the metric.
_base_ = ['./pib_last-b_in1k_public.py']

model = dict(
    backbone=dict(
        _delete_=True,
        type='VisionTransformer',
        arch='b',
        img_size=224,
        patch_size=16,
        out_type='cls_token'))
