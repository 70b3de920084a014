"""Write COCO-Object semantic maps from COCO instance annotations.

One ``<stem>_instanceTrainIds.png`` per image: 0 = background, ``k + 1`` =
the ``k``-th of the 80 categories in id order, crowd regions 255, smaller
instances drawn over larger ones (see ``mmlocat/datasets/coco_object.py``)::

    python tools/dataset_converters/coco_object.py \
        data/coco/annotations/instances_val2017.json \
        data/coco/coco_object/val2017
"""
import argparse

from mmlocat.datasets.coco_object import convert_coco_object
from mmlocat.utils.checkpoint_io import run_cli


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('ann_file', help='COCO instances_*.json')
    parser.add_argument('out_dir', help='folder for the PNG maps')
    return parser.parse_args()


def main():
    args = parse_args()
    written = convert_coco_object(args.ann_file, args.out_dir)
    print(f'{args.out_dir}: {len(written)} maps')


if __name__ == '__main__':
    run_cli('coco_object', main)
