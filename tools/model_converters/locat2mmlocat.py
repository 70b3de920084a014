"""Convert a LocAtViT / ViT / DeiT checkpoint to mmlocat's LocAtViT layout.

Reads timm (the public LocAtViT release, plain timm ViT/DeiT) or mmpretrain
checkpoints (.pth/.pt/.bin/.safetensors) and writes an mmengine checkpoint
for an mmpretrain ``ImageClassifier`` with a ``mmlocat.LocAtViT`` backbone.

Example::

    python tools/model_converters/locat2mmlocat.py \
        locatvit_tiny.safetensors checkpoints/locat-t_in1k.pth

(the file the ``configs/locat`` LocAtViT-T configs load).
"""
import argparse

from mmlocat.utils.checkpoint_io import (read_state_dict, run_cli,
                                         save_checkpoint)
from mmlocat.utils.converters import (GAUG_KEY, convert_vit_to_locat,
                                      detect_vit_format)
from mmlocat.utils.output_guard import refuse_output_over_input


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('src', help='source checkpoint')
    parser.add_argument('dst', help='output mmengine checkpoint (.pth)')
    return parser.parse_args()


def main() -> None:
    args = parse_args()
    refuse_output_over_input(dict(DST=args.dst), dict(SRC=args.src))
    state_dict = read_state_dict(args.src)
    fmt = detect_vit_format(state_dict)
    converted = convert_vit_to_locat(state_dict)
    num_blocks = len({
        k.split('.')[2]
        for k in converted if k.startswith('backbone.layers.')
    })
    has_gaug = any(GAUG_KEY in k for k in converted)
    reg = converted.get('backbone.reg_token')
    meta = dict(
        source=args.src,
        source_format=fmt,
        converter='tools/model_converters/locat2mmlocat.py')
    save_checkpoint(converted, args.dst, meta=meta)
    print(f'read {len(state_dict)} tensors ({fmt} format) from {args.src}')
    print(f'blocks: {num_blocks}, GAug weights: '
          f'{"yes" if has_gaug else "no (plain ViT: GAug starts fresh)"}, '
          f'register tokens: {0 if reg is None else reg.shape[1]}, '
          f'head: {"yes" if "head.layers.head.weight" in converted else "no"}')
    print(f'wrote {len(converted)} tensors to {args.dst}')


if __name__ == '__main__':
    run_cli('locat2mmlocat', main)
