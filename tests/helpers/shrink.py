"""The tests' one config shrinker: a shipped config -> a tiny CPU run.

Tests never edit a shipped config; they shrink it, in one of two ways that
share the rules below (widths, crops, input sizes, loaders).

**Derived config files** for runs of the tools in subprocesses, as a user
runs them (``tests/test_e2e``, ``tests/test_tools``, ``tests/test_apis``,
``docs/inference/make_pictures.py``): :func:`write_derived` writes
``_base_ = '/abs/path/configs/...'`` and one line per top-level override,
so everything not overridden (model types, heads, losses, optimizer,
schedulers, evaluator, dataset classes, pipeline steps and their options) is
exactly what the shipped config resolves to.

* :func:`write_tiny_config` (:func:`tiny_seg_overrides`), a segmentation
  recipe: backbone ``arch`` -> ``dict(embed_dims=32, num_layers=L,
  num_heads=2, feedforward_channels=64)`` with ``L = 4`` for multi-level
  configs (``out_indices`` become ``(0, 1, 2, 3)``) and ``L = 2`` for
  single-level ones (probes keep ``out_indices=-1``); ``frozen_stages`` that
  froze every block freeze every tiny block; ``init_cfg=None`` (no weights
  needed). ``img_size`` is kept, so GAug's constants and the
  position-embedding resampling run as shipped. Neck / decode / auxiliary
  heads (:func:`tiny_head`): ``in_channels`` -> 32, ``out_channels`` -> 32,
  ``channels`` -> 16. Crops -> 64 x 64 (``data_preprocessor.size``,
  ``RandomCrop``); every ``scale`` of ``RandomResize`` / ``Resize`` and the
  slide-test ``stride`` are scaled by ``64 / shipped crop``. Data roots (the
  generated tiny data), batch size 2, ``num_workers=0``, no persistent
  workers; ``max_iters`` / ``val_interval`` / checkpoint interval =
  ``iters`` and a log line per iteration; the schedulers are left as
  shipped.
* :func:`write_tiny_ovd_config`, an F-ViT OV-COCO / OV-LVIS recipe: a
  4-layer, 32-d CLIP ViT (16-d joint space) at 64 px, 2 epochs.
* ``tests/test_e2e/tiny_cls.py`` and ``tiny_clip.py`` write their
  classification and LaSt-CLIP overrides through :func:`write_derived`.

**In place** on a parsed config, for the config and README tests that build
the model or hand the changes to a tool as ``--cfg-options``:
:func:`shrink_model` shrinks each tower the way :mod:`helpers.sources`
shrinks the source models (the tiny width, the real depth, patch and input
size, so a shrunk config loads a converted tiny checkpoint) and the
channels downstream of it; :func:`shrink_run` shrinks batches, iterations,
a segmentation recipe's crop (the same 64 px as above) and a detection
recipe's padded input.
"""
import os.path as osp
import pprint
from typing import List, Optional, Sequence

from helpers import sources
from helpers.fvit import EMBED
from mmengine.config import Config

__all__ = [
    'TINY_DIMS', 'TINY_HEAD_CHANNELS', 'TINY_CROP', 'TINY_DET', 'scaled',
    'shrink_step', 'tiny_backbone', 'tiny_head', 'write_derived',
    'tiny_seg_overrides', 'write_tiny_config', 'write_tiny_ovd_config',
    'shrink_model', 'shrink_run'
]

