# Point-in-Box of the plain ViT-B/16 baseline with the rule of the public
# evaluation script (ChengShiest/LAST-ViT
# visualization/evaluate_patch_hit.py), for numbers comparable with the
# paper's (see README.md, "PiB protocols"):
# * patch scores against the CLS output, as the script's DenseViT does for
#   every checkpoint (pib_last-b_in1k_public.py: LaStViT score_query='cls');
# * the 25% filter and the box mapping on the raw XML integers
#   (one_based=False); the metric maps the kept original boxes itself:
#   one scale factor, floored centre-crop offset, cells a box only touches
#   count, boxes cropped off at the left / top hit row / column 0.
# The image itself is preprocessed as torchvision's Resize(256) +
# CenterCrop(224). Test only:
#   python tools/test.py configs/last/pib_vit-b_in1k_public.py CHECKPOINT
_base_ = ['./pib_vit-b_in1k.py']

# The base pipeline edited in place: original boxes kept, plain ResizeEdge.
test_pipeline = _base_.test_pipeline
test_pipeline[1].type = 'ResizeEdge'
test_pipeline[3].algorithm_keys = ('ori_gt_bboxes', )
test_pipeline.insert(1, dict(type='mmlocat.KeepOriginalBoxes'))
test_dataloader = dict(dataset=dict(one_based=False, pipeline=test_pipeline))
test_evaluator = [
    dict(
        type='mmlocat.PointInBox',
        patch_size=16,
        protocol='public',
        resize=256,
        crop_size=224)
]
