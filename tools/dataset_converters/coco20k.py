"""Build COCO20k (LOST's object-discovery subset of COCO train2014).

Keeps the images of LOST's list (``coco_20k_filenames.txt`` of github
valeoai/LOST, which you supply) from the official
``instances_train2014.json``::

    python tools/dataset_converters/coco20k.py \
        data/coco/annotations/instances_train2014.json \
        coco_20k_filenames.txt data/coco/annotations/coco20k.json

A listed image missing from the annotations is an error (all counted, the
first ten named); a list that is not LOST's (19,817 names) and listed
images without any non-crowd box are reported with their count and names.
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
    if summary['not_lost']:
        print(f'coco20k: warning: {args.image_list}: {summary["not_lost"]}')
    empty = summary['without_boxes']
    if empty:
        print(f'coco20k: warning: {len(empty)} listed images have no '
              f'non-crowd box, e.g. {empty[:10]}; mmlocat.CocoBoxesDataset '
              "refuses them unless without_boxes='skip' or 'keep'")


if __name__ == '__main__':
    run_cli('coco20k', main)
