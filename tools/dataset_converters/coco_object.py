"""Write COCO-Object semantic maps (background + the 80 COCO things).

One ``<stem>_instanceTrainIds.png`` per image. By default from the
COCO-Stuff-164k maps, as GroupViT / SCLIP convert them (thing id -> its
position among the 80 in id order + 1; stuff and unlabelled -> 0; nothing
ignored)::

    python tools/dataset_converters/coco_object.py \
        data/coco_stuff164k/annotations/val2017 \
        data/coco_stuff164k/coco_object/val2017

``--source instances`` draws them from a COCO instances file instead
(mmlocat's earlier maps: crowd regions 255, smaller instances over larger
ones; see ``mmlocat/datasets/coco_object.py``)::

    python tools/dataset_converters/coco_object.py --source instances \
        data/coco/annotations/instances_val2017.json \
        data/coco/coco_object/val2017
"""
import argparse

from mmlocat.datasets.coco_object import (convert_coco_object,
                                          convert_coco_stuff_object)
from mmlocat.utils.checkpoint_io import run_cli


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument(
        'src',
        help='COCO-Stuff-164k map folder (the original <stem>.png maps), or '
        'with --source instances a COCO instances_*.json')
    parser.add_argument('out_dir', help='folder for the PNG maps')
    parser.add_argument(
        '--source',
        choices=('coco-stuff', 'instances'),
        default='coco-stuff',
        help='COCO-Stuff-164k maps (GroupViT / SCLIP, default) or instance '
        'annotations (mmlocat\'s earlier maps)')
    return parser.parse_args()


def main():
    args = parse_args()
    convert = (
        convert_coco_stuff_object
        if args.source == 'coco-stuff' else convert_coco_object)
    written = convert(args.src, args.out_dir)
    print(f'{args.out_dir}: {len(written)} maps')


if __name__ == '__main__':
    run_cli('coco_object', main)
