# Training-free zero-shot semantic segmentation (LaSt-ViT paper, Tab. 4)
# with a frozen OpenAI CLIP ViT-B/16, mmlocat's protocol (the paper states
# none; configs/last/README.md lists what is the paper's and what is ours):
# the last block's patch tokens after ln_post and the projection, cosine
# with the class text embeddings (CLIP's 80 ImageNet templates), x100, slide
# inference with the tower's pre-training window (224, stride 112), logits
# averaged over windows, upsampled to the image, argmax. A leaf adds one
# dataset base and the embedding file; the LaSt twin only the checkpoint.
_base_ = ['mmseg::_base_/default_runtime.py']

custom_imports = dict(imports=['mmlocat'], allow_failed_imports=False)
model = dict(
    type='mmlocat.ZeroShotSegmentor',
    data_preprocessor=dict(
        type='SegDataPreProcessor',
        # OpenAI CLIP's normalisation (RGB, 0-255 scale)
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
    feature_tap='last',  # 'value': MaskCLIP's value path (an option)
    logit_scale=100.,
    test_cfg=dict(mode='slide', crop_size=(224, 224), stride=(112, 112)))
# Compares the embedding file's classes with the test dataset's.
custom_hooks = [dict(type='mmlocat.ZeroShotClassCheckHook')]
test_cfg = dict(type='TestLoop')
