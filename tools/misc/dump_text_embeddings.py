"""Write CLIP text embeddings of a dataset's classes (F-ViT heads,
zero-shot segmentation).

Each class name fills F-ViT's 63 prompt templates with its article and
"This is " rules (``--templates clip --prompt-style plain`` for CLIP's
ImageNet set, ``--templates imagenet80 --prompt-style plain`` for the 80
prompts of zero-shot segmentation); the CLIP text tower (open_clip, with
weights you supply) encodes them; the L2-normalised prompt embeddings are
averaged and normalised again. Writes ``OUT.npy`` (``(C[+1], D)``),
``OUT.json`` (the class names, row by row, and the text model: open_clip
name, weights file and its sha256, which F-ViT compares with its backbone
checkpoint's) and, with ``--ann-file``, ``OUT.base.json`` (the base
classes: OV-COCO ``split == 'base'`` or LVIS frequent + common)::

    python tools/misc/dump_text_embeddings.py \
        --ann-file data/coco/annotations/instances_val2017_all_2.json \
        --model ViT-B-16 --pretrained checkpoints/ViT-B-16.pt \
        --background data/coco/embeddings/ov-coco_clip-vit-b16.npy

ImageNet zero-shot classification (``mmlocat.ZeroShotAccuracy``) follows
open_clip's protocol by default: ``--imagenet`` writes open_clip's curated
class names (``--imagenet wordnet``: mmpretrain's WordNet names instead)
filled into the 80 OpenAI templates, plain (the default templates and
prompt style of ``--imagenet``)::

    python tools/misc/dump_text_embeddings.py --imagenet \
        --model ViT-B-16-quickgelu --pretrained checkpoints/ViT-B-16.pt \
        data/imagenet/embeddings/imagenet_clip-vit-b16.npy

Names are taken in category-id order, which is the label order of mmdet's
``CocoDataset`` / ``LVISV1Dataset``; ``--names FILE`` (json list or one
name a line) gives them explicitly instead; ``--seg-config CONFIG`` takes
those of a zero-shot segmentation config's test dataset (configs/last).
``--model-config FILE`` registers an open_clip model-config JSON (its file
stem is the model name) for models open_clip does not ship.
"""
import argparse
import json

from mmengine.config import Config

from mmlocat.apis.vocabulary import open_clip_encoder, register_model_config
from mmlocat.datasets.imagenet_class_names import (
    IMAGENET_NAME_SOURCES, build_listed_class_embeddings, imagenet_class_names)
from mmlocat.datasets.text_embeddings import (PROMPT_STYLES, TEMPLATE_SETS,
                                              build_class_embeddings,
                                              names_from_annotations,
                                              read_class_names,
                                              save_base_classes,
                                              save_text_embeddings)
from mmlocat.utils.checkpoint_io import run_cli
from mmlocat.utils.provenance import clip_provenance


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    src = parser.add_mutually_exclusive_group(required=True)
    src.add_argument('--ann-file', help='COCO/LVIS-format annotation json')
    src.add_argument('--names', help='class-name list (.json or .txt)')
    src.add_argument(
        '--imagenet',
        nargs='?',
        const='open_clip',
        choices=IMAGENET_NAME_SOURCES,
        help="ImageNet-1k's classes: open_clip's names (default) or "
        "mmpretrain's WordNet names; templates imagenet80, prompt style "
        'plain unless given (open_clip\'s zero-shot protocol)')
    src.add_argument(
        '--seg-config',
        help='zero-shot segmentation config: its test dataset\'s classes '
        '(without background when the model has bg_thresh)')
    parser.add_argument('--model', default='ViT-B-16', help='open_clip arch')
    parser.add_argument(
        '--model-config',
        help='open_clip model-config JSON to register (sets --model to its '
        'file stem)')
    parser.add_argument(
        '--pretrained',
        required=True,
        help='open_clip weights (a local file or an open_clip tag)')
    parser.add_argument(
        '--background',
        action='store_true',
        help="append a 'background' row (embedding of the word)")
    parser.add_argument(
        '--templates',
        choices=sorted(TEMPLATE_SETS),
        help="prompt set: F-ViT's 63 (default; imagenet80 with --imagenet), "
        "CLIP's ImageNet 63, CLIP's "
        'full ImageNet 80 (imagenet80, zero-shot segmentation) or the '
        'single "a photo of a {}."')
    parser.add_argument(
        '--prompt-style',
        choices=PROMPT_STYLES,
        help="F-ViT's name / article / 'This is' rules (default) or plain "
        'filling (default with --imagenet)')
    parser.add_argument('--device', default='cpu')
    parser.add_argument('out', help='output .npy path')
    return parser.parse_args(argv)


def resolve_prompt_defaults(args: argparse.Namespace) -> None:
    """Templates and prompt style not given: open_clip's ImageNet protocol
    (the 80 OpenAI templates, plain) with ``--imagenet``, else F-ViT's."""
    if args.templates is None:
        args.templates = 'imagenet80' if args.imagenet else 'fvit'
    if args.prompt_style is None:
        args.prompt_style = 'plain' if args.imagenet else 'fvit'


def main():
    args = parse_args()
    base = None
    if args.ann_file:
        with open(args.ann_file, encoding='utf-8') as f:
            names, base = names_from_annotations(json.load(f), args.ann_file)
    elif args.seg_config:
        import mmlocat  # noqa: F401  (registers mmlocat's datasets)
        from mmlocat.datasets.text_embeddings import config_class_names
        names = config_class_names(Config.fromfile(args.seg_config))
    elif args.imagenet:
        names = imagenet_class_names(args.imagenet)
    else:
        names = read_class_names(args.names)
    imagenet = bool(args.imagenet)
    resolve_prompt_defaults(args)
    model_name = args.model
    if args.model_config:
        model_name = register_model_config(args.model_config)
    encode = open_clip_encoder(model_name, args.pretrained, args.device)
    if imagenet:
        if args.background:
            raise SystemExit('dump_text_embeddings: error: --imagenet has no '
                             'background row')
        # ImageNet's lists name a few classes twice (open_clip: missile,
        # sunglasses): one embedding each, as open_clip
        embeddings, rows = build_listed_class_embeddings(
            names, encode, TEMPLATE_SETS[args.templates], args.prompt_style)
    else:
        embeddings, rows = build_class_embeddings(
            names,
            encode,
            templates=TEMPLATE_SETS[args.templates],
            background=args.background,
            prompt_style=args.prompt_style)
    text_model = dict(
        clip_provenance(model_name, args.pretrained),
        templates=args.templates,
        prompt_style=args.prompt_style)
    if 'weights' not in text_model:  # an open_clip tag, not a file
        text_model['weights'] = args.pretrained
    save_text_embeddings(args.out, embeddings, rows, text_model=text_model)
    print(f'{args.out}: {embeddings.shape[0]} x {embeddings.shape[1]}')
    if base is not None:
        base_file = save_base_classes(args.out, base)
        print(f'{base_file}: {len(base)} base classes')


if __name__ == '__main__':
    run_cli('dump_text_embeddings', main)
