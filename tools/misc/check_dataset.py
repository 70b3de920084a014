"""Read every file a config's dataset lists and report what is wrong.

Reads each sample through the config's own loading transforms (see
:mod:`mmlocat.datasets.dataset_check`) with a progress bar, prints the
faults per kind (missing, empty, undecodable, truncated, size_mismatch,
label_out_of_range, exif_rotated, load_error) with their count and the
first files, and exits 1 on any fault, 0 when the data is clean. A config
or dataset that cannot be built ends in one line and exit 2.

Usage::

    python tools/misc/check_dataset.py CONFIG [--split train|val|test]
        [--num-workers N] [--show N] [--out report.json]
        [--cfg-options k=v ...] [--cfg-new-keys KEY ...]
"""
import argparse
import sys

import mmlocat  # noqa: F401  (registry node)
from mmlocat.datasets.dataset_check import (SPLITS, check_config_data,
                                            reports_json)
from mmlocat.utils.checkpoint_io import run_cli
from mmlocat.utils.launch import (add_cfg_options, add_data_root_option,
                                  apply_data_root, load_config,
                                  merge_cfg_options)


def parse_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('config', help='config file')
    parser.add_argument(
        '--split',
        choices=SPLITS,
        default='train',
        help='which dataloader\'s dataset to check (default: train)')
    parser.add_argument(
        '--num-workers',
        type=int,
        help='parallel readers (default: the dataloader\'s num_workers)')
    parser.add_argument(
        '--show',
        type=int,
        default=5,
        help='files named per kind of fault (default: 5)')
    parser.add_argument(
        '--out', help='write every fault and note to this JSON file')
    add_cfg_options(parser)
    add_data_root_option(parser)
    return parser.parse_args(argv)


def main(argv=None) -> int:
    args = parse_args(argv)
    cfg = load_config(args.config)
    apply_data_root(cfg, args.data_root)  # --cfg-options win
    merge_cfg_options(cfg, args.cfg_options, args.cfg_new_keys)
    reports = check_config_data(
        cfg, splits=(args.split, ), num_workers=args.num_workers)
    if not reports:
        raise ValueError(f'{args.config} has no {args.split}_dataloader')
    for report in reports:
        print(report.format(args.show))
    if args.out:
        with open(args.out, 'w', encoding='utf-8') as f:
            f.write(reports_json(reports))
    return 0 if all(r.ok for r in reports) else 1


if __name__ == '__main__':
    run_cli('check_dataset.py', lambda: sys.exit(main()))
