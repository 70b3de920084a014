"""Convert OpenAI CLIP / open_clip image towers to CLIPViT keys.

Usage:
    python tools/model_converters/clip2mmlocat.py SRC DST [--prefix P]

``SRC`` is an open_clip / OpenAI state dict (``.pt``, ``.pth``, ``.bin``,
``.safetensors``) or an OpenAI TorchScript archive. Keys are written under
``--prefix`` (default ``backbone.``) for ``init_cfg=dict(type='Pretrained',
checkpoint=DST, prefix='backbone.')`` on an ``mmlocat.CLIPViT``.
"""
import argparse
import os.path as osp
from collections import OrderedDict

import torch

from mmlocat.utils.checkpoint_io import (read_state_dict, run_cli,
                                         save_checkpoint)
from mmlocat.utils.converters import convert_clip


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description='OpenAI CLIP / open_clip image tower to CLIPViT keys')
    parser.add_argument('src', help='CLIP checkpoint')
    parser.add_argument('dst', help='output mmengine checkpoint')
    parser.add_argument(
        '--prefix', default='backbone.', help='prefix of the output keys')
    return parser.parse_args()


def read_clip(path: str) -> 'OrderedDict[str, torch.Tensor]':
    """Read a state dict; OpenAI's released ``.pt`` files are TorchScript."""
    try:
        return read_state_dict(path)
    except ValueError as err:
        try:
            archive = torch.jit.load(path, map_location='cpu')
        except Exception:
            raise err
        return OrderedDict(archive.state_dict())


def main() -> None:
    args = parse_args()
    try:
        state_dict = convert_clip(read_clip(args.src))
    except (FileNotFoundError, ValueError) as err:
        raise SystemExit(f'clip2mmlocat: error: {err}')
    state_dict = OrderedDict(
        (args.prefix + k, v) for k, v in state_dict.items())
    save_checkpoint(
        state_dict,
        args.dst,
        meta=dict(source=osp.basename(args.src), converter='clip2mmlocat'))
    print(f'saved {len(state_dict)} tensors to {args.dst}')


if __name__ == '__main__':
    run_cli('clip2mmlocat', main)
