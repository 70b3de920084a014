"""Convert facebookresearch DINO ViT weights to LaStViT backbone keys.

Usage:
    python tools/model_converters/dino2mmlocat.py SRC DST \
        [--checkpoint-key {teacher,student}] [--prefix P]

SRC is a bare DINO backbone (DINO's released ``dino_deitsmall16_pretrain
.pth``) or a DINO training checkpoint (``main_dino.py``'s ``checkpoint*.pth``
with ``student`` / ``teacher`` / ``optimizer`` / ``epoch`` / ``args`` /
``dino_loss``, e.g. the LaSt-ViT authors' ``dino0080.pth``). From a training
checkpoint the teacher is converted by default, as DINO's own evaluations
and released backbones use it (``--checkpoint-key student`` for the
student). ``module.`` / ``backbone.`` prefixes are stripped and DINO's
projection head is dropped; the report says what was taken and dropped.

Example (the file the ``configs/last`` DINO configs load)::

    python tools/model_converters/dino2mmlocat.py \
        dino_deitsmall16_pretrain.pth checkpoints/dino-s_mmlocat.pth

Keys are written under ``--prefix`` (default ``backbone.``), so the file
loads with ``init_cfg=dict(type='Pretrained', checkpoint=DST,
prefix='backbone.')`` on an ``mmlocat.LaStViT`` (``arch='deit-small'`` for
ViT-S, ``'base'`` for ViT-B).
"""
import argparse
from argparse import Namespace

from mmlocat.utils.checkpoint_io import (read_checkpoint,
                                         refuse_nonfinite_weights, run_cli,
                                         save_converted)
from mmlocat.utils.converters import (DINO_CHECKPOINT_KEYS, convert_dino,
                                      dino_backbone_weights)
from mmlocat.utils.output_guard import refuse_output_over_input


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description='DINO ViT weights to mmlocat LaStViT keys')
    parser.add_argument(
        'src', help='DINO backbone state dict or training checkpoint (.pth)')
    parser.add_argument('dst', help='output mmengine checkpoint')
    parser.add_argument(
        '--checkpoint-key',
        default='teacher',
        choices=DINO_CHECKPOINT_KEYS,
        help='network of a training checkpoint to convert (default: '
        "teacher, as DINO's evaluations)")
    parser.add_argument(
        '--prefix', default='backbone.', help='prefix of the output keys')
    return parser.parse_args()


def main() -> None:
    args = parse_args()
    refuse_output_over_input(dict(DST=args.dst), dict(SRC=args.src))
    # a DINO training checkpoint pickles its argparse arguments
    weights = dino_backbone_weights(
        read_checkpoint(args.src, safe_globals=[Namespace]),
        args.checkpoint_key, args.src)
    refuse_nonfinite_weights(weights.state_dict, args.src)
    state_dict = convert_dino(weights.state_dict)
    extra = {k: v for k, v in weights.meta.items() if k != 'not_converted'}
    count = save_converted(
        state_dict,
        args.dst,
        args.src,
        'dino2mmlocat',
        args.prefix,
        dino_layout=weights.layout,
        checkpoint_key=weights.key,
        **extra)
    print(f'{args.src}: {weights.describe()}')
    print(f'saved {count} tensors to {args.dst}')


if __name__ == '__main__':
    run_cli('dino2mmlocat', main)
