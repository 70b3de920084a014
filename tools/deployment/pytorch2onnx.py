"""Export a LocAtViT / LaSt-ViT classifier or UperNet segmentor to ONNX.

    python tools/deployment/pytorch2onnx.py CONFIG CHECKPOINT \
        --shape 224 224 --out model.onnx [--verify]

The graph takes ``(B, 3, H, W)`` normalised images at the exported
``H x W`` (the batch axis is free with ``--dynamic-batch``) and returns the
model's ``mode='tensor'`` output: classification logits or the decode
head's segmentation logits. GAug runs on its dense kernel and LazyStrike's
FFT as the equal matrix product; what cannot be exported and why is in
``docs/deployment.md``. A size the exporter cannot write is refused
before exporting, in one line saying why and which sizes work (UperNet:
height and width multiples of 192, so that its pyramid pooling divides the
stride-32 map; classifiers: any size). ``--verify`` runs the file with
onnxruntime on a random batch and prints the largest difference to PyTorch
(an error above ``--atol``).
"""
import argparse

import torch

import mmlocat  # noqa: F401  (registry node)
from mmlocat.apis.cli import add_model_options
from mmlocat.apis.onnx_export import build_export_model, export_onnx, run_onnx
from mmlocat.utils.checkpoint_io import run_cli
from mmlocat.utils.output_guard import refuse_output_over_input


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('config', help='classifier or segmentor config')
    parser.add_argument('checkpoint', help='checkpoint file')
    parser.add_argument(
        '--shape',
        type=int,
        nargs=2,
        default=[224, 224],
        metavar=('H', 'W'),
        help='input height and width (fixed in the graph; UperNet: '
        'multiples of 192)')
    parser.add_argument('--out', default='model.onnx', help='output file')
    parser.add_argument('--opset', type=int, default=17, help='ONNX opset')
    parser.add_argument(
        '--dynamic-batch',
        action='store_true',
        help='leave the batch axis free (classifiers; UperNet needs a fixed '
        'batch for its pooling module)')
    parser.add_argument(
        '--verify',
        action='store_true',
        help='compare onnxruntime with PyTorch on a random batch')
    parser.add_argument(
        '--atol',
        type=float,
        default=1e-4,
        help='largest allowed difference with --verify')
    add_model_options(parser, device=False)
    return parser.parse_args()


def main() -> None:
    args = parse_args()
    refuse_output_over_input({'--out': args.out}, {
        'CONFIG': args.config,
        'CHECKPOINT': args.checkpoint
    })
    module, _ = build_export_model(args.config, args.checkpoint,
                                   args.cfg_options)
    export_onnx(
        module,
        args.shape,
        args.out,
        opset=args.opset,
        dynamic_batch=args.dynamic_batch)
    print(f'pytorch2onnx.py: wrote {args.out} (input 1x3x{args.shape[0]}x'
          f'{args.shape[1]})')
    if args.verify:
        inputs = torch.randn(2 if args.dynamic_batch else 1, 3, *args.shape)
        with torch.no_grad():
            want = module(inputs).numpy()
        got = run_onnx(args.out, inputs)
        err = float(abs(got - want).max())
        print(f'pytorch2onnx.py: onnxruntime vs PyTorch, max abs diff '
              f'{err:.3e} on {tuple(inputs.shape)}')
        if got.shape != want.shape or not err <= args.atol:
            raise RuntimeError(f'onnxruntime output differs from PyTorch by '
                               f'{err:.3e} (> --atol {args.atol}), shapes '
                               f'{got.shape} / {want.shape}')


if __name__ == '__main__':
    run_cli('pytorch2onnx.py', main)
