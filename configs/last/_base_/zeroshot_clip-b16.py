# Training-free zero-shot semantic segmentation (LaSt-ViT paper, Tab. 4)
# with a frozen OpenAI CLIP ViT-B/16, evaluated as SCLIP's evaluator does
# (github wangf3014/SCLIP, clip_segmentor.py with CSA off = vanilla CLIP;
# configs/last/README.md lists each value with SCLIP's file:line and
# mmlocat's earlier choices): the last block's patch tokens after ln_post and
# the projection, cosine with the text embedding of every query name (80
# CLIP ImageNet templates, plain prompts), 224 windows at stride 112, cosines
# averaged over windows and resized to the image, x logit scale, softmax over
# all names, max over a class's names, argmax. A leaf adds one dataset base
# (it brings the class-name file and per-dataset scale / threshold as
# `zero_shot_dataset`) and the embedding file; the LaSt twin its own
# checkpoint and embedding file.
_base_ = [
    'mmseg::_base_/default_runtime.py', '../../_base_/mmlocat_runtime.py'
]

custom_imports = dict(imports=['mmlocat'], allow_failed_imports=False)
# mmseg's visualizer with a legend (tools/test.py --show-dir, tools/infer.py)
visualizer = dict(type='mmlocat.SegLegendVisualizer')
model = dict(
    type='mmlocat.ZeroShotSegmentor',
    data_preprocessor=dict(
        type='SegDataPreProcessor',
        # OpenAI CLIP's normalisation (RGB, 0-255 scale), clip_segmentor.py:22
        mean=[122.771, 116.746, 104.094],
        std=[68.501, 66.632, 70.323],
        bgr_to_rgb=True),
    backbone=dict(
        type='mmlocat.CLIPViT',
        arch='b',
        patch_size=16,
        img_size=224,
        act='quick_gelu',
        # clip2mmlocat.py writes the tower under 'backbone.'; tools/test.py
        # loads the same file as its checkpoint argument.
        init_cfg=dict(
            type='Pretrained',
            checkpoint='checkpoints/clip-vit-b16_mmlocat.pth',
            prefix='backbone.')),
    text_embeddings=None,  # set by each leaf
    # the embedding file's prompt recipe, checked at build
    templates='imagenet80',
    prompt_style='plain',
    feature_tap='last',  # 'value': MaskCLIP's value path (an option)
    logit_scale=40.,  # clip_segmentor.py:20 (a dataset may change it)
    test_cfg=dict(mode='slide', crop_size=(224, 224), stride=(112, 112)))
# Compares the embedding file's classes with the test dataset's.
custom_hooks = [dict(type='mmlocat.ZeroShotClassCheckHook')]
test_cfg = dict(type='TestLoop')