# The tower width of a derived config (the in-place shrink uses
# sources.TINY_WIDTH, the width of the tiny source checkpoints).
TINY_DIMS = 32
# The heads' inner widths (``channels`` of mmseg's decode heads and of the
# probe head) in a shrunk config: they only feed the heads.
TINY_HEAD_CHANNELS = 16
# The training crop of a shrunk segmentation recipe.
TINY_CROP = 64
# The padded input of a shrunk detection recipe (F-ViT's LSJ pads to 640 /
# 896 / 1024; a tiny tower's 8x8 patches are enough).
TINY_DET = 128
# The towers a config names weights for: model.backbone (mmseg, mmdet,
# mmpretrain) and model.image_encoder (mmlocat.CLIPContrastive).
TOWER_KEYS = ('backbone', 'image_encoder')
LOADERS = ('train_dataloader', 'val_dataloader', 'test_dataloader')
# Appended to the shipped F-ViT config: the model at tiny size.
TINY_MODEL = """
model = dict(
    data_preprocessor=dict(
        batch_augments=[dict(type='BatchFixedSizePad', size=(64, 64))]),
    backbone=dict(
        arch=dict(_delete_=True, embed_dims=32, num_layers=4, num_heads=2,
                  feedforward_channels=64, output_dims={embed}),
        img_size=64, out_indices=(0, 1, 2, 3), init_cfg=None),
    neck=[
        dict(type='mmlocat.PatchScoreNeck', in_channels=32,
             scales=(4, 2, 1, 0.5), modulate=False, pooling='gap',
             norm_cfg=dict(type='BN')),
        dict(type='FPN', in_channels=[32] * 4, out_channels=16, num_outs=5,
             norm_cfg=dict(type='BN')),
    ],
    rpn_head=dict(in_channels=16, feat_channels=16),
    roi_head=dict(
        bbox_roi_extractor=dict(out_channels=16),
        bbox_head=dict(in_channels=16, conv_out_channels=16,
                       fc_out_channels={embed}, norm_cfg=dict(type='BN'),
                       text_embeddings={emb!r}{head_extra}),
        vlm_roi_extractor=dict(out_channels={embed}){roi_extra}),
    train_cfg=dict(
        rpn_proposal=dict(nms_pre=200, max_per_img=100),
        rcnn=dict(sampler=dict(num=64))),
    test_cfg=dict(rpn=dict(nms_pre=200, max_per_img=50),
                  rcnn=dict(score_thr=0.0, max_per_img=20)))
"""
# ... and a 2-epoch run on the tiny data.
TINY_RUN = """
train_pipeline = [
    dict(type='LoadImageFromFile'),
    dict(type='LoadAnnotations', with_bbox=True, with_mask={mask}),
    dict(type='RandomResize', scale=(64, 64), ratio_range=(0.8, 1.2),
         keep_ratio=True),
    dict(type='RandomCrop', crop_type='absolute_range', crop_size=(64, 64),
         recompute_bbox=True, allow_negative_crop=True),
    dict(type='FilterAnnotations', min_gt_bbox_wh=(1e-2, 1e-2)),
    dict(type='RandomFlip', prob=0.5),
    dict(type='PackDetInputs')
]
test_pipeline = [
    dict(type='LoadImageFromFile'),
    dict(type='Resize', scale=(64, 64), keep_ratio=True),
    dict(type='LoadAnnotations', with_bbox=True, with_mask={mask}),
    dict(type='PackDetInputs', meta_keys=('img_id', 'img_path', 'ori_shape',
                                          'img_shape', 'scale_factor'))
]
train_dataloader = dict(
    batch_size=2, num_workers=0, persistent_workers=False,
    dataset=dict(data_root={root!r}, pipeline=train_pipeline{train_meta}))
val_dataloader = dict(
    batch_size=2, num_workers=0, persistent_workers=False,
    dataset=dict(data_root={root!r}, pipeline=test_pipeline{val_meta}))
test_dataloader = val_dataloader
val_evaluator = dict(ann_file={val_ann!r})
test_evaluator = val_evaluator
train_cfg = dict(max_epochs=2, val_interval=100)
param_scheduler = [dict(type='ConstantLR', factor=1.0, by_epoch=False)]
optim_wrapper = dict(
    _delete_=True, type='OptimWrapper',
    optimizer=dict(type='AdamW', lr=1e-4, weight_decay=0.1),
    clip_grad=dict(max_norm=1.0))
default_hooks = dict(logger=dict(interval=1),
                     checkpoint=dict(interval=2, max_keep_ckpts=1))
"""


# ------------------------------------------------------------------ rules
def scaled(value, factor: float, seq_type: Optional[type] = None):
    """``value`` (an int or a sequence of ints) times ``factor``, each at
    least 1; a sequence keeps its type unless ``seq_type`` is given."""
    if isinstance(value, (list, tuple)):
        return (seq_type or type(value))(
            max(1, round(v * factor)) for v in value)
    return max(1, round(value * factor))


def shrink_step(step: dict,
                factor: float,
                crop: Optional[tuple] = None,
                seq_type: Optional[type] = None) -> None:
    """Shrink a pipeline step in place: ``Resize`` / ``RandomResize`` scales
    by ``factor``; a ``RandomCrop`` to ``crop`` (``None``: scaled too)."""
    if step['type'] in ('RandomResize', 'Resize') and 'scale' in step:
        step['scale'] = scaled(step['scale'], factor, seq_type)
    if step['type'] == 'RandomCrop':
        step['crop_size'] = crop or scaled(step['crop_size'], factor)


