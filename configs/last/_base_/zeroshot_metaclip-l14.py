# Zero-shot segmentation with a frozen MetaCLIP ViT-L/14 (open_clip's
# ViT-L-14-quickgelu, weights metaclip_fullcc: l14_fullcc2.5b.pt): the
# CLIP L/14 protocol with another checkpoint.
_base_ = ['./zeroshot_clip-l14.py']
model = dict(
    backbone=dict(
        init_cfg=dict(
            checkpoint='checkpoints/metaclip-l14-fullcc_mmlocat.pth')))
