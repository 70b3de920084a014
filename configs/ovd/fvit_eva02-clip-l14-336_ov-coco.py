# F-ViT, frozen EVA02-CLIP L/14-336 (plain weights), OV-COCO, LSJ 896: the
# LaSt-ViT paper's large F-ViT backbone. Same detector as
# fvit_clip-l14_ov-coco.py (strides 3.5 / 7 / 14 / 28 with 14-px patches)
# with the EVA02-CLIP image tower and ImageNet mean / std; its position
# embedding (24x24 at 336 px) is resampled and its RoPE recomputed for
# every input grid.
_base_ = ['./fvit_clip-l14_ov-coco.py', './_base_/eva02-clip.py']
model = dict(
    data_preprocessor={{_base_.imagenet_norm}},
    backbone={{_base_.eva02_clip_l14_336}},
    roi_head=dict(
        bbox_head=dict(text_embeddings='data/coco/embeddings/'
                       'ov-coco_eva02-clip-l14-336.npy')))
