# F-ViT, frozen OpenAI CLIP ViT-B/16 (plain weights), OV-COCO.
_base_ = [
    'mmdet::_base_/default_runtime.py', '../_base_/mmlocat_runtime.py',
    './_base_/fvit_clip-b16.py', './_base_/ov-coco_lsj-640.py'
]
model = dict(
    # F-ViT pads training batches to the fixed crop size after
    # normalisation (and test batches to a square).
    data_preprocessor=dict(batch_augments=[
        dict(type='BatchFixedSizePad', size={{_base_.image_size}})
    ]),
    # Train labels index the 48 base classes; the head knows all 65.
    train_class_names={{_base_.base_classes}},
    roi_head=dict(
        bbox_head=dict(
            text_embeddings='data/coco/embeddings/ov-coco_clip-vit-b16.npy',
            class_names={{_base_.all_classes}},
            base_class_names={{_base_.base_classes}},
            bg_class_weight=0.6,
            vlm_temperature=75.0,
            alpha=0.1,
            beta=0.8)))
default_hooks = dict(checkpoint=dict(interval=1, max_keep_ckpts=3))
