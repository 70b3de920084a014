# F-ViT, frozen EVA02-CLIP B/16 (plain weights), OV-LVIS: CLIPSelf's
# fvit_vitb16_upsample_fpn_bs64_4x_ovlvis_eva_original. Same detector as
# fvit_clip-b16_ov-lvis.py with the EVA02-CLIP image tower and ImageNet
# mean / std, as F-ViT.
_base_ = ['./fvit_clip-b16_ov-lvis.py', './_base_/eva02-clip.py']
model = dict(
    data_preprocessor={{_base_.imagenet_norm}},
    backbone={{_base_.eva02_clip_b16}},
    roi_head=dict(
        bbox_head=dict(
            text_embeddings='data/lvis_v1/embeddings/'
            'lvis-v1_eva02-clip-b16.npy',
            base_class_names='data/lvis_v1/embeddings/'
            'lvis-v1_eva02-clip-b16.base.json')))
