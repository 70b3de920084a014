"""Write CLIP text embeddings of a dataset's classes (F-ViT heads,
zero-shot segmentation).

Each class name fills F-ViT's 63 prompt templates with its article and
"This is " rules (``--templates clip --prompt-style plain`` for CLIP's
ImageNet set, ``--templates imagenet80 --prompt-style plain`` for the 80
prompts of zero-shot segmentation); the CLIP text tower (open_clip, with
weights you supply) encodes them; the L2-normalised prompt embeddings are
averaged and normalised again. Writes ``OUT.npy`` (``(C[+1], D)``),
``OUT.json`` (the class names, row by row, and the text model: open_clip
name, weights file and its sha256, the fingerprint ``text_sha256`` of the
text tower it encoded with and its activation ``text_act``, templates and
prompt style, which F-ViT and the zero-shot segmentor compare with their
checkpoints and configs) and, with ``--ann-file``, ``OUT.base.json`` (the
base classes: OV-COCO ``split == 'base'`` or LVIS frequent + common)::

    python tools/misc/dump_text_embeddings.py \
        --ann-file data/coco/annotations/instances_val2017_all_2.json \
        --model ViT-B-16-quickgelu --pretrained checkpoints/ViT-B-16.pt \
        --background data/coco/embeddings/ov-coco_clip-vit-b16.npy

``--pretrained`` is read by its content: OpenAI's TorchScript release
(``ViT-B-16.pt``; a QuickGELU CLIP, so a ``--model`` with exact GELU such as
``ViT-B-16`` is refused), an open_clip state dict
(``open_clip_pytorch_model.bin``: LAION's ``ViT-B-16``, MetaCLIP's
``ViT-B-16-quickgelu``, ``EVA02-B-16``, ...), the EVA repo's EVA-CLIP
``.pt`` (``EVA02_CLIP_B_psz16_s8B.pt`` with ``--model EVA02-B-16``), a
trained LaSt-CLIP text tower (``lastclip2mmlocat.py --text-out``), or an
open_clip tag (downloaded by open_clip). An open_clip state dict does not
say its activation: ``--model`` must name it (``ViT-B-16`` for LAION's,
``ViT-B-16-quickgelu`` for OpenAI's and MetaCLIP's weights).

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
name a line) gives them explicitly instead. ``--seg-config CONFIG`` writes
what a zero-shot segmentation config (configs/last) reads: its test
dataset's classes, each with the names (synonyms) of the config's
``model.class_name_file`` (SCLIP's format; one row per name, the sidecar
mapping rows to classes) or its own name when the config names no file,
with the config's ``templates`` / ``prompt_style`` (other values are
refused)::

    python tools/misc/dump_text_embeddings.py \
        --seg-config configs/last/zeroshot_clip-b16_voc20.py \
        --model ViT-B-16-quickgelu --pretrained checkpoints/ViT-B-16.pt \
        data/embeddings/voc20_clip-b16.npy

``--random-text-tower`` encodes with open_clip's random initialisation
instead of ``--pretrained`` weights, for a smoke trial without downloads
(docs/tools.md, "Smoke trials"): the sidecar records no weights, so a
model refuses the file unless its config opts out of the CLIP check
(``check_clip=False``, logged). ``--cfg-options`` changes the
``--seg-config`` config as the other tools' option does (e.g.
``model.templates=single`` for one prompt per name).

``--model-config FILE`` registers an open_clip model-config JSON (its file
stem is the model name) for models open_clip does not ship.

A progress bar with an ETA counts the classes encoded. Outputs are cached
under ``$MMLOCAT_CACHE/vocabulary`` (default ``~/.cache/mmlocat/vocabulary``;
the run-time vocabularies of ``tools/infer.py --classes`` live there too),
keyed by names, model, the weights' sha256, templates, prompt style and
background row: a second dump of the same embeddings (a LaSt config and its
CLS twin share their text tower) copies them without building the tower.
``--no-cache`` encodes anyway; ``rm -r ~/.cache/mmlocat/vocabulary`` clears
the cache.
"""
import argparse
import json

from mmlocat.text import (PROMPT_STYLES, TEMPLATE_SETS, encoder_record,
                          names_from_annotations, open_clip_encoder,
                          register_model_config, resolve_class_names,
                          save_base_classes, write_text_embeddings,
                          zero_shot_class_name_lines, zero_shot_classes)
from mmlocat.text.cache import cached_text_embeddings
from mmlocat.text.class_names import (IMAGENET_NAME_SOURCES,
                                      imagenet_class_names)
from mmlocat.text.embeddings import embedding_files
from mmlocat.utils.checkpoint_io import run_cli
from mmlocat.utils.launch import (add_cfg_options, load_config,
                                  merge_cfg_options)
