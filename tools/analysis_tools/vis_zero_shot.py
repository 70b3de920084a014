"""Draw a zero-shot segmentation: image | ground truth | prediction | patch
score, side by side in one PNG.

The model is a zero-shot segmentation config (``configs/last/zeroshot_*``,
``mmlocat.ZeroShotSegmentor``); the patch score is the tower's own
(``forward_with_scores``: cosine of each final-norm patch token with the
global token, "Vision Transformers Need More Than Registers",
https://arxiv.org/abs/2602.22394), on the network input of the config's
test pipeline. ``--gt`` reads a label map with the config dataset's rules
(``reduce_zero_label``, class subsets); without it the panel is left out::

    python tools/analysis_tools/vis_zero_shot.py \
        configs/last/zeroshot_last-clip-b16_voc20.py CHECKPOINT IMG.jpg \
        --gt GT.png --out vis.png
"""
import argparse
import inspect
import os
import os.path as osp
from typing import List, Optional

import mmcv
import torch
from mmengine.config import Config
from mmengine.dataset import Compose, pseudo_collate
from mmengine.registry import init_default_scope

import mmlocat  # noqa: F401  (registry node)
from mmlocat.apis.cli import add_model_options
from mmlocat.utils.checkpoint_io import run_cli
from mmlocat.utils.pretrained import load_model_weights
from mmlocat.visualization import (class_palette, colorize_labels,
                                   heatmap_overlay, save_panels)


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description='Zero-shot segmentation panels as a PNG')
    parser.add_argument('config', help='zero-shot segmentation config')
    parser.add_argument('checkpoint', help='checkpoint (the tower)')
    parser.add_argument('image', help='image file')
    parser.add_argument('--gt', help='ground-truth label map (PNG)')
    parser.add_argument('--out', default='vis_zero_shot.png', help='PNG')
    add_model_options(parser, alpha=0.5)
    return parser.parse_args()


def load_inputs(cfg: Config, image: str, gt: Optional[str]) -> dict:
    """The test pipeline's packed inputs of ``image`` (and ``gt``)."""
    from mmseg.registry import DATASETS
    dataset_cfg = cfg.test_dataloader.dataset
    steps: List[dict] = [
        s for s in dataset_cfg.pipeline
        if gt is not None or 'LoadAnnotations' not in s['type']
    ]
    results = dict(img_path=image, seg_fields=[])
    if gt is not None:
        dataset_cls = DATASETS.get(dataset_cfg['type'])
        classes = (dataset_cfg.get('metainfo') or {}).get('classes')
        results.update(
            seg_map_path=gt,
            reduce_zero_label=dataset_cfg.get(
                'reduce_zero_label', _default_reduce_zero(dataset_cls)),
            label_map=dataset_cls.get_label_map(classes))
    return Compose(steps)(results)


def _default_reduce_zero(dataset_cls) -> bool:
    """The dataset class's default ``reduce_zero_label``."""
    param = inspect.signature(
        dataset_cls.__init__).parameters.get('reduce_zero_label')
    return bool(param.default) if param is not None else False


def main() -> None:
    args = parse_args()
    if not 0 <= args.alpha <= 1:
        raise ValueError(f'--alpha must be in [0, 1], got {args.alpha}')
    for path in [args.image] + ([args.gt] if args.gt else []):
        if not osp.isfile(path):
            raise FileNotFoundError(f'no such file: {path}')
    cfg = Config.fromfile(args.config)
    if args.cfg_options is not None:
        cfg.merge_from_dict(args.cfg_options)
    init_default_scope(cfg.get('default_scope', 'mmseg'))
    from mmseg.registry import DATASETS, MODELS
    model = MODELS.build(cfg.model)
    if not hasattr(model, 'check_classes'):
        raise TypeError(f'{args.config} is not a zero-shot segmentation '
                        f'config (model {type(model).__name__})')
    # strict: never draw a partly random network
    load_model_weights(model, args.checkpoint)
    model = model.to(args.device).eval()
    packed = load_inputs(cfg, args.image, args.gt)
    with torch.no_grad():
        data = model.data_preprocessor(pseudo_collate([packed]), False)
        pred = model.predict(data['inputs'], data['data_samples'])[0]
        score = model.backbone.forward_with_scores(
            data['inputs'])['patch_score'][0, 0]
    img_rgb = mmcv.imread(args.image, channel_order='rgb')
    # the host dataset's colours where it has enough (class_palette's rule)
    dataset_cls = DATASETS.get(cfg.test_dataloader.dataset['type'])
    palette = class_palette(
        model.num_classes,
        getattr(dataset_cls, 'METAINFO', {}).get('palette'))
    panels = [('image', img_rgb)]
    if args.gt:
        gt = pred.gt_sem_seg.data[0].cpu().numpy()
        panels.append(('ground truth', colorize_labels(gt, palette)))
    seg = pred.pred_sem_seg.data[0].cpu().numpy()
    panels += [('zero-shot prediction', colorize_labels(seg, palette)),
               ('patch score',
                heatmap_overlay(img_rgb,
                                score.cpu().numpy(), args.alpha))]
    os.makedirs(osp.dirname(osp.abspath(args.out)), exist_ok=True)
    save_panels(panels, args.out, title=osp.basename(args.image))
    print(args.out)


if __name__ == '__main__':
    run_cli('vis_zero_shot', main)
