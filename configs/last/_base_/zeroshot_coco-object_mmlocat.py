# mmlocat's earlier zero-shot protocol on COCO-Object (an option; the default
# is SCLIP's, ./zeroshot_coco-object.py): maps drawn from the instance
# annotations (tools/dataset_converters/coco_object.py --source instances:
# crowd regions 255, ignored), the 80 thing names without a background text
# class, logit scale 100 (CLIP's), and a constant background channel:
# background where no class reaches probability 0.5 (bg_thresh). Needs
# embeddings written from a config that uses it.
_base_ = ['./zeroshot_coco-object.py']
test_dataloader = dict(
    dataset=dict(
        data_root='data/coco',
        data_prefix=dict(
            img_path='val2017', seg_map_path='coco_object/val2017')))
zero_shot_dataset = dict(
    _delete_=True, class_name_file=None, logit_scale=100., bg_thresh=0.5)
