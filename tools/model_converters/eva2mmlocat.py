"""Convert EVA02-CLIP image towers to EVA02CLIPViT keys.

Usage:
    python tools/model_converters/eva2mmlocat.py SRC DST [--prefix P]
        [--rope-pt-seq-len N]

``SRC`` is an EVA-CLIP checkpoint of the EVA repo (``visual.*`` keys, e.g.
``EVA02_CLIP_B_psz16_s8B.pt``), an open_clip ``EVA02-*`` checkpoint
(``visual.trunk.*``) or a bare image-tower state dict (``.pt``, ``.pth``,
``.bin``, ``.safetensors``). Keys are written under ``--prefix`` (default
``backbone.``) for ``init_cfg=dict(type='Pretrained', checkpoint=DST,
prefix='backbone.')`` on an ``mmlocat.EVA02CLIPViT``.
"""
import argparse
import os.path as osp
from collections import OrderedDict

from mmlocat.utils.checkpoint_io import (read_state_dict, run_cli,
                                         save_checkpoint)
from mmlocat.utils.converters import convert_eva02_clip


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description='EVA02-CLIP image tower to EVA02CLIPViT keys')
    parser.add_argument('src', help='EVA02-CLIP checkpoint')
    parser.add_argument('dst', help='output mmengine checkpoint')
    parser.add_argument(
        '--prefix', default='backbone.', help='prefix of the output keys')
    parser.add_argument(
        '--rope-pt-seq-len',
        type=float,
        default=16,
        help='RoPE pre-training grid side the stored RoPE buffers must '
        'match (16 for the released B/16 and L/14 towers)')
    return parser.parse_args()


def main() -> None:
    args = parse_args()
    try:
        state_dict = convert_eva02_clip(
            read_state_dict(args.src), rope_pt_seq_len=args.rope_pt_seq_len)
    except (FileNotFoundError, ValueError) as err:
        raise SystemExit(f'eva2mmlocat: error: {err}')
    state_dict = OrderedDict(
        (args.prefix + k, v) for k, v in state_dict.items())
    save_checkpoint(
        state_dict,
        args.dst,
        meta=dict(source=osp.basename(args.src), converter='eva2mmlocat'))
    print(f'saved {len(state_dict)} tensors to {args.dst}')


if __name__ == '__main__':
    run_cli('eva2mmlocat', main)
