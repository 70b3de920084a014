# mmlocat's earlier zero-shot protocol on COCO-Stuff-164k (an option; the
# default is SCLIP's, ./zeroshot_coco-stuff164k.py): one name per class, the
# dataset's own class names, logit scale 100 (CLIP's), short side 336
# (SCLIP: 448). Needs embeddings written from a config that uses it.
_base_ = ['./zeroshot_coco-stuff164k.py']
test_pipeline = _base_.test_pipeline
test_pipeline[1] = dict(test_pipeline[1], scale=(2048, 336))  # the Resize
test_dataloader = dict(dataset=dict(pipeline=test_pipeline))
zero_shot_dataset = dict(_delete_=True, class_name_file=None, logit_scale=100.)
