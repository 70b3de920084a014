# F-ViT, frozen EVA02-CLIP B/16 (plain weights), OV-COCO: the LaSt-ViT
# paper's F-ViT backbone. Same detector as fvit_clip-b16_ov-coco.py with
# the EVA02-CLIP image tower (RoPE, SwiGLU, sub-LN) in place of OpenAI's
# and ImageNet mean / std, as F-ViT.
_base_ = ['./fvit_clip-b16_ov-coco.py', './_base_/eva02-clip.py']
model = dict(
    data_preprocessor={{_base_.imagenet_norm}},
    backbone={{_base_.eva02_clip_b16}},
    roi_head=dict(
        bbox_head=dict(
            text_embeddings='data/coco/embeddings/ov-coco_eva02-clip-b16.npy'))
)