def tiny_backbone(backbone: dict, num_layers: Optional[int] = None) -> dict:
    """The changes that make a segmentation backbone a 32-d ViT of
    ``num_layers`` blocks (default 4 for multi-level outputs, else 2): the
    ``arch``, ``init_cfg=None``, ``out_indices`` of every tiny level and
    ``frozen_stages`` that freeze every tiny block where the shipped ones
    froze all 12."""
    indices = backbone.get('out_indices', -1)
    multi = isinstance(indices, (list, tuple)) and len(indices) > 1
    num_layers = num_layers or (4 if multi else 2)
    out = dict(
        arch=dict(
            embed_dims=TINY_DIMS,
            num_layers=num_layers,
            num_heads=2,
            feedforward_channels=2 * TINY_DIMS),
        init_cfg=None)
    if multi:
        out['out_indices'] = tuple(range(len(indices)))
    if backbone.get('frozen_stages', -1) >= 12:
        out['frozen_stages'] = num_layers
    return out


def tiny_head(head: dict) -> dict:
    """The width changes of a neck or head behind a :data:`TINY_DIMS`
    backbone."""
    out = {}
    if 'in_channels' in head:
        channels = head['in_channels']
        out['in_channels'] = ([TINY_DIMS] * len(channels) if isinstance(
            channels, (list, tuple)) else TINY_DIMS)
    if 'out_channels' in head:
        out['out_channels'] = TINY_DIMS
    if 'channels' in head:
        out['channels'] = TINY_HEAD_CHANNELS
    return out


# --------------------------------------------------------- derived configs
def write_derived(path: str,
                  base: str,
                  overrides: dict,
                  lines: Sequence[str] = ()) -> str:
    """Write ``_base_ = base``, then ``lines``, then one line per override
    to ``path``; returns ``path``."""
    lines = [f'_base_ = {base!r}', *lines]
    for key, value in overrides.items():
        lines.append(f'{key} = {pprint.pformat(value, width=72)}')
    with open(path, 'w', encoding='utf-8') as f:
        f.write('\n'.join(lines) + '\n')
    return path


def tiny_seg_overrides(cfg: dict,
                       data_root: str,
                       iters: int = 2,
                       batch_size: int = 2) -> dict:
    """The override dict that shrinks a shipped segmentation config (a
    plain dict), as the module doc says."""
    model = cfg['model']
    backbone = tiny_backbone(model['backbone'])
    # the shipped arch is an alias string
    backbone['arch'] = dict(_delete_=True, **backbone['arch'])
    crop = tuple(cfg['crop_size'])
    factor = TINY_CROP / crop[0]
    tiny_model = dict(
        data_preprocessor=dict(size=(TINY_CROP, TINY_CROP)), backbone=backbone)
    for key in ('neck', 'decode_head', 'auxiliary_head'):
        if model.get(key):
            tiny_model[key] = tiny_head(model[key])
    test_cfg = model.get('test_cfg') or {}
    if test_cfg.get('mode') == 'slide':
        tiny_model['test_cfg'] = dict(
            crop_size=(TINY_CROP, TINY_CROP),
            stride=scaled(test_cfg['stride'], factor, tuple))

    def loader(name: str, bs: int) -> dict:
        steps = [dict(s) for s in cfg[name]['dataset']['pipeline']]
        for step in steps:
            shrink_step(step, factor, (TINY_CROP, TINY_CROP), tuple)
        return dict(
            batch_size=bs,
            num_workers=0,
            persistent_workers=False,
            dataset=dict(data_root=data_root, pipeline=steps))

    return dict(
        crop_size=(TINY_CROP, TINY_CROP),
        model=tiny_model,
        train_dataloader=loader('train_dataloader', batch_size),
        val_dataloader=loader('val_dataloader', 1),
        test_dataloader=loader('test_dataloader', 1),
        train_cfg=dict(max_iters=iters, val_interval=iters),
        default_hooks=dict(
            logger=dict(interval=1),
            checkpoint=dict(interval=iters, max_keep_ckpts=2)),
        randomness=dict(seed=0))


