"""Draw patch-score and LazyStrike vote maps of a model over images.

For every image writes ``<out-dir>/<name>_patch_score.png`` with, side by
side: the network input | the patch-score heat map over it | the vote map
over it (the vote panel is left out when the model has no LazyStrike
votes, e.g. a plain ViT). Patch scores follow "Vision Transformers Need More
Than Registers" (https://arxiv.org/abs/2602.22394). The model must attach
``patch_score`` to its predictions (``mmlocat.PatchScoreClassifier``).

    python tools/analysis_tools/vis_patch_score.py CONFIG CHECKPOINT \
        IMG_OR_DIR [IMG_OR_DIR ...] --out-dir vis/
"""
import argparse
import os
import os.path as osp
from typing import List, Optional

import numpy as np
import torch
from mmengine.config import Config, DictAction
from mmengine.dataset import Compose, pseudo_collate
from mmengine.registry import MODELS, init_default_scope
from mmengine.runner import load_checkpoint
from tqdm import tqdm

import mmlocat  # noqa: F401  (registry node)
from mmlocat.visualization import heatmap_overlay, save_panels

IMG_EXTENSIONS = ('.jpg', '.jpeg', '.png', '.bmp', '.ppm', '.tif', '.tiff',
                  '.webp')


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description='Write patch-score / vote-map overlays as PNGs')
    parser.add_argument('config', help='model config')
    parser.add_argument('checkpoint', help='checkpoint file')
    parser.add_argument('images', nargs='+', help='image files or folders')
    parser.add_argument(
        '--out-dir', default='vis_patch_score', help='output folder')
    parser.add_argument('--device', default='cpu', help='e.g. cpu, cuda:0')
    parser.add_argument(
        '--alpha', type=float, default=0.5, help='heat-map opacity')
    parser.add_argument(
        '--cfg-options',
        nargs='+',
        action=DictAction,
        help='override settings of the config, key=value pairs')
    return parser.parse_args()


def collect_images(paths: List[str]) -> List[str]:
    """Image files given directly or found (recursively) in folders."""
    images = []
    for path in paths:
        if osp.isdir(path):
            for root, _, files in sorted(os.walk(path)):
                images += [
                    osp.join(root, f) for f in sorted(files)
                    if f.lower().endswith(IMG_EXTENSIONS)
                ]
        elif osp.isfile(path):
            images.append(path)
        else:
            raise FileNotFoundError(f'no such image or folder: {path}')
    if not images:
        raise FileNotFoundError(f'no images found in {paths}')
    return images


def render(img_rgb: np.ndarray, score: np.ndarray, votes: Optional[np.ndarray],
           alpha: float, out_file: str) -> None:
    """Save the image | score overlay | vote overlay panels to a PNG."""
    panels = [('input', img_rgb),
              ('patch score', heatmap_overlay(img_rgb, score, alpha))]
    if votes is not None:
        panels.append(
            ('LazyStrike votes', heatmap_overlay(img_rgb, votes, alpha)))
    save_panels(panels, out_file)


def build_model(cfg: Config, checkpoint: str, device: str) -> torch.nn.Module:
    init_default_scope(cfg.get('default_scope', 'mmpretrain'))
    model = MODELS.build(cfg.model)
    # strict: never draw the scores of a partly random network
    load_checkpoint(
        model, checkpoint, map_location='cpu', strict=True, logger='silent')
    return model.to(device).eval()


def main() -> None:
    args = parse_args()
    if not 0 <= args.alpha <= 1:
        raise ValueError(f'--alpha must be in [0, 1], got {args.alpha}')
    cfg = Config.fromfile(args.config)
    if args.cfg_options is not None:
        cfg.merge_from_dict(args.cfg_options)
    images = collect_images(args.images)
    model = build_model(cfg, args.checkpoint, args.device)
    pipeline = Compose(cfg.test_dataloader.dataset.pipeline)
    os.makedirs(args.out_dir, exist_ok=True)
    written = []
    for i, path in enumerate(tqdm(images, desc='patch scores')):
        packed = pipeline(dict(img_path=path))
        with torch.no_grad():
            data = model.data_preprocessor(pseudo_collate([packed]), False)
            pred = model.predict(data['inputs'], data['data_samples'])[0]
        if 'patch_score' not in pred:
            raise KeyError('the model did not attach `patch_score`; use '
                           'type=mmlocat.PatchScoreClassifier in the config')
        # The packed input is the pipeline's BGR uint8 image (C, H, W).
        img = packed['inputs'].numpy()
        img_rgb = np.ascontiguousarray(img.transpose(1, 2, 0)[..., ::-1])
        votes = pred.get('vote_map')
        name = osp.splitext(osp.basename(path))[0]
        out_file = osp.join(args.out_dir, f'{name}_patch_score.png')
        if out_file in written:  # same file name in two folders
            out_file = osp.join(args.out_dir, f'{name}_{i}_patch_score.png')
        render(img_rgb,
               pred.patch_score.cpu().numpy(),
               None if votes is None else votes.cpu().numpy(), args.alpha,
               out_file)
        written.append(out_file)
    for out_file in written:
        print(out_file)


if __name__ == '__main__':
    main()
