"""Towers of a LaSt-CLIP training checkpoint -> F-ViT / zero-shot files.

Usage:
    python tools/model_converters/lastclip2mmlocat.py SRC DST \
        [--text-out TEXT] [--act A]

``SRC`` is a checkpoint of a ``configs/last/clip_*`` run
(``mmlocat.CLIPContrastive``); ``DST`` is what the OV / zero-shot configs'
``init_cfg=dict(type='Pretrained', checkpoint=DST, prefix='backbone.')``
loads, e.g. ``checkpoints/last-clip-vit-b16_mmlocat.pth``. Its
``meta['clip']`` names the text tower the image tower matches: the original
CLIP the run was trained against when the text tower was locked; with a
trained text tower (``lock_text=False``) ``--text-out TEXT`` is required,
the tuned text tower is written there as open_clip text keys (plus the
trained ``logit_scale``), and the record names that file and its sha256:
``tools/misc/dump_text_embeddings.py --model NAME --pretrained TEXT``
writes the embeddings the consumers then accept. Both files are written
only when everything was checked (nothing is left half written).
"""
import argparse
import os
import os.path as osp

from mmlocat.models.clip.export import (export_image_tower, export_text_tower,
                                        load_training_checkpoint,
                                        text_is_trained)
from mmlocat.utils.checkpoint_io import (remove_stale_temporaries, run_cli,
                                         save_checkpoint)
from mmlocat.utils.output_guard import refuse_output_over_input


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description='LaSt-CLIP checkpoint -> CLIPViT / EVA02CLIPViT weights')
    parser.add_argument('src', help='CLIPContrastive training checkpoint')
    parser.add_argument('dst', help='output backbone checkpoint')
    parser.add_argument(
        '--text-out',
        help='output file of the trained text tower (open_clip text keys); '
        'required when the run trained it (lock_text=False)')
    parser.add_argument(
        '--act',
        choices=('gelu', 'quick_gelu'),
        help='CLIPViT activation if nothing records it')
    parser.add_argument(
        '--prefix', default='backbone.', help='prefix of the output keys')
    return parser.parse_args()


def _temporary(path: str) -> str:
    return osp.join(
        osp.dirname(osp.abspath(path)),
        f'.{osp.basename(path)}.{os.getpid()}.tmp')


def main() -> None:
    args = parse_args()
    refuse_output_over_input({
        'DST': args.dst,
        '--text-out': args.text_out
    }, dict(SRC=args.src))
    for target in (args.dst, args.text_out):
        if target:  # what a killed run of this tool left
            remove_stale_temporaries(target)
    written = []
    try:
        checkpoint = load_training_checkpoint(args.src)
        text_file = args.text_out
        if text_is_trained(checkpoint, args.src) and args.text_out:
            text, text_meta = export_text_tower(checkpoint, args.src)
            text_file = _temporary(args.text_out)
            save_checkpoint(text, text_file, meta=text_meta)
            written.append((text_file, args.text_out))
        # a trained text tower: the record names the text file (the
        # temporary one holds the same bytes)
        state_dict, meta = export_image_tower(checkpoint, args.src, args.act,
                                              args.prefix, text_file)
        if written:
            meta['clip']['weights'] = osp.basename(args.text_out)
        image_file = _temporary(args.dst)
        save_checkpoint(state_dict, image_file, meta=meta)
        written.append((image_file, args.dst))
    except BaseException as err:  # also KeyboardInterrupt, SystemExit
        for path, _ in written:
            os.remove(path)
        if isinstance(err, (FileNotFoundError, ValueError)):
            raise SystemExit(f'lastclip2mmlocat: error: {err}')
        raise
    for path, target in written:
        os.replace(path, target)
        print(f'saved {target}')
    print(f'{len(state_dict)} image tower tensors in {args.dst}; '
          f'meta["clip"] = {meta["clip"]}')


if __name__ == '__main__':
    run_cli('lastclip2mmlocat', main)
