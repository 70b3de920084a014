"""`make demo`: UperNet + LocAtViT-T end to end on embedded ADE20K data.

1. writes the tiny ADE20K-format set (``mmlocat.testing``) to ``data/demo``;
2. trains ``configs/demo/upernet_locat-t_tiny-ade20k.py`` through
   ``tools/train.py`` (progress and ETA from the mmengine logger), which
   evaluates mIoU at the end;
3. writes PNGs for a few validation images: image | ground truth |
   prediction | patch score (the backbone's ``forward_with_scores``: cosine
   of each final-norm patch token with its global token,
   ``docs/method.md#patch-score``) | colour key (the classes of the ground
   truth and prediction, as the inference pictures' legend), and prints
   their paths.

``--compare`` also trains the plain-ViT twin (GAug and PRR off) and prints
both mIoUs side by side.
"""
import argparse
import json
import os
import os.path as osp
import signal
import subprocess
import sys
import time
from glob import glob
from typing import Dict, List

import cv2
import numpy as np
import torch
from tqdm import tqdm

ROOT = osp.dirname(osp.dirname(osp.abspath(__file__)))
CONFIGS = dict(
    locat=osp.join(ROOT, 'configs/demo/upernet_locat-t_tiny-ade20k.py'),
    vit=osp.join(ROOT, 'configs/demo/upernet_vit-t_tiny-ade20k.py'))


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--work-dir', default=osp.join(ROOT, 'work_dirs/demo'))
    parser.add_argument(
        '--data-root',
        default=osp.join(ROOT, 'data/demo/ade'),
        help='where the tiny ADE20K set is written (the config expects '
        'data/demo/ade)')
    parser.add_argument('--num-vis', type=int, default=4)
    parser.add_argument(
        '--compare',
        action='store_true',
        help='also train the plain ViT-T twin and compare mIoU')
    return parser.parse_args()


def make_data(data_root: str) -> Dict:
    from mmlocat.testing import generate
    return generate(
        'ade20k',
        data_root,
        num_train=64,
        num_val=16,
        img_size=(160, 160),
        seed=0)


def _run_training(cmd: List[str]) -> None:
    """Run ``cmd``, passing a SIGTERM sent to the demo on to it: Python's
    default SIGTERM would end the demo at once and leave the training
    process running on, an orphan."""
    child = subprocess.Popen(cmd, cwd=ROOT)
    previous = signal.signal(signal.SIGTERM,
                             lambda signum, _: child.send_signal(signum))
    try:
        code = child.wait()
    finally:
        signal.signal(signal.SIGTERM, previous)
    if code:
        print(f'[demo] training stopped (exit status {code})', flush=True)
        sys.exit(code)


def train(name: str, work_dir: str, data_root: str) -> Dict:
    """Run tools/train.py and return the final validation metrics."""
    data_root = osp.join(data_root, 'ADEChallengeData2016')
    cmd = [
        sys.executable,
        osp.join(ROOT, 'tools/train.py'), CONFIGS[name], '--work-dir',
        work_dir, '--cfg-options', f'train_dataloader.dataset.data_root='
        f'{data_root}', f'val_dataloader.dataset.data_root={data_root}',
        f'test_dataloader.dataset.data_root={data_root}'
    ]
    print(f'[demo] training {name}: {" ".join(cmd)}', flush=True)
    _run_training(cmd)
    scalars = sorted(glob(osp.join(work_dir, '*', 'vis_data', 'scalars.json')))
    if not scalars:
        raise RuntimeError(f'no scalars.json written under {work_dir}')
    with open(scalars[-1]) as f:
        records = [json.loads(line) for line in f if line.strip()]
    metrics = [r for r in records if 'mIoU' in r]
    if not metrics:
        raise RuntimeError(f'no mIoU logged in {scalars[-1]}')
    return metrics[-1]


def visualise(work_dir: str, data_root: str, num_vis: int) -> List[str]:
    """Write image | GT | prediction | patch-score PNGs; return paths."""
    from mmseg.apis import inference_model, init_model
    from mmseg.datasets import ADE20KDataset

    import mmlocat  # noqa: F401
    from mmlocat.utils import mmengine_checkpoint_globals
    from mmlocat.visualization import (colorize_labels, heatmap_overlay,
                                       save_panels)
    from mmlocat.visualization.labels import class_legend

    with open(osp.join(work_dir, 'last_checkpoint')) as f:
        checkpoint = f.read().strip()
    with mmengine_checkpoint_globals():  # a training checkpoint
        model = init_model(CONFIGS['locat'], checkpoint, device='cpu')
    palette = ADE20KDataset.METAINFO['palette']
    classes = ADE20KDataset.METAINFO['classes']
    captured = {}
    # the preprocessed batch the segmentor gives its backbone
    model.backbone.register_forward_pre_hook(
        lambda m, args: captured.update(inputs=args[0]))

    root = osp.join(data_root, 'ADEChallengeData2016')
    images = sorted(glob(osp.join(root, 'images/validation/*.jpg')))
    out_dir = osp.join(work_dir, 'vis')
    os.makedirs(out_dir, exist_ok=True)
    paths = []
    for img_path in tqdm(images[:num_vis], desc='[demo] drawing'):
        name = osp.splitext(osp.basename(img_path))[0]
        result = inference_model(model, img_path)
        pred = result.pred_sem_seg.data[0].numpy()
        gt = cv2.imread(
            osp.join(root, 'annotations/validation', name + '.png'),
            cv2.IMREAD_UNCHANGED).astype(np.int64)
        gt = np.where(gt == 0, 255, gt - 1)  # reduce-zero-label
        img = cv2.cvtColor(cv2.imread(img_path), cv2.COLOR_BGR2RGB)
        with torch.no_grad():
            score = model.backbone.forward_with_scores(
                captured['inputs'])['patch_score'][0, 0].numpy()
        out_file = osp.join(out_dir, f'{name}.png')
        save_panels(
            [
                ('image', img),
                ('ground truth', colorize_labels(gt, palette)),
                ('prediction', colorize_labels(pred, palette)),
                ('patch score', heatmap_overlay(img, score)),
                (
                    'colour key',
                    # a panel of its own: as tall as 24 rows need
                    class_legend([gt, pred], classes, palette,
                                 max(img.shape[0], 400)))
            ],
            out_file,
            title=f'UperNet + LocAtViT-T, {name}')
        paths.append(out_file)
    return paths


def main() -> None:
    args = parse_args()
    start = time.time()
    paths = make_data(args.data_root)
    print(f'[demo] data: {paths["data_root"]}', flush=True)
    names = ['locat', 'vit'] if args.compare else ['locat']
    metrics = {
        name: train(name, osp.join(args.work_dir, name), args.data_root)
        for name in names
    }
    pngs = visualise(
        osp.join(args.work_dir, 'locat'), args.data_root, args.num_vis)
    print('[demo] validation (16 images, 150-class ADE20K format):')
    for name, m in metrics.items():
        print(f'[demo]   {name:5s} mIoU {m["mIoU"]:.2f}  aAcc {m["aAcc"]:.2f}'
              f'  mAcc {m["mAcc"]:.2f}')
    print('[demo] PNGs (image | ground truth | prediction | patch score | '
          'colour key):')
    for path in pngs:
        print(f'[demo]   {path}')
    print(f'[demo] wall time {time.time() - start:.0f} s')


if __name__ == '__main__':
    main()
