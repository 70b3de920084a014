"""Draw patch-score and LazyStrike vote maps of a model over images.

For every image writes ``<out-dir>/<name>_patch_score.png`` with, side by
side: the network input | the patch-score heat map over it | the vote map
over it (the vote panel is left out when the model has no LazyStrike
votes, e.g. a plain ViT). Patch scores follow "Vision Transformers Need More
Than Registers" (https://arxiv.org/abs/2602.22394).

Any config and image: the scores come from ``mmlocat.PatchScoreClassifier``
(its neck, backbone or plain-ViT scores) when the config's model is one and
the checkpoint covers it, else from the backbone's ``forward_with_scores``
(``mmlocat.LaStViT`` / ``mmlocat.CLIPViT``, in a classifier, segmentor or
detector config). The checkpoint is a whole model or a backbone (keys under
``backbone.``, as the converters write).

    python tools/analysis_tools/vis_patch_score.py CONFIG CHECKPOINT \
        IMG_OR_DIR [IMG_OR_DIR ...] --out-dir vis/
"""
import argparse
import os
import os.path as osp
from typing import Dict, Optional

import numpy as np
import torch
from tqdm import tqdm

import mmlocat  # noqa: F401  (registry node)
from mmlocat.apis import collect_images  # noqa: F401  (re-exported)
from mmlocat.apis.analysis import build_analysis_model
from mmlocat.apis.cli import add_model_options
from mmlocat.utils.checkpoint_io import run_cli
from mmlocat.visualization import heatmap_overlay, save_panels


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description='Write patch-score / vote-map overlays as PNGs')
    parser.add_argument('config', help='model config')
    parser.add_argument('checkpoint', help='checkpoint file')
    parser.add_argument('images', nargs='+', help='image files or folders')
    parser.add_argument(
        '--out-dir', default='vis_patch_score', help='output folder')
    add_model_options(parser, alpha=0.5)
    return parser.parse_args()


def render(img_rgb: np.ndarray, score: np.ndarray, votes: Optional[np.ndarray],
           alpha: float, out_file: str) -> None:
    """Save the image | score overlay | vote overlay panels to a PNG."""
    panels = [('input', img_rgb),
              ('patch score', heatmap_overlay(img_rgb, score, alpha))]
    if votes is not None:
        panels.append(
            ('LazyStrike votes', heatmap_overlay(img_rgb, votes, alpha)))
    save_panels(panels, out_file)


def score_maps(model: torch.nn.Module, loaded: str,
               inputs: torch.Tensor) -> Dict[str, torch.Tensor]:
    """``patch_score`` (and ``vote_map``) ``(B, 1, h, w)`` of a batch."""
    with_scores = getattr(model, 'extract_feat_with_scores', None)
    if with_scores is not None and loaded == 'model':
        return with_scores(inputs)[1]  # mmlocat.PatchScoreClassifier
    backbone_scores = getattr(model.backbone, 'forward_with_scores', None)
    if backbone_scores is None:
        need = (' and a checkpoint of the whole model'
                if with_scores is not None else '')
        raise TypeError(
            f'no patch scores for {type(model.backbone).__name__}: use a '
            'backbone with forward_with_scores (every mmlocat ViT: '
            'LaStViT, LocAtViT, CLIPViT, EVA02CLIPViT) or '
            'type=mmlocat.PatchScoreClassifier' + need)
    return backbone_scores(inputs)


def main() -> None:
    args = parse_args()
    if not 0 <= args.alpha <= 1:
        raise ValueError(f'--alpha must be in [0, 1], got {args.alpha}')
    images = collect_images(args.images)
    model, _, prepare, loaded = build_analysis_model(args.config,
                                                     args.checkpoint,
                                                     args.device,
                                                     args.cfg_options)
    os.makedirs(args.out_dir, exist_ok=True)
    written = []
    for i, path in enumerate(tqdm(images, desc='patch scores')):
        inputs, img_rgb = prepare(path)
        with torch.no_grad():
            scores = score_maps(model, loaded, inputs)
        votes = scores.get('vote_map')
        name = osp.splitext(osp.basename(path))[0]
        out_file = osp.join(args.out_dir, f'{name}_patch_score.png')
        if out_file in written:  # same file name in two folders
            out_file = osp.join(args.out_dir, f'{name}_{i}_patch_score.png')
        render(img_rgb, scores['patch_score'][0, 0].cpu().numpy(),
               None if votes is None else votes[0, 0].cpu().numpy(),
               args.alpha, out_file)
        written.append(out_file)
    for out_file in written:
        print(out_file)


if __name__ == '__main__':
    run_cli('vis_patch_score.py', main)
