"""Plot the training loss and validation top-1 of A/B runs side by side.

Reads the scalar logs mmengine writes (``<work_dir>/<timestamp>/vis_data/
<timestamp>.json``, one JSON object per logged step) of each run and draws
one panel per twin pair: the loss (a 5-point moving average, raw values
faint) over iterations and the top-1 of each validation.

    python tools/analysis_tools/plot_ab_curves.py NAME=WORK_DIR ... \
        --out curves.png [--pairs 2]
"""
import argparse
import glob
import json
import os.path as osp
from typing import Dict, List, Tuple

import numpy as np


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        'runs', nargs='+', help='NAME=WORK_DIR, twins next to each other')
    parser.add_argument('--out', required=True, help='PNG to write')
    parser.add_argument(
        '--pairs', type=int, default=2, help='runs per panel (default 2)')
    return parser.parse_args()


def read_scalars(work_dir: str) -> Tuple[List[dict], List[dict]]:
    """(train steps, val steps) of the latest run in ``work_dir``."""
    logs = sorted(glob.glob(osp.join(work_dir, '*', 'vis_data', '*.json')))
    logs = [p for p in logs if osp.basename(p) != 'scalars.json']
    if not logs:
        raise FileNotFoundError(f'no mmengine scalar log under {work_dir}')
    with open(logs[-1]) as f:
        rows = [json.loads(line) for line in f if line.strip()]
    train = [r for r in rows if 'loss' in r]
    val = [r for r in rows if 'accuracy/top1' in r]
    return train, val


def smooth(values: np.ndarray, width: int = 5) -> np.ndarray:
    if len(values) < width:
        return values
    kernel = np.ones(width) / width
    return np.convolve(values, kernel, mode='valid')


def main() -> None:
    args = parse_args()
    import matplotlib
    matplotlib.use('Agg')
    import matplotlib.pyplot as plt
    runs: Dict[str, str] = dict(r.split('=', 1) for r in args.runs)
    names = list(runs)
    groups = [
        names[i:i + args.pairs] for i in range(0, len(names), args.pairs)
    ]
    fig, axes = plt.subplots(
        2, len(groups), figsize=(4.2 * len(groups), 5.6), squeeze=False)
    for col, group in enumerate(groups):
        for name in group:
            train, val = read_scalars(runs[name])
            steps = np.array([r['step'] for r in train])
            loss = np.array([r['loss'] for r in train])
            line, = axes[0, col].plot(
                steps[len(steps) - len(smooth(loss)):],
                smooth(loss),
                label=name)
            axes[0, col].plot(steps, loss, color=line.get_color(), alpha=.25)
            top1 = [r['accuracy/top1'] for r in val]
            axes[1, col].plot(range(1, len(top1) + 1), top1, 'o-', label=name)
            print(f'{name}: final loss {loss[-5:].mean():.4f} (mean of the '
                  f'last 5 logs), top-1 per epoch {top1}')
        axes[0, col].set(xlabel='iteration', ylabel='train loss')
        axes[1, col].set(xlabel='epoch', ylabel='val top-1 (%)')
        for ax in axes[:, col]:
            ax.legend(fontsize=8)
            ax.grid(alpha=.3)
    fig.tight_layout()
    fig.savefig(args.out, dpi=80)
    print(f'wrote {args.out}')


if __name__ == '__main__':
    main()
