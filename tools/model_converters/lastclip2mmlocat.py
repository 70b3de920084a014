"""Image tower of a LaSt-CLIP training checkpoint -> F-ViT backbone file.

Usage:
    python tools/model_converters/lastclip2mmlocat.py SRC DST [--act A]

``SRC`` is a checkpoint of a ``configs/last/clip_*`` run
(``mmlocat.CLIPContrastive``); ``DST`` is what the OV configs'
``init_cfg=dict(type='Pretrained', checkpoint=DST, prefix='backbone.')``
loads, e.g. ``checkpoints/last-clip-vit-b16_mmlocat.pth``. ``meta['clip']``
keeps the original CLIP's record (activation, name, sha256) when the text
tower was locked; a fine-tuned text tower is recorded as
``lastclip:<SRC>`` instead.
"""
import argparse

from mmlocat.models.clip.export import (export_image_tower,
                                        load_training_checkpoint)
from mmlocat.utils.checkpoint_io import run_cli, save_checkpoint


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description='LaSt-CLIP checkpoint -> CLIPViT / EVA02CLIPViT weights')
    parser.add_argument('src', help='CLIPContrastive training checkpoint')
    parser.add_argument('dst', help='output backbone checkpoint')
    parser.add_argument(
        '--act',
        choices=('gelu', 'quick_gelu'),
        help='CLIPViT activation if nothing records it')
    parser.add_argument(
        '--prefix', default='backbone.', help='prefix of the output keys')
    return parser.parse_args()


def main() -> None:
    args = parse_args()
    try:
        state_dict, meta = export_image_tower(
            load_training_checkpoint(args.src), args.src, args.act,
            args.prefix)
    except (FileNotFoundError, ValueError) as err:
        raise SystemExit(f'lastclip2mmlocat: error: {err}')
    save_checkpoint(state_dict, args.dst, meta=meta)
    print(f'saved {len(state_dict)} tensors to {args.dst}')


if __name__ == '__main__':
    run_cli('lastclip2mmlocat', main)