def _merge(dst: dict, src: dict) -> None:
    """Merge ``src`` into ``dst`` in place, dicts recursively."""
    for key, value in src.items():
        if isinstance(value, dict) and isinstance(dst.get(key), dict):
            _merge(dst[key], value)
        else:
            dst[key] = value


def write_tiny_config(shipped: str,
                      path: str,
                      data_root: str,
                      iters: int = 2,
                      batch_size: int = 2,
                      extra: Optional[dict] = None) -> str:
    """Write the derived tiny config of the shipped segmentation config
    ``shipped`` to ``path``.

    Args:
        shipped: Path of the shipped config (made absolute).
        path: Where to write the derived config.
        data_root: Root of the generated tiny dataset.
        iters: Training iterations (also the val and checkpoint interval).
        batch_size: Training batch size per process.
        extra: More top-level overrides, merged last (e.g. a test mode).

    Returns:
        ``path``.
    """
    shipped = osp.abspath(shipped)
    overrides = tiny_seg_overrides(
        Config.fromfile(shipped).to_dict(),
        data_root,
        iters=iters,
        batch_size=batch_size)
    _merge(overrides, extra or {})
    return write_derived(path, shipped, overrides, [''])


def write_tiny_ovd_config(path,
                          base: str,
                          root: str,
                          emb: str,
                          val_ann: str,
                          mask: bool = False,
                          head_extra: str = '',
                          roi_extra: str = '',
                          train_meta: str = '',
                          val_meta: str = '') -> str:
    """Write the tiny derived config of the shipped F-ViT config ``base``
    to ``path`` (a :class:`pathlib.Path`): data under ``root``, text
    embeddings ``emb`` (:data:`helpers.fvit.EMBED` wide), validation
    annotations ``val_ann``; ``mask`` loads masks; the ``*_extra`` /
    ``*_meta`` texts are appended to the bbox head, the RoI head and the
    train / val datasets (each starts with ``', '``). Returns the path as
    a string."""
    path.write_text(f'_base_ = [{base!r}]\n' + TINY_MODEL.format(
        embed=EMBED, emb=emb, head_extra=head_extra, roi_extra=roi_extra) +
                    TINY_RUN.format(
                        root=root,
                        mask=mask,
                        val_ann=val_ann,
                        train_meta=train_meta,
                        val_meta=val_meta))
    return str(path)


# ---------------------------------------------------------------- in place
def _real_arch(tower: dict) -> dict:
    from mmlocat.registry import MODELS
    cls = MODELS.get(tower['type'])
    if cls is None:
        raise KeyError(f'{tower["type"]} is not registered')
    arch = tower.get('arch', 'base')
    if isinstance(arch, str):
        return dict(cls.arch_zoo[arch.lower()])
    return dict(arch)


def _shrink_widths(node, width: int) -> None:
    """Channels that carry the tower's width become the tiny width; the
    heads' inner ``channels`` become :data:`TINY_HEAD_CHANNELS`."""
    if isinstance(node, (list, tuple)):
        for value in node:
            _shrink_widths(value, width)
        return
    if not isinstance(node, dict):
        return
    for key, value in node.items():
        if key in ('in_channels', 'out_channels'):
            if value == width:
                node[key] = sources.TINY_WIDTH
            elif isinstance(value, (list, tuple)):
                node[key] = [
                    sources.TINY_WIDTH if v == width else v for v in value
                ]
        elif key == 'channels' and isinstance(value, int):
            node[key] = TINY_HEAD_CHANNELS
        else:
            _shrink_widths(value, width)


def shrink_model(cfg: Config) -> None:
    """Shrink ``cfg.model`` in place the way :mod:`helpers.sources`
    shrinks the source models: each tower's ``arch`` at the tiny width
    (everything else of the tower as shipped), the channels downstream of it
    likewise, an open_clip text tower by its tiny config."""
    model = cfg.model
    for key in TOWER_KEYS:
        tower = model.get(key)
        if not isinstance(tower, dict):
            continue
        real = _real_arch(tower)
        tower['arch'] = sources.tiny_arch(real)
        rest = {k: v for k, v in model.items() if k not in TOWER_KEYS}
        _shrink_widths(rest, real['embed_dims'])
    text = model.get('text_encoder')
    if isinstance(text, dict) and text.get('model_name'):
        text['model_cfg'] = sources.tiny_open_clip_config(
            text.pop('model_name'))


