"""Make the OV-COCO (48 base / 17 novel) split files.

Reads ``ANN_DIR/instances_{train,val}2017.json`` (official COCO 2017) and
writes ``OUT_DIR/instances_train2017_seen_2.json`` (base annotations only)
and ``OUT_DIR/instances_val2017_all_2.json`` (all 65 classes)::

    python tools/dataset_converters/make_ov_coco.py \
        data/coco/annotations data/coco/annotations
"""
import argparse

from mmlocat.datasets.ov_coco import make_ov_coco_files
from mmlocat.utils.checkpoint_io import run_cli


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('ann_dir', help='folder of instances_*2017.json')
    parser.add_argument('out_dir', help='folder for the split files')
    parser.add_argument(
        '--keep-novel-categories',
        action='store_true',
        help='list the 17 novel categories (without annotations) in the '
        'base train file too, so labels index all 65 classes')
    return parser.parse_args()


def main():
    args = parse_args()
    paths = make_ov_coco_files(args.ann_dir, args.out_dir,
                               args.keep_novel_categories)
    for split, path in paths.items():
        print(f'{split}: {path}')


if __name__ == '__main__':
    run_cli('make_ov_coco.py', main)
