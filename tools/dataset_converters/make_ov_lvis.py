"""Make the OV-LVIS base-only train file (rare annotations removed).

Reads ``ANN_DIR/lvis_v1_train.json`` and writes
``OUT_DIR/lvis_v1_train_norare.json``; evaluation uses the full
``lvis_v1_val.json``::

    python tools/dataset_converters/make_ov_lvis.py \
        data/lvis_v1/annotations data/lvis_v1/annotations
"""
import argparse

from mmlocat.datasets.ov_lvis import make_ov_lvis_files
from mmlocat.utils.checkpoint_io import run_cli


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('ann_dir', help='folder of lvis_v1_train.json')
    parser.add_argument('out_dir', help='folder for the base-only file')
    return parser.parse_args()


def main():
    args = parse_args()
    for split, path in make_ov_lvis_files(args.ann_dir, args.out_dir).items():
        print(f'{split}: {path}')


if __name__ == '__main__':
    run_cli('make_ov_lvis.py', main)