def _walk_datasets(node) -> None:
    """Dataset wrappers included: tiny sets cannot have the real size."""
    if isinstance(node, dict):
        if 'expected_num_images' in node:
            node['expected_num_images'] = None
        for key in ('dataset', 'datasets'):
            _walk_datasets(node.get(key))
    elif isinstance(node, (list, tuple)):
        for value in node:
            _walk_datasets(value)


def _shrink_crops(cfg: Config) -> None:
    """A segmentation recipe's training crop becomes :data:`TINY_CROP`
    (its ``data_preprocessor.size``, ``RandomCrop``), every ``Resize`` /
    ``RandomResize`` scale and a slide test's window and stride shrink
    alike."""
    crop = cfg.get('crop_size')
    if not crop:
        return
    factor = TINY_CROP / crop[0]
    cfg['crop_size'] = (TINY_CROP, TINY_CROP)
    model = cfg.model
    if (model.get('data_preprocessor') or {}).get('size'):
        model.data_preprocessor['size'] = (TINY_CROP, TINY_CROP)
    test_cfg = model.get('test_cfg') or {}
    if test_cfg.get('mode') == 'slide':
        test_cfg['crop_size'] = scaled(test_cfg['crop_size'], factor)
        test_cfg['stride'] = scaled(test_cfg['stride'], factor)
    for step in _pipeline_steps(cfg):
        shrink_step(step, factor, (TINY_CROP, TINY_CROP))


def _pipeline_steps(cfg: Config) -> List[dict]:
    """The transforms of every loader's dataset (through wrappers)."""
    steps = []
    for name in LOADERS:
        dataset = (cfg.get(name) or {}).get('dataset') or {}
        while isinstance(dataset, dict):
            steps += dataset.get('pipeline') or []
            dataset = dataset.get('dataset')
    return steps


def _shrink_det_inputs(cfg: Config) -> None:
    """A detection recipe that pads batches to a fixed size
    (``BatchFixedSizePad``) pads to :data:`TINY_DET`; its ``RandomCrop``
    and every ``Resize`` / ``RandomResize`` scale shrink alike."""
    preprocessor = cfg.model.get('data_preprocessor') or {}
    pads = [
        a for a in preprocessor.get('batch_augments') or []
        if a.get('type') == 'BatchFixedSizePad'
    ]
    if not pads:
        return
    factor = TINY_DET / max(pads[0]['size'])
    for pad in pads:
        pad['size'] = scaled(pad['size'], factor)
    for step in _pipeline_steps(cfg):
        shrink_step(step, factor)


def shrink_run(cfg: Config, iters: int = 2) -> None:
    """Shrink what a tool runs of ``cfg`` in place (:func:`shrink_model`
    does the model): batches of at most 2 images read in the main process,
    ``iters`` training iterations (one epoch of an epoch-based recipe) with
    a checkpoint and a validation at the end, a segmentation recipe's crop
    of :data:`TINY_CROP` (:func:`_shrink_crops`), a detection recipe's input
    of :data:`TINY_DET` (:func:`_shrink_det_inputs`), no dataset-size
    check, and a float32 optimizer wrapper where the recipe asks for AMP
    without an accelerator (mmengine's AMP needs one)."""
    import torch
    _shrink_crops(cfg)
    _shrink_det_inputs(cfg)
    for name in LOADERS:
        loader = cfg.get(name)
        if not isinstance(loader, dict):
            continue
        loader['batch_size'] = min(loader.get('batch_size', 1), 2)
        loader['num_workers'] = 0
        loader['persistent_workers'] = False
        _walk_datasets(loader.get('dataset'))
    train_cfg = cfg.get('train_cfg')
    if isinstance(train_cfg, dict) and cfg.get('train_dataloader'):
        if 'max_iters' in train_cfg:
            train_cfg.update(max_iters=iters, val_interval=iters)
        elif 'max_epochs' in train_cfg:
            train_cfg.update(max_epochs=1, val_interval=1)
        checkpoint = cfg.get('default_hooks', {}).get('checkpoint')
        if isinstance(checkpoint, dict) and 'max_iters' in train_cfg:
            checkpoint['interval'] = iters
    wrapper = cfg.get('optim_wrapper')
    if (isinstance(wrapper, dict) and wrapper.get('type') == 'AmpOptimWrapper'
            and not torch.cuda.is_available()):
        wrapper['type'] = 'OptimWrapper'
        for key in ('loss_scale', 'dtype'):
            wrapper.pop(key, None)
