"""Convert CLIPSelf's F-ViT text-embedding files to mmlocat's format.

CLIPSelf's F-ViT (github wusize/CLIPSelf, ``F-ViT/datasets/embeddings/``)
ships its class text embeddings as ``.pt`` dicts ``{class name: (D,)
tensor}`` plus ``'background'``; its configs pick the rows of a class json
(``mscoco_65_classes.json``, ``lvis_v1_all_classes.json``) in that order.
This writes those rows as ``OUT.npy`` (``(C + 1, D)``, background last)
with the ``OUT.json`` sidecar the F-ViT configs read (class names row by
row, the source file and its sha256)::

    python tools/misc/clipself_embeddings2npy.py \
        F-ViT/datasets/embeddings/coco_with_background_evaclip_vitb_16.pt \
        data/coco/embeddings/ov-coco_eva02-clip-b16.npy \
        --class-names F-ViT/datasets/mscoco_65_classes.json \
        --ann-file data/coco/annotations/instances_val2017_all_2.json \
        --model EVA02-B-16

``--class-names`` is a json list, an annotation file (its categories in id
order) or a ``.txt``; ``--ann-file`` checks them against the dataset's
classes (names, count and order: the head's label order) and writes
``OUT.base.json`` (its ``split`` base / OVR-CNN ``seen`` classes or LVIS
frequent + common), as ``dump_text_embeddings.py`` does;
``--base-class-names`` (e.g. F-ViT's ``mscoco_seen_classes.json``) writes it
from a list instead. ``--model`` records the open_clip name of the CLIP
whose text tower made the file (``EVA02-B-16`` for ``*_evaclip_vitb_16.pt``,
``EVA02-L-14-336`` for ``*_evaclip_vitl14x336.pt``), which F-ViT compares
with the name its backbone checkpoint records.
"""
import argparse
import json
import os.path as osp

from mmlocat.text import (names_from_annotations, read_class_names,
                          read_clipself_embeddings, save_base_classes,
                          save_text_embeddings)
from mmlocat.text.embeddings import embedding_files
from mmlocat.utils.checkpoint_io import run_cli
from mmlocat.utils.output_guard import refuse_output_over_input
from mmlocat.utils.records import file_sha256


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('src', help="CLIPSelf's embedding file (.pt)")
    parser.add_argument('out', help='output .npy path')
    parser.add_argument(
        '--class-names',
        required=True,
        help='the classes in label order: F-ViT\'s class json, an '
        'annotation file or a .txt')
    parser.add_argument(
        '--ann-file',
        help='annotation file of the dataset: the class names must be its '
        'categories in id order; writes OUT.base.json')
    parser.add_argument(
        '--base-class-names',
        help='base classes (a list file) for OUT.base.json')
    parser.add_argument(
        '--model', help='open_clip name of the CLIP that made the file')
    return parser.parse_args()


def dataset_base(ann_file: str, names: list, names_file: str) -> list:
    """The base classes of ``ann_file``; its classes must be ``names``."""
    with open(ann_file, encoding='utf-8') as f:
        dataset, base = names_from_annotations(json.load(f), ann_file)
    if len(dataset) != len(names):
        raise ValueError(f'{names_file} lists {len(names)} classes, the '
                         f'dataset {ann_file} {len(dataset)}')
    if dataset != names:
        first = next(i for i, (a, b) in enumerate(zip(names, dataset))
                     if a != b)
        raise ValueError(
            f'{names_file} and the dataset {ann_file} differ at label '
            f'{first}: {names[first]!r} vs {dataset[first]!r} (names and '
            'order must be the dataset\'s)')
    return base


def main() -> None:
    args = parse_args()
    if args.ann_file and args.base_class_names:
        raise SystemExit('clipself_embeddings2npy: error: give --ann-file '
                         'or --base-class-names, not both')
    outputs = embedding_files(
        args.out, 'OUT', base=bool(args.ann_file or args.base_class_names))
    refuse_output_over_input(
        outputs, {
            'SRC': args.src,
            '--class-names': args.class_names,
            '--ann-file': args.ann_file,
            '--base-class-names': args.base_class_names
        })
    names = read_class_names(args.class_names)
    base = None
    if args.ann_file:
        base = dataset_base(args.ann_file, names, args.class_names)
    elif args.base_class_names:
        base = read_class_names(args.base_class_names)
        unknown = [n for n in base if n not in names]
        if unknown:
            raise ValueError(f'{args.base_class_names}: base classes not in '
                             f'{args.class_names}: {unknown[:10]}')
    rows, row_names = read_clipself_embeddings(args.src, names,
                                               args.class_names)
    text_model = dict(
        embeddings=osp.basename(args.src),
        embeddings_sha256=file_sha256(args.src))
    if args.model:
        text_model['name'] = args.model
    save_text_embeddings(args.out, rows, row_names, text_model=text_model)
    print(f'{args.out}: {rows.shape[0]} x {rows.shape[1]} '
          f'({len(names)} classes + background)')
    if base is not None:
        base_file = save_base_classes(args.out, base)
        print(f'{base_file}: {len(base)} base classes')


if __name__ == '__main__':
    run_cli('clipself_embeddings2npy', main)
