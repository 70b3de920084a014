# Zero-shot segmentation with a frozen MetaCLIP ViT-B/16 (open_clip's
# ViT-B-16-quickgelu, weights metaclip_fullcc: b16_fullcc2.5b.pt): the OpenAI
# CLIP architecture, QuickGELU and OpenAI's mean / std (open_clip's
# pretrained config of these weights), hence the CLIP B/16 protocol with
# another checkpoint.
_base_ = ['./zeroshot_clip-b16.py']
model = dict(
    backbone=dict(
        init_cfg=dict(
            checkpoint='checkpoints/metaclip-b16-fullcc_mmlocat.pth')))
