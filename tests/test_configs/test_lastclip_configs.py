"""configs/last/clip_*: LaSt-CLIP fine-tuning recipes and their CLS twins,
checked against open_clip's fine-tuning (open_clip_train)."""
import math
import os.path as osp

import pytest
import torch
from checkpoint_makers import load_config
from mmengine.config import Config
from mmengine.registry import init_default_scope

import mmlocat  # noqa: F401
from mmlocat.registry import MODELS

# LaSt config -> (image tower, text model, the F-ViT configs fed by its
# checkpoint; None: no OV config reads it)
RECIPES = {
    'clip_last-b16_8xb64_cc3m':
    ('mmlocat.CLIPViT', 'ViT-B-16-quickgelu', 'fvit_last-b16'),
    'clip_last-l14_8xb64_cc3m':
    ('mmlocat.CLIPViT', 'ViT-L-14-quickgelu', 'fvit_last-l14'),
    'clip_last-eva02-b16_8xb64_cc3m': ('mmlocat.EVA02CLIPViT', 'EVA02-B-16',
                                       'fvit_last-eva02-clip-b16'),
    'clip_last-eva02-l14-336_8xb64_cc3m':
    ('mmlocat.EVA02CLIPViT', 'EVA02-L-14-336', 'fvit_last-eva02-clip-l14-336'),
    'clip_last-b16_8xb64_coco-caption-no-lvis-val':
    ('mmlocat.CLIPViT', 'ViT-B-16-quickgelu', None),
}
LARGE = ('l14', 'eva02-l14-336')


def _cfg(repo_root, name):
    return load_config(osp.join(repo_root, 'configs/last', name + '.py'))


@pytest.mark.parametrize('name', sorted(RECIPES))
def test_recipe_and_cls_twin(repo_root, name):
    tower, text, _ = RECIPES[name]
    cfg = _cfg(repo_root, name)
    enc = cfg.model.image_encoder
    assert enc.type == tower and enc.pooling == 'lazy_strike'
    # the paper's CLIP ablation: K = N/2 patches per channel
    assert enc.topk is None and enc.topk_ratio == 0.5
    assert enc.init_cfg.type == 'Pretrained'
    # the large towers checkpoint their blocks
    large = any(f'-{t}_' in name for t in LARGE)
    assert enc.get('with_cp', False) is large
    assert cfg.model.text_encoder.model_name == text
    assert cfg.model.lock_text is True
    # open_clip's fine-tuning: the pretrained scale, clamped after the step
    assert cfg.model.init_logit_scale == 'pretrained'
    assert cfg.model.max_logit_scale == 100.
    # the CLIP records are written by the runtime's mmlocat.RecordHook
    assert [h.type
            for h in cfg.custom_hooks] == ['mmlocat.LogitScaleClampHook']
    assert cfg.model.loss.gather_with_grad is True
    # open_clip's AdamW defaults for ViTs, no decay on gains / biases / scale
    opt = cfg.optim_wrapper.optimizer
    assert (opt.betas, opt.eps, opt.weight_decay) == ((0.9, 0.98), 1e-6, 0.2)
    assert cfg.optim_wrapper.type == 'AmpOptimWrapper'
    assert cfg.optim_wrapper.paramwise_cfg.custom_keys.logit_scale == dict(
        decay_mult=0.0)
    size = enc.get('img_size')
    crop = [
        s for s in cfg.train_dataloader.dataset.pipeline
        if s.type == 'RandomResizedCrop'
    ]
    assert crop[0].scale == size and crop[0].crop_ratio_range == (0.9, 1.0)
    assert cfg.test_dataloader.dataset.pipeline[2].crop_size == size
    # ImageNet zero-shot: open_clip's class names
    assert cfg.test_evaluator.class_names == 'imagenet_open_clip'
    # ... with the recipe and the CLIP of its embeddings checked at build
    assert (cfg.test_evaluator.templates,
            cfg.test_evaluator.prompt_style) == ('imagenet80', 'plain')
    assert cfg.test_evaluator.clip_checkpoint == enc.init_cfg.checkpoint
    twin = _cfg(repo_root, name.replace('clip_last-', 'clip_cls-'))
    assert twin.model.image_encoder.pooling == 'cls'
    twin.model.image_encoder.pooling = 'lazy_strike'
    assert twin.to_dict() == cfg.to_dict()  # same recipe otherwise


@pytest.mark.parametrize('name', sorted(RECIPES))
def test_data_is_disjoint_from_the_evaluation_images(repo_root, name):
    data = _cfg(repo_root, name).train_dataloader.dataset
    if 'coco-caption' in name:
        # LVIS v1 val is drawn from COCO train2017: those images are left out
        assert data.type == 'mmlocat.CocoCaptionDataset'
        assert data.ann_file == 'annotations/captions_train2017.json'
        assert data.exclude_ids.endswith('lvis_v1_val.json')
        assert data.pipeline[0].type == 'LoadImageFromFile'
    else:
        assert data.type == 'mmlocat.WebDatasetCaptionDataset'
        assert data.data_root == 'data/cc3m'
        assert all(s.type != 'LoadImageFromFile' for s in data.pipeline)


