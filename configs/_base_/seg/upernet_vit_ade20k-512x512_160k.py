# mmseg's own ViT-UperNet recipe on ADE20K (8 GPUs x 2 images, 160k iters,
# AdamW 6e-5, linear warmup + poly). Models only swap the backbone, neck and
# pretrained weights on top of it.
_base_ = 'mmseg::vit/vit_vit-b16_mln_upernet_8xb2-160k_ade20k-512x512.py'

custom_imports = dict(imports=['mmlocat'], allow_failed_imports=False)
# Weights come from the backbone's init_cfg, not mmseg's ViT-B path.
model = dict(pretrained=None)
