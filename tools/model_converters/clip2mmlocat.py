"""Convert OpenAI CLIP / open_clip image towers to CLIPViT keys.

Usage:
    python tools/model_converters/clip2mmlocat.py SRC DST
        (--model NAME | --model-config FILE | --act {gelu,quick_gelu})
        [--prefix P]

Example (the file the ``configs/ovd`` and ``configs/last`` CLIP configs
load)::

    python tools/model_converters/clip2mmlocat.py checkpoints/ViT-B-16.pt \
        checkpoints/clip-vit-b16_mmlocat.pth --model ViT-B-16-quickgelu

The weights do not tell the MLP activation: ``--model`` (an open_clip model
name, e.g. ``ViT-B-16`` (exact GELU) or ``ViT-B-16-quickgelu`` / OpenAI
weights) or ``--model-config`` (an open_clip model-config JSON) reads it,
``--act`` states it. An OpenAI TorchScript archive is a QuickGELU CLIP: a
model or ``--act`` with exact GELU is refused for it. The checkpoint's
``meta['clip']`` records the model name, the activation, the source file's
name and sha256 and, when the file holds the text tower too (OpenAI's and
open_clip's releases do), that tower's fingerprint ``text_sha256`` and
activation ``text_act`` (F-ViT and the zero-shot models compare them with
their text embeddings'); ``mmlocat.CLIPViT(act=None)`` follows it.

``SRC`` is an open_clip / OpenAI state dict (``.pt``, ``.pth``, ``.bin``,
``.safetensors``) or an OpenAI TorchScript archive. Keys are written under
``--prefix`` (default ``backbone.``) for ``init_cfg=dict(type='Pretrained',
checkpoint=DST, prefix='backbone.')`` on an ``mmlocat.CLIPViT``.
"""
import argparse
import os.path as osp

from mmlocat.utils.checkpoint_io import (read_clip_state_dict, run_cli,
                                         save_converted)
from mmlocat.utils.converters import convert_clip
from mmlocat.utils.converters.clip import (check_openai_archive_act,
                                           check_tower_config,
                                           clip_tower_settings,
                                           open_clip_model_config)
from mmlocat.utils.output_guard import refuse_output_over_input
from mmlocat.utils.records import clip_meta, clip_provenance, text_provenance


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description='OpenAI CLIP / open_clip image tower to CLIPViT keys')
    parser.add_argument('src', help='CLIP checkpoint')
    parser.add_argument('dst', help='output mmengine checkpoint')
    parser.add_argument(
        '--prefix', default='backbone.', help='prefix of the output keys')
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument(
        '--model', help='open_clip model name (activation, shapes)')
    source.add_argument(
        '--model-config', help='open_clip model-config JSON file')
    source.add_argument(
        '--act',
        choices=('gelu', 'quick_gelu'),
        help='the MLP activation, when no open_clip config is at hand')
    return parser.parse_args()


def tower_record(args: argparse.Namespace) -> tuple:
    """``(open_clip config or None, meta['clip'], text activation)`` of the
    arguments."""
    if args.act is not None:
        # open_clip's quick_gelu flag builds both towers' MLPs
        return None, dict(
            clip_provenance(None, args.src), act=args.act), args.act
    cfg = open_clip_model_config(args.model, args.model_config)
    settings = clip_tower_settings(cfg)
    if settings['layout'] != 'openai':
        raise ValueError(
            f'{args.model or args.model_config} is a timm-based tower '
            f'({settings["timm_model_name"]}), not the OpenAI layout; use '
            'tools/model_converters/eva02_clip2mmlocat.py')
    name = args.model or osp.splitext(osp.basename(args.model_config))[0]
    record = dict(clip_provenance(name, args.src), act=settings['act'])
    return cfg, record, settings['text_act']


def main() -> None:
    args = parse_args()
    refuse_output_over_input(
        dict(DST=args.dst), {
            'SRC': args.src,
            '--model-config': args.model_config
        })
    try:
        cfg, record, text_act = tower_record(args)
        source, kind = read_clip_state_dict(args.src)
        if kind == 'torchscript':
            check_openai_archive_act(args.src, record['act'], args.model
                                     or args.model_config)
        state_dict = convert_clip(source)
        if cfg is not None:
            check_tower_config(state_dict, cfg, args.src)
    except (FileNotFoundError, ValueError, ImportError) as err:
        raise SystemExit(f'clip2mmlocat: error: {err}')
    record.update(text_provenance(source, text_act))
    count = save_converted(
        state_dict,
        args.dst,
        args.src,
        'clip2mmlocat',
        args.prefix,
        # the record binds to the weights as saved (image_sha256)
        **clip_meta(record, {
            args.prefix + k: v
            for k, v in state_dict.items()
        }))
    print(f'saved {count} tensors to {args.dst}')


if __name__ == '__main__':
    run_cli('clip2mmlocat', main)
