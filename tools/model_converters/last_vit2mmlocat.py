"""Convert a torchvision ViT (LaSt-ViT release) to an mmpretrain checkpoint.

Usage:
    python tools/model_converters/last_vit2mmlocat.py SRC DST

Example (the file the ``configs/last`` LaSt-ViT-B configs load)::

    python tools/model_converters/last_vit2mmlocat.py ViT_190k.pth \
        checkpoints/last-b_in1k.pth

The output loads into ``mmpretrain.ImageClassifier`` with an
``mmlocat.LaStViT`` backbone and a ``VisionTransformerClsHead`` (e.g.
``load_from=DST``).
"""
import argparse
import os.path as osp

from mmlocat.utils.checkpoint_io import (read_state_dict, run_cli,
                                         save_checkpoint)
from mmlocat.utils.converters import convert_torchvision_vit
from mmlocat.utils.output_guard import refuse_output_over_input


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description='torchvision ViT / LaSt-ViT weights to mmpretrain keys')
    parser.add_argument('src', help='torchvision state dict (.pth)')
    parser.add_argument('dst', help='output mmengine checkpoint')
    return parser.parse_args()


def main() -> None:
    args = parse_args()
    refuse_output_over_input(dict(DST=args.dst), dict(SRC=args.src))
    state_dict = convert_torchvision_vit(read_state_dict(args.src))
    save_checkpoint(
        state_dict,
        args.dst,
        meta=dict(source=osp.basename(args.src), converter='last_vit2mmlocat'))
    print(f'saved {len(state_dict)} tensors to {args.dst}')


if __name__ == '__main__':
    run_cli('last_vit2mmlocat', main)
