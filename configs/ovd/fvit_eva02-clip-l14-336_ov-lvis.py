# F-ViT, frozen EVA02-CLIP L/14-336 (plain weights), OV-LVIS, input 896:
# CLIPSelf's fvit_vitl14_upsample_fpn_bs64_4x_ovlvis_eva_original. Same
# detector as fvit_clip-l14_ov-lvis.py with the EVA02-CLIP image tower and
# ImageNet mean / std, as F-ViT.
_base_ = ['./fvit_clip-l14_ov-lvis.py', './_base_/eva02-clip.py']
model = dict(
    data_preprocessor={{_base_.imagenet_norm}},
    backbone={{_base_.eva02_clip_l14_336}},
    roi_head=dict(
        bbox_head=dict(
            text_embeddings='data/lvis_v1/embeddings/'
            'lvis-v1_eva02-clip-l14-336.npy',
            base_class_names='data/lvis_v1/embeddings/'
            'lvis-v1_eva02-clip-l14-336.base.json')))
