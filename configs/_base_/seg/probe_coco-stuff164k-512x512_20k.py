_base_ = [
    './probe_model.py', './probe_schedule_20k.py',
    'mmseg::_base_/datasets/coco-stuff164k.py',
    'mmseg::_base_/default_runtime.py', '../mmlocat_runtime.py'
]
# mmseg's visualizer with a legend (tools/test.py --show-dir, tools/infer.py)
visualizer = dict(type='mmlocat.SegLegendVisualizer')
crop_size = (512, 512)
model = dict(
    data_preprocessor=dict(size=crop_size), decode_head=dict(num_classes=171))
# 8 GPUs x 4 images
train_dataloader = dict(batch_size=4)
val_dataloader = dict(batch_size=1)
test_dataloader = val_dataloader
