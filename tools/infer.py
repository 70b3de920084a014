"""Run a trained model on your own images: PNG pictures and JSON.

    python tools/infer.py IMAGE_OR_FOLDER CONFIG CHECKPOINT [--out DIR]

The task comes from the config (``mmlocat.apis.tasks``): classification
(the top-5 labels and scores), segmentation and zero-shot segmentation
(class-coloured mask with a legend, and the raw label map), open-vocabulary
detection (boxes with labels and scores), each drawn by the host's
visualizer of the config, as ``tools/test.py --show-dir`` draws.
Outputs are named after the image's file name with its extension
(``x.jpg`` -> ``OUT/x.jpg.png``, ``x.jpg.json``, ``x.jpg.labels.png``),
below ``--out`` as below an input folder; names two inputs would share are
an error before anything is written.
``--classes "cat, remote control"`` (or a .txt / .json file of names, a
named list such as ``imagenet_open_clip``, a dataset type, one name: the
grammar of ``mmlocat.text.resolve_class_names``) makes
an F-ViT detector find, or a zero-shot segmentor label pixels with, those
classes: their CLIP text embeddings are computed with the model's own text
tower (recorded in the embedding file's sidecar or the CLIP checkpoint's
meta; ``--text-model`` / ``--text-weights`` otherwise) and cached. A
zero-shot segmentor with ``bg_thresh`` keeps it: label 0 is background.
Images longer than ``--max-side`` (segmentation default 2048) are
downscaled before the model and their prediction mapped back to the image
(a segmentor upsamples its logits to the image: 150 classes at 6000x4000
would need 14.4 GB). Images that cannot be read (a dangling link), run
out of memory or fail in the model or the visualizer (a 1x1 image) are
named, skipped and counted; the others are still predicted and the exit
status is then 1. ``--out`` must be a folder: an existing file (an input
image, the checkpoint, the config) is refused before the model is built.
The config's
text-embedding files must be those the checkpoint was trained with (its
``meta['class_files']``; ``--allow-class-file-change`` accepts others). See
``mmlocat.apis.MMLocatInferencer`` for the same from Python.
"""
import argparse
import sys

import mmlocat  # noqa: F401  (registry node)
from mmlocat.apis import MMLocatInferencer
from mmlocat.apis.cli import add_model_options
from mmlocat.apis.inferencer import check_out_dir
from mmlocat.utils.checkpoint_io import run_cli
from mmlocat.utils.records import ALLOW_OPTION


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('inputs', nargs='+', help='image files or folders')
    parser.add_argument('config', help='model config')
    parser.add_argument('checkpoint', help='checkpoint file')
    parser.add_argument(
        '--out', default='outputs', help='output folder (PNG + JSON)')
    parser.add_argument(
        '--classes',
        help='open-vocabulary detection and zero-shot segmentation: class '
        'names separated by commas, a .txt (one a line) / .json file of '
        'names, a named list (imagenet_open_clip, imagenet_wordnet), an '
        'mmdet dataset type or one class name; a named list or dataset '
        'type wins over a class of its name')
    parser.add_argument(
        '--text-model',
        help='open_clip model name of the CLIP text tower (when neither the '
        'embedding sidecar nor a checkpoint records it)')
    parser.add_argument(
        '--text-weights',
        help='weights file of that text tower (when the recorded one is not '
        'found)')
    parser.add_argument(
        '--text-model-config',
        help='open_clip model-config JSON to register (its stem is the '
        'model name)')
    parser.add_argument(
        '--vocab-cache',
        help='cache folder of vocabulary embeddings (default '
        '$MMLOCAT_CACHE/vocabulary, ~/.cache/mmlocat/vocabulary)')
    parser.add_argument(
        '--topk', type=int, default=5, help='classification: classes shown')
    parser.add_argument(
        '--score-thr',
        type=float,
        default=0.3,
        help='detection: boxes drawn from this score (the JSON has all)')
    parser.add_argument(
        '--max-side',
        type=int,
        help='downscale images whose longer side exceeds this before the '
        'model (aspect kept; label maps and boxes are mapped back to the '
        'image); default: 2048 for segmentation and zero-shot '
        'segmentation, none otherwise; 0: never')
    parser.add_argument(
        '--allow-partial-checkpoint',
        action='store_true',
        help='run even if the checkpoint leaves model weights random')
    parser.add_argument(
        ALLOW_OPTION,
        action='store_true',
        help='run even if the text-embedding / class-name files differ from '
        "those the checkpoint was trained with (its meta['class_files'])")
    add_model_options(
        parser,
        alpha=0.5,
        alpha_help='segmentation / zero-shot segmentation mask opacity',
        new_keys=True)
    return parser.parse_args()


def main() -> None:
    args = parse_args()
    # before the model is built (the inferencer checks the inputs' own
    # outputs again, once it has listed them)
    check_out_dir(args.out, [('config', args.config),
                             ('checkpoint', args.checkpoint)] +
                  [('input image', path) for path in args.inputs])
    inferencer = MMLocatInferencer(
        args.config,
        args.checkpoint,
        device=args.device,
        classes=args.classes,
        text_model=args.text_model,
        text_weights=args.text_weights,
        text_model_config=args.text_model_config,
        vocab_cache=args.vocab_cache,
        cfg_options=args.cfg_options,
        cfg_new_keys=args.cfg_new_keys,
        allow_partial_checkpoint=args.allow_partial_checkpoint,
        allow_class_file_change=args.allow_class_file_change,
        topk=args.topk,
        score_thr=args.score_thr,
        alpha=args.alpha,
        max_side=args.max_side)
    result = inferencer(args.inputs, out_dir=args.out, show_progress=True)
    for record in result['predictions']:
        print(record['png'])
    skipped = result['skipped']
    for record in skipped:
        print(
            f'infer.py: skipped {record["image"]}: {record["reason"]}',
            file=sys.stderr)
    oom = sum(r['reason'].startswith('out of memory') for r in skipped)
    failed = sum(r['reason'].startswith('failed') for r in skipped)
    kinds = [f'{oom} out of memory'] if oom else []
    kinds += [f'{failed} failed'] if failed else []
    detail = f' ({", ".join(kinds)})' if kinds else ''
    print(f'infer.py: {len(result["predictions"])} image(s) written to '
          f'{args.out}, {len(skipped)} skipped{detail}')
    if skipped:
        sys.exit(1)


if __name__ == '__main__':
    run_cli('infer.py', main)