def test_lr_is_open_clips_cosine_per_iteration(repo_root):
    """mmengine's schedulers of the recipe give open_clip_train's
    ``cosine_lr(optimizer, lr, warmup, steps)`` at every iteration."""
    from mmengine.registry import PARAM_SCHEDULERS
    from open_clip_train.scheduler import cosine_lr
    cfg = _cfg(repo_root, 'clip_last-b16_8xb64_cc3m')
    base_lr = cfg.optim_wrapper.optimizer.lr
    steps, warmup = cfg.train_cfg.max_iters, cfg.warmup_iters
    assert cfg.train_cfg.by_epoch is False
    ours = torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=base_lr)
    schedulers = [
        PARAM_SCHEDULERS.build(dict(s, optimizer=ours))
        for s in cfg.param_scheduler
    ]
    reference = torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))],
                                lr=base_lr)
    adjust = cosine_lr(reference, base_lr, warmup, steps)
    for step in range(steps):
        expected = adjust(step)
        got = ours.param_groups[0]['lr']
        assert math.isclose(got, expected, rel_tol=1e-9, abs_tol=1e-18), \
            (step, got, expected)
        for scheduler in schedulers:
            scheduler.step()


@pytest.mark.parametrize('name', sorted(RECIPES))
def test_builds_with_matching_widths(repo_root, name):
    cfg = _cfg(repo_root, name)
    init_default_scope('mmpretrain')
    with torch.device('meta'):  # real sizes, no memory, no weights read
        model = MODELS.build(cfg.model)
    assert model.image_encoder.output_dims == model.text_encoder.embed_dim
    assert all(not p.requires_grad for p in model.text_encoder.parameters())
    assert model.image_encoder.with_cp is bool(
        cfg.model.image_encoder.get('with_cp'))


def test_readme_makes_every_checkpoint_the_ov_configs_name(repo_root):
    """One command per recipe and twin (a loop's expansion) writes the
    checkpoint its F-ViT configs load (and the zero-shot configs of the same
    tower)."""
    from helpers.readme_loops import expanded_commands
    with open(osp.join(repo_root, 'configs/last/README.md')) as f:
        commands = expanded_commands(f.read())
    for name, (_, _, ov) in RECIPES.items():
        if ov is None:
            continue
        cfg = _cfg(repo_root, name)
        last_iter = cfg.train_cfg.max_iters
        for pooling in ('last', 'cls'):
            run = name.replace('clip_last-', f'clip_{pooling}-')
            for task in ('ov-coco', 'ov-lvis'):
                ov_cfg = load_config(
                    osp.join(
                        repo_root, 'configs/ovd',
                        f'{ov.replace("_last-", f"_{pooling}-")}_'
                        f'{task}.py'))
                target = ov_cfg.model.backbone.init_cfg.checkpoint
                line = (f'python tools/model_converters/lastclip2mmlocat.py '
                        f'work_dirs/{run}/iter_{last_iter}.pth {target}')
                assert line in commands, line


def test_readme_tsv_snippet_reads_a_tsv(repo_root, tmp_path):
    """The README's TSV override of the shipped recipe (open_clip's
    ``filepath`` / ``title`` columns) reads a generated TSV."""
    import re

    from mmlocat.registry import DATASETS
    from mmlocat.testing import generate
    with open(osp.join(repo_root, 'configs/last/README.md')) as f:
        readme = f.read()
    section = readme[readme.index('A CC3M-style TSV'):]
    snippet = re.search(r'```python\n(.*?)```', section, re.S).group(1)
    assert "type='mmlocat.TsvCaptionDataset'" in snippet
    paths = generate('captions', str(tmp_path / 'cap'), 4, 2, (32, 32))
    root = paths['data_root']
    with open(osp.join(root, paths['train_tsv'])) as f:
        body = f.read()
    with open(osp.join(root, 'cc3m_train.tsv'), 'w') as f:
        f.write('filepath\ttitle\n' + body)
    shipped = osp.join(repo_root, 'configs/last/clip_last-b16_8xb64_cc3m.py')
    config = tmp_path / 'tsv.py'
    config.write_text(f'_base_ = {shipped!r}\n{snippet}')
    cfg = Config.fromfile(str(config))
    cfg.train_dataloader.dataset.data_root = root
    init_default_scope('mmpretrain')
    data = DATASETS.build(cfg.train_dataloader.dataset)
    assert len(data) == 8  # 4 images x 2 captions
    item = data[0]
    assert item['inputs'].shape == (3, 224, 224)
    assert item['data_samples'].text_tokens.shape == (77, )
