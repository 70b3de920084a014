"""Generate tiny deterministic datasets in the real on-disk formats.

Example::

    python tools/dataset_converters/make_tiny_datasets.py \
        --kinds ade20k coco imagenet --root data/tiny --num-train 8 \
        --num-val 4 --size 64 64 --seed 0

Each kind goes to ``ROOT/<sub-folder>`` mirroring the usual ``data/`` layout
(``ade/ADEChallengeData2016``, ``coco_stuff164k``, ``VOCdevkit/VOC2010``,
``VOCdevkit/VOC2012`` and ``VOCdevkit/VOC2007`` (the CorLoc rows),
``coco``, ``lvis_v1``, ``imagenet``, ``mini-imagenet``, ``cc3m``: the
332 webdataset shards ``{00000..00331}.tar`` of the LaSt-CLIP recipes), so
``--data-root ROOT`` points a shipped config there. COCO-Object, COCO20k
and COCO Captions are derived in their source's folder
(``coco/coco_object`` from COCO's instances, ``coco_stuff164k/coco_object``
from COCO-Stuff; ``coco/train2014`` + ``coco/annotations/coco20k.json``;
``coco/annotations/captions_*2017.json``), which they share with ``coco`` /
``coco_stuff``. CIFAR-100 is not written (mmpretrain's ``CIFAR100`` checks
the release's md5 sums). Re-running
with the same arguments rewrites nothing; other arguments replace what an
earlier run wrote; files this tool did not write are never overwritten (the
run stops, naming them).
"""
import argparse
import os.path as osp

from tqdm import tqdm

from mmlocat.testing import DATASET_KINDS, DEFAULT_SUBDIRS, generate
from mmlocat.utils.checkpoint_io import run_cli


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument(
        '--kinds',
        nargs='+',
        default=list(DATASET_KINDS),
        choices=DATASET_KINDS,
        help='dataset formats to write')
    parser.add_argument('--root', default='data/tiny', help='output root')
    parser.add_argument(
        '--num-train',
        type=int,
        default=8,
        help='train images (per class for imagenet)')
    parser.add_argument(
        '--num-val',
        type=int,
        default=4,
        help='val images (per class for imagenet)')
    parser.add_argument(
        '--size',
        type=int,
        nargs=2,
        default=(64, 64),
        metavar=('H', 'W'),
        help='image height and width')
    parser.add_argument('--seed', type=int, default=0)
    return parser.parse_args()


def main():
    args = parse_args()
    written = {}
    for kind in tqdm(args.kinds, desc='datasets'):
        written[kind] = generate(
            kind,
            osp.join(args.root, DEFAULT_SUBDIRS[kind]),
            num_train=args.num_train,
            num_val=args.num_val,
            img_size=tuple(args.size),
            seed=args.seed)
    for kind, paths in written.items():
        print(f'{kind}:')
        for key, value in paths.items():
            print(f'  {key}: {value}')


if __name__ == '__main__':
    run_cli('make_tiny_datasets', main)
