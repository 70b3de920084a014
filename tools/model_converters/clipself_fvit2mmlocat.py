"""Convert CLIPSelf's released F-ViT detectors to mmlocat.FViT keys.

Usage:
    python tools/model_converters/clipself_fvit2mmlocat.py SRC DST
        [--rope-pt-seq-len N] [--text-embeddings EMB.npy]
        [--export-embeddings OUT.npy --class-names FILE]

``SRC`` is an F-ViT checkpoint of github wusize/CLIPSelf (``F-ViT/``, mmdet
2.x, e.g. ``fvit_eva_vitb16_ovcoco_clipself_proposals.pth``). ``DST`` holds
every weight of the ``mmlocat.FViT`` of the matching
``configs/ovd/fvit_eva02-clip-*`` config (``tools/test.py CONFIG DST``
loads it strictly); the report lists every dropped entry with its reason.

F-ViT stores its class text embeddings in the checkpoint
(``all_embeddings``) and tests with them; mmlocat reads them from the
head's ``text_embeddings`` file. ``--text-embeddings`` checks that file
against the checkpoint's rows (same values and count); ``--export-embeddings
OUT.npy --class-names FILE`` writes the checkpoint's own rows as an
embedding file (``OUT.npy`` + ``OUT.json``), named by ``FILE`` (F-ViT's
class json, e.g. ``mscoco_65_classes.json``, or an annotation file). The
file checked or written is recorded in ``meta['class_files']`` as training
records its embedding file (``tools/test.py`` / ``tools/infer.py`` then
refuse another one); the checkpoint's rows' sha256 is recorded in
``meta['clipself_fvit']`` either way.
"""
import argparse
import os.path as osp
from collections import Counter

import numpy as np

from mmlocat.datasets.class_file_record import class_files_of
from mmlocat.text import (BACKGROUND, load_text_embeddings, read_class_names,
                          save_text_embeddings)
from mmlocat.text.embeddings import embedding_files
from mmlocat.utils.checkpoint_io import (read_checkpoint,
                                         refuse_nonfinite_weights, run_cli,
                                         save_converted)
from mmlocat.utils.converters.clipself_fvit import clipself_fvit_weights
from mmlocat.utils.output_guard import refuse_output_over_input
from mmlocat.utils.records import (CLASS_FILES_KEY, CLIPSELF_KEY,
                                   RECORDS_VERSION, VERSION_KEY, file_sha256,
                                   files_record, rows_sha256)

#: The role of mmlocat.FViT's class embeddings in ``meta['class_files']``
#: (the box head's ``text_embeddings``).
ROLE = 'roi_head.bbox_head.text_embeddings'


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description="CLIPSelf's F-ViT checkpoints to mmlocat.FViT keys")
    parser.add_argument('src', help='F-ViT checkpoint (mmdet 2.x)')
    parser.add_argument('dst', help='output mmengine checkpoint')
    parser.add_argument(
        '--rope-pt-seq-len',
        type=float,
        default=16,
        help='RoPE pre-training grid side of the EVA02-CLIP tower (16 for '
        'CLIPSelf\'s B/16 and L/14-336)')
    parser.add_argument(
        '--text-embeddings',
        help='embedding file (.npy + .json) the config will use: checked '
        "against the checkpoint's class embeddings")
    parser.add_argument(
        '--export-embeddings',
        help="write the checkpoint's class embeddings to this .npy")
    parser.add_argument(
        '--class-names',
        help='class names of the exported rows, in row order (.json list, '
        'annotation file or .txt)')
    return parser.parse_args()


def check_embeddings(stored, path: str, src: str) -> None:
    """Refuse an embedding file whose rows are not the checkpoint's."""
    emb, background, names = load_text_embeddings(path)
    rows = emb if background is None else np.concatenate(
        [emb, background[None]])
    if rows.shape != tuple(stored.shape):
        raise ValueError(
            f'{path} holds {rows.shape[0]} x {rows.shape[1]} class '
            f'embeddings ({len(names)} classes'
            f'{" + background" if background is not None else ""}), the '
            f'F-ViT checkpoint {src} {stored.shape[0]} x {stored.shape[1]} '
            '(its classes + background)')
    diff = float(np.abs(rows - stored.numpy()).max())
    if diff > 1e-5:
        raise ValueError(
            f'{path} is not the vocabulary of {src}: the rows differ by up '
            f'to {diff:.3g} (checkpoint rows sha256 '
            f'{rows_sha256(stored)[:12]}, file rows '
            f'{rows_sha256(rows)[:12]}); '
            'export the checkpoint\'s own rows with --export-embeddings')


def export_embeddings(stored, out: str, class_names: str, src: str) -> None:
    names = read_class_names(class_names)
    if len(names) + 1 != stored.shape[0]:
        raise ValueError(
            f'{class_names} lists {len(names)} classes but the F-ViT '
            f'checkpoint {src} holds {stored.shape[0]} class embeddings '
            '(classes + background)')
    save_text_embeddings(
        out,
        stored.numpy(),
        names + [BACKGROUND],
        text_model=dict(
            checkpoint=osp.basename(src), checkpoint_sha256=file_sha256(src)))


def main() -> None:
    args = parse_args()
    if bool(args.export_embeddings) != bool(args.class_names):
        raise SystemExit('clipself_fvit2mmlocat: error: --export-embeddings '
                         'and --class-names go together')
    outputs = dict(DST=args.dst)
    if args.export_embeddings:
        outputs.update(
            embedding_files(args.export_embeddings, '--export-embeddings'))
    inputs = {'SRC': args.src, '--class-names': args.class_names}
    if args.text_embeddings:
        inputs.update(
            embedding_files(args.text_embeddings, '--text-embeddings'))
    refuse_output_over_input(outputs, inputs)
    weights = clipself_fvit_weights(
        read_checkpoint(args.src), args.src, args.rope_pt_seq_len)
    refuse_nonfinite_weights(weights.state_dict, args.src)
    stored = weights.class_embeddings
    if (args.text_embeddings or args.export_embeddings) and stored is None:
        raise ValueError(f'{args.src} holds no class embeddings '
                         '(roi_head.bbox_head.all_embeddings)')
    if args.text_embeddings:
        check_embeddings(stored, args.text_embeddings, args.src)
    if args.export_embeddings:
        export_embeddings(stored, args.export_embeddings, args.class_names,
                          args.src)
    record = dict(
        weights.meta, dropped=dict(Counter(weights.dropped.values())))
    if stored is not None:
        record['class_embeddings'] = dict(
            shape=list(stored.shape), sha256=rows_sha256(stored))
    meta = {CLIPSELF_KEY: record, VERSION_KEY: RECORDS_VERSION}
    vocabulary = args.export_embeddings or args.text_embeddings
    if vocabulary:
        meta[CLASS_FILES_KEY] = files_record(
            class_files_of({ROLE: vocabulary}))
    count = save_converted(weights.state_dict, args.dst, args.src,
                           'clipself_fvit2mmlocat', **meta)
    print(weights.describe())
    if args.text_embeddings:
        print(f'{args.text_embeddings}: the checkpoint\'s class embeddings')
    if args.export_embeddings:
        print(f'wrote the checkpoint\'s class embeddings to '
              f'{args.export_embeddings}')
    print(f'saved {count} tensors to {args.dst}')


if __name__ == '__main__':
    run_cli('clipself_fvit2mmlocat', main)
