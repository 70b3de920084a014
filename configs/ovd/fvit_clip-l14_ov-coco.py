# F-ViT, frozen OpenAI CLIP ViT-L/14 (plain weights), OV-COCO, LSJ 896:
# fvit_clip-b16_ov-coco.py edited in place (as mmdet's leaves do) for the
# 24-block, 1024-d L/14 tower and its 768-d text embeddings. Levels have
# strides 3.5 / 7 / 14 / 28 (/ 56) with 14-px patches.
_base_ = './fvit_clip-b16_ov-coco.py'

image_size = (896, 896)
_base_.model.data_preprocessor.batch_augments[0].size = image_size
_base_.model.backbone.update(
    arch='l', patch_size=14, out_indices=(6, 10, 14, 23))
_base_.model.backbone.init_cfg.checkpoint = (
    'checkpoints/clip-vit-l14_mmlocat.pth')
_base_.model.neck[0].in_channels = 1024
_base_.model.neck[1].in_channels = [1024, 1024, 1024, 1024]
_base_.model.rpn_head.anchor_generator.strides = [3.5, 7, 14, 28, 56]
_base_.model.roi_head.bbox_roi_extractor.featmap_strides = [3.5, 7, 14, 28]
# As wide as the 768-d text embeddings (F-ViT L/14).
_base_.model.roi_head.bbox_head.update(
    fc_out_channels=768,
    text_embeddings='data/coco/embeddings/ov-coco_clip-vit-l14.npy')
_base_.model.roi_head.vlm_roi_extractor.update(
    out_channels=768, featmap_strides=[14])

# LSJ at 896: the training resize and crop, the test resize.
train_pipeline = _base_.train_pipeline
train_pipeline[2].scale = train_pipeline[3].crop_size = image_size
test_pipeline = _base_.test_pipeline
test_pipeline[1].scale = image_size
train_dataloader = dict(dataset=dict(pipeline=train_pipeline))
val_dataloader = dict(dataset=dict(pipeline=test_pipeline))
test_dataloader = val_dataloader
