"""Convert EVA02-CLIP image towers to EVA02CLIPViT keys.

Usage:
    python tools/model_converters/eva02_clip2mmlocat.py SRC DST [--prefix P]
        [--rope-pt-seq-len N] [--model NAME | --model-config FILE]

Example (the file the ``configs/ovd`` and ``configs/last`` EVA02-CLIP B/16
configs load)::

    python tools/model_converters/eva02_clip2mmlocat.py \
        EVA02_CLIP_B_psz16_s8B.pt checkpoints/eva02-clip-b16_mmlocat.pth \
        --model EVA02-B-16

``SRC`` is an EVA-CLIP checkpoint of the EVA repo (``visual.*`` keys, e.g.
``EVA02_CLIP_B_psz16_s8B.pt``), an open_clip ``EVA02-*`` checkpoint
(``visual.trunk.*``) or a bare image-tower state dict (``.pt``, ``.pth``,
``.bin``, ``.safetensors``). Keys are written under ``--prefix`` (default
``backbone.``) for ``init_cfg=dict(type='Pretrained', checkpoint=DST,
prefix='backbone.')`` on an ``mmlocat.EVA02CLIPViT``. The checkpoint's
``meta['clip']`` records the source file's name and sha256, with
``--model`` (e.g. ``EVA02-B-16``) or ``--model-config`` the open_clip model
name and its text activation ``text_act``, and, when the file holds the
text tower (both releases do: ``text.*``), that tower's fingerprint
``text_sha256``: text embeddings dumped from open_clip's ``EVA02-B-16``
file are accepted with a tower converted from the EVA repo's file of the
same model, as their text towers are the same tensors.
"""
import argparse
import os.path as osp

from mmlocat.utils.checkpoint_io import (read_state_dict, run_cli,
                                         save_converted)
from mmlocat.utils.converters import convert_eva02_clip
from mmlocat.utils.converters.clip import (clip_tower_settings,
                                           open_clip_model_config)
from mmlocat.utils.output_guard import refuse_output_over_input
from mmlocat.utils.records import clip_meta, clip_provenance, text_provenance


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
    source = parser.add_mutually_exclusive_group()
    source.add_argument('--model', help='open_clip model name (recorded)')
    source.add_argument(
        '--model-config', help='open_clip model-config JSON file')
    return parser.parse_args()


def model_settings(args: argparse.Namespace) -> tuple:
    """``(open_clip model name, text activation)`` to record (``(None,
    None)`` without ``--model`` / ``--model-config``); refuses non-EVA
    towers."""
    if args.model is None and args.model_config is None:
        return None, None
    cfg = open_clip_model_config(args.model, args.model_config)
    settings = clip_tower_settings(cfg)
    timm_name = settings['timm_model_name'] or ''
    if not timm_name.startswith('eva02'):
        raise ValueError(f'{args.model or args.model_config} is not an '
                         f'EVA02-CLIP tower (vision tower {timm_name!r}); '
                         'use tools/model_converters/clip2mmlocat.py')
    name = args.model or osp.splitext(osp.basename(args.model_config))[0]
    return name, settings['text_act']


def main() -> None:
    args = parse_args()
    refuse_output_over_input(
        dict(DST=args.dst), {
            'SRC': args.src,
            '--model-config': args.model_config
        })
    try:
        name, text_act = model_settings(args)
        record = clip_provenance(name, args.src)
        source = read_state_dict(args.src)
        state_dict = convert_eva02_clip(
            source, rope_pt_seq_len=args.rope_pt_seq_len)
    except (FileNotFoundError, ValueError, ImportError) as err:
        raise SystemExit(f'eva02_clip2mmlocat: error: {err}')
    record.update(text_provenance(source, text_act))
    count = save_converted(
        state_dict,
        args.dst,
        args.src,
        'eva02_clip2mmlocat',
        args.prefix,
        # the record binds to the weights as saved (image_sha256)
        **clip_meta(record, {
            args.prefix + k: v
            for k, v in state_dict.items()
        }))
    print(f'saved {count} tensors to {args.dst}')


if __name__ == '__main__':
    run_cli('eva02_clip2mmlocat', main)
