"""Build COCO20k (LOST's object-discovery subset of COCO train2014).

Keeps the images of LOST's list (``coco_20k_filenames.txt``, which you
supply) from the official ``instances_train2014.json``::

    python tools/dataset_converters/coco20k.py \
        data/coco/annotations/instances_train2014.json \
        coco_20k_filenames.txt data/coco/annotations/coco20k.json
"""
import argparse

from mmlocat.datasets.coco20k import make_coco20k
from mmlocat.utils.checkpoint_io import run_cli


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('ann_file', help='instances_train2014.json')
    parser.add_argument('image_list', help="LOST's coco_20k_filenames.txt")
    parser.add_argument('out_file', help='output COCO JSON')
    return parser.parse_args()


def main():
    args = parse_args()
    summary = make_coco20k(args.ann_file, args.image_list, args.out_file)
    print(f'{args.out_file}: {summary["images"]} images, '
          f'{summary["annotations"]} annotations ({summary["crowd"]} crowd)')


if __name__ == '__main__':
    run_cli('coco20k', main)
