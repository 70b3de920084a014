# Point-in-Box of LaSt-ViT-B/16 with the rule of the public evaluation
# script (ChengShiest/LAST-ViT visualization/evaluate_patch_hit.py), for
# numbers comparable with the paper's (see README.md, "PiB protocols"):
# pib_vit-b_in1k_public.py with pooling='lazy_strike', its patch scores
# against the CLS output (score_query='cls'), as the script's DenseViT does
# for every checkpoint. Test only:
#   python tools/test.py configs/last/pib_last-b_in1k_public.py CHECKPOINT
_base_ = ['./pib_vit-b_in1k_public.py']

model = dict(backbone=dict(pooling='lazy_strike', topk=1, score_query='cls'))
