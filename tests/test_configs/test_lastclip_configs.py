"""configs/last/clip_*: LaSt-CLIP fine-tuning recipes and their CLS twins."""
import os.path as osp

import pytest
import torch
from mmengine.config import Config
from mmengine.registry import init_default_scope

import mmlocat  # noqa: F401
from mmlocat.registry import MODELS

# LaSt config -> (image tower, text model, OV configs fed by its checkpoint)
RECIPES = {
    'clip_last-b16_8xb64_coco-caption':
    ('mmlocat.CLIPViT', 'ViT-B-16-quickgelu', 'fvit_last-b16'),
    'clip_last-l14_8xb64_coco-caption':
    ('mmlocat.CLIPViT', 'ViT-L-14-quickgelu', 'fvit_last-l14'),
    'clip_last-eva02-b16_8xb64_coco-caption':
    ('mmlocat.EVA02CLIPViT', 'EVA02-B-16', 'fvit_last-eva02-clip-b16'),
    'clip_last-eva02-l14-336_8xb64_coco-caption':
    ('mmlocat.EVA02CLIPViT', 'EVA02-L-14-336', 'fvit_last-eva02-clip-l14-336'),
}


def _cfg(repo_root, name):
    return Config.fromfile(osp.join(repo_root, 'configs/last', name + '.py'))


@pytest.mark.parametrize('name', sorted(RECIPES))
def test_recipe_and_cls_twin(repo_root, name):
    tower, text, _ = RECIPES[name]
    cfg = _cfg(repo_root, name)
    enc = cfg.model.image_encoder
    assert enc.type == tower and enc.pooling == 'lazy_strike'
    # the paper's CLIP ablation: K = N/2 patches per channel
    assert enc.topk is None and enc.topk_ratio == 0.5
    assert enc.init_cfg.type == 'Pretrained'
    assert cfg.model.text_encoder.model_name == text
    assert cfg.model.lock_text is True
    assert cfg.model.loss.gather_with_grad is True
    # open_clip's AdamW defaults for ViTs, no decay on gains / biases / scale
    opt = cfg.optim_wrapper.optimizer
    assert (opt.betas, opt.eps, opt.weight_decay) == ((0.9, 0.98), 1e-6, 0.2)
    assert cfg.optim_wrapper.paramwise_cfg.custom_keys.logit_scale == dict(
        decay_mult=0.0)
    size = enc.get('img_size')
    crop = cfg.train_dataloader.dataset.pipeline[1]
    assert crop.type == 'RandomResizedCrop' and crop.scale == size
    assert cfg.test_dataloader.dataset.pipeline[2].crop_size == size
    twin = _cfg(repo_root, name.replace('clip_last-', 'clip_cls-'))
    assert twin.model.image_encoder.pooling == 'cls'
    twin.model.image_encoder.pooling = 'lazy_strike'
    assert twin.to_dict() == cfg.to_dict()  # same recipe otherwise


@pytest.mark.parametrize('name', sorted(RECIPES))
def test_builds_with_matching_widths(repo_root, name):
    cfg = _cfg(repo_root, name)
    init_default_scope('mmpretrain')
    with torch.device('meta'):  # real sizes, no memory, no weights read
        model = MODELS.build(cfg.model)
    assert model.image_encoder.output_dims == model.text_encoder.embed_dim
    assert all(not p.requires_grad for p in model.text_encoder.parameters())


def test_readme_makes_every_checkpoint_the_ov_configs_name(repo_root):
    with open(osp.join(repo_root, 'configs/last/README.md')) as f:
        readme = f.read()
    for name, (_, _, ov) in RECIPES.items():
        for task in ('ov-coco', 'ov-lvis'):
            ov_cfg = Config.fromfile(
                osp.join(repo_root, 'configs/ovd', f'{ov}_{task}.py'))
            target = ov_cfg.model.backbone.init_cfg.checkpoint
            line = (f'python tools/model_converters/lastclip2mmlocat.py '
                    f'work_dirs/{name}/epoch_10.pth {target}')
            assert line in readme, line
