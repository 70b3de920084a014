"""Convert facebookresearch DINO ViT weights to LaStViT backbone keys.

Usage:
    python tools/model_converters/dino2mmlocat.py SRC DST [--prefix P]

Keys are written under ``--prefix`` (default ``backbone.``), so the file
loads with ``init_cfg=dict(type='Pretrained', checkpoint=DST,
prefix='backbone.')`` on an ``mmlocat.LaStViT`` (``arch='deit-small'`` for
ViT-S, ``'base'`` for ViT-B). DINO's projection head is dropped.
"""
import argparse

from mmlocat.utils.checkpoint_io import (read_state_dict, run_cli,
                                         save_converted)
from mmlocat.utils.converters import convert_dino


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description='DINO ViT weights to mmlocat LaStViT keys')
    parser.add_argument('src', help='DINO backbone state dict (.pth)')
    parser.add_argument('dst', help='output mmengine checkpoint')
    parser.add_argument(
        '--prefix', default='backbone.', help='prefix of the output keys')
    return parser.parse_args()


def main() -> None:
    args = parse_args()
    state_dict = convert_dino(read_state_dict(args.src))
    count = save_converted(state_dict, args.dst, args.src, 'dino2mmlocat',
                           args.prefix)
    print(f'saved {count} tensors to {args.dst}')


if __name__ == '__main__':
    run_cli('dino2mmlocat', main)