from mmlocat.utils.output_guard import refuse_output_over_input


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    src = parser.add_mutually_exclusive_group(required=True)
    src.add_argument('--ann-file', help='COCO/LVIS-format annotation json')
    src.add_argument(
        '--names',
        help='class list: a .json / .txt file, names separated by commas, '
        'a named list (imagenet_open_clip) or an mmdet dataset type '
        '(mmlocat.text.resolve_class_names)')
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
        '(without background when the model has bg_thresh) with the names '
        'of its class_name_file, its templates and prompt style')
    parser.add_argument('--model', default='ViT-B-16', help='open_clip arch')
    parser.add_argument(
        '--model-config',
        help='open_clip model-config JSON to register (sets --model to its '
        'file stem)')
    weights = parser.add_mutually_exclusive_group(required=True)
    weights.add_argument(
        '--pretrained',
        help='open_clip weights (a local file or an open_clip tag)')
    weights.add_argument(
        '--random-text-tower',
        action='store_true',
        help="open_clip's random initialisation instead of weights, for a "
        'smoke trial without downloads (docs/tools.md): the embeddings '
        'mean nothing, their sidecar says so (weights: null) and they are '
        'never cached')
    parser.add_argument(
        '--background',
        action='store_true',
        help="append a 'background' row (embedding of the word)")
    parser.add_argument(
        '--templates',
        choices=sorted(TEMPLATE_SETS),
        help="prompt set: F-ViT's 63 (default; imagenet80 with --imagenet, "
        "the config's with --seg-config), "
        "CLIP's ImageNet 63, CLIP's "
        'full ImageNet 80 (imagenet80, zero-shot segmentation) or the '
        'single "a photo of a {}."')
    parser.add_argument(
        '--prompt-style',
        choices=PROMPT_STYLES,
        help="F-ViT's name / article / 'This is' rules (default) or plain "
        "filling (default with --imagenet; the config's with --seg-config)")
    parser.add_argument('--device', default='cpu')
    parser.add_argument(
        '--no-cache',
        action='store_true',
        help='encode even when the cache ($MMLOCAT_CACHE/vocabulary, '
        'default ~/.cache/mmlocat/vocabulary) holds these embeddings, and '
        'leave the cache as it is')
    add_cfg_options(parser)
    parser.add_argument('out', help='output .npy path')
    args = parser.parse_args(argv)
    if args.cfg_options and not args.seg_config:
        parser.error('--cfg-options changes the --seg-config config; '
                     'without one there is nothing to change')
    return args


def resolve_prompt_defaults(args: argparse.Namespace) -> None:
    """Templates and prompt style not given: open_clip's ImageNet protocol
    (the 80 OpenAI templates, plain) with ``--imagenet``, else F-ViT's."""
    if args.templates is None:
        args.templates = 'imagenet80' if args.imagenet else 'fvit'
    if args.prompt_style is None:
        args.prompt_style = 'plain' if args.imagenet else 'fvit'


def seg_config_recipe(args: argparse.Namespace, cfg) -> None:
    """Templates and prompt style of a zero-shot config: the config's,
    which the arguments may repeat but not change."""
    defaults = dict(templates='imagenet80', prompt_style='plain')
    for key, default in defaults.items():
        wanted = cfg.model.get(key, default) or default
        given = getattr(args, key)
        if given is not None and given != wanted:
            option = '--' + key.replace('_', '-')
            raise ValueError(
                f'{option} {given} but {args.seg_config} names {key}='
                f'{wanted!r} (the segmentor refuses other embeddings): drop '
                f'{option} or change the config')
        setattr(args, key, wanted)


def main():
    args = parse_args()
    refuse_output_over_input(
        embedding_files(args.out, 'OUT', base=bool(args.ann_file)), {
            '--pretrained': args.pretrained,
            '--names': args.names,
            '--ann-file': args.ann_file,
            '--seg-config': args.seg_config,
            '--model-config': args.model_config
        })
    base = lines = None
    if args.ann_file:
        with open(args.ann_file, encoding='utf-8') as f:
            names, base = names_from_annotations(json.load(f), args.ann_file)
    elif args.seg_config:
        import mmlocat  # noqa: F401  (registers mmlocat's datasets)
        cfg = load_config(args.seg_config)
        merge_cfg_options(cfg, args.cfg_options, args.cfg_new_keys)
        seg_config_recipe(args, cfg)
        names = zero_shot_classes(cfg)
        if cfg.model.get('class_name_file') is not None:
            lines = zero_shot_class_name_lines(cfg)
    elif args.imagenet:
        names = imagenet_class_names(args.imagenet)
    else:
        # the one class-list grammar (a file, "a, b", a named list, a
        # dataset type); a named list as shipped may repeat a name
        names = resolve_class_names(args.names, unique=True)
    imagenet = bool(args.imagenet)
    resolve_prompt_defaults(args)
    if args.background and (imagenet or lines is not None):
        raise ValueError(
            "--background appends F-ViT's background row; --imagenet has "
            'none, and a zero-shot config with a class-name file gets its '
            'background from that file')
    model_name = args.model
    if args.model_config:
        model_name = register_model_config(args.model_config)
    recipe = dict(
        templates=args.templates,
        prompt_style=args.prompt_style,
        background=args.background,
        class_name_lines=lines,
        # ImageNet's lists name a few classes twice (open_clip: missile,
        # sunglasses): one embedding each, as open_clip
        repeated_names=imagenet or len(set(names)) != len(names))
    if args.no_cache or args.random_text_tower:
        encode = open_clip_encoder(model_name, args.pretrained, args.device)
        embeddings, rows = write_text_embeddings(
            args.out, names, encode,
            encoder_record(encode, model_name, args.pretrained), **recipe)
    else:

        def build_encoder():
            return open_clip_encoder(model_name, args.pretrained, args.device)

        embeddings, rows, _ = cached_text_embeddings(
            args.out,
            names,
            model_name,
            args.pretrained,
            build_encoder,
            model_config=args.model_config,
            **recipe)
    print(f'{args.out}: {embeddings.shape[0]} x {embeddings.shape[1]} '
          f'({len(rows)} names, {len(names)} classes, {args.templates} '
          f'templates, {args.prompt_style} prompts)')
    if base is not None:
        base_file = save_base_classes(args.out, base)
        print(f'{base_file}: {len(base)} base classes')


if __name__ == '__main__':
    run_cli('dump_text_embeddings', main)
