# mmlocat's earlier zero-shot protocol on this dataset (an option; the
# default is SCLIP's, ./zeroshot_pascal-context-59.py): one name per class, the
# dataset's own class names, logit scale 100 (CLIP's). The same resolution
# as SCLIP's. Needs embeddings written from a config that uses it.
_base_ = ['./zeroshot_pascal-context-59.py']
zero_shot_dataset = dict(_delete_=True, class_name_file=None, logit_scale=100.)
