"""Train a model with any OpenMMLab host (mmpretrain, mmseg, mmdet).

A thin mmengine Runner wrapper: the config's ``default_scope`` chooses the
host; importing mmlocat lets ``type='mmlocat.X'`` resolve.
"""
import argparse
import os
import os.path as osp
import sys

from mmengine.config import DictAction
from mmengine.registry import RUNNERS
from mmengine.runner import Runner

import mmlocat  # noqa: F401  (registry node, safe checkpoint globals)
from mmlocat.datasets.dataset_check import check_before_run
from mmlocat.engine.data_guard import guard_runner_data
from mmlocat.utils.launch import (add_rng_state_hook, enable_amp, load_config,
                                  setup_cpu_distributed)


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description='Train a model')
    parser.add_argument('config', help='train config file path')
    parser.add_argument('--work-dir', help='the dir to save logs and models')
    parser.add_argument(
        '--resume',
        nargs='?',
        type=str,
        const='auto',
        help='resume from the given checkpoint, or from the latest '
        'checkpoint in the work dir when no path is given')
    parser.add_argument(
        '--amp', action='store_true', help='enable mixed precision training')
    parser.add_argument(
        '--check-data',
        action='store_true',
        help='read every training and validation file first (as '
        'tools/misc/check_dataset.py) and exit 1 on any fault; also '
        '`check_data = True` in the config')
    parser.add_argument(
        '--on-data-error',
        choices=['raise', 'skip'],
        help='a training file that cannot be loaded: stop naming it '
        '(raise, the default) or skip the sample, counted and logged; '
        'default: the config\'s checked_dataset.on_error')
    parser.add_argument(
        '--cfg-options',
        nargs='+',
        action=DictAction,
        help='override settings of the config, key=value pairs')
    parser.add_argument(
        '--launcher',
        choices=['none', 'pytorch', 'slurm', 'mpi'],
        default='none',
        help='job launcher')
    parser.add_argument('--local_rank', '--local-rank', type=int, default=0)
    args = parser.parse_args()
    if 'LOCAL_RANK' not in os.environ:
        os.environ['LOCAL_RANK'] = str(args.local_rank)
    return args


def main() -> None:
    args = parse_args()
    if not osp.isfile(args.config):
        # one line and exit 2, as argparse reports a bad argument
        print(
            f'train.py: error: config file not found: {args.config}',
            file=sys.stderr)
        sys.exit(2)
    cfg = load_config(args.config)
    cfg.launcher = args.launcher
    if args.cfg_options is not None:
        cfg.merge_from_dict(args.cfg_options)

    if args.work_dir is not None:
        cfg.work_dir = args.work_dir
    elif cfg.get('work_dir', None) is None:
        cfg.work_dir = osp.join('./work_dirs',
                                osp.splitext(osp.basename(args.config))[0])
    if args.amp:
        enable_amp(cfg)
    if args.resume == 'auto':
        cfg.resume = True
        cfg.load_from = None
    elif args.resume is not None:
        cfg.resume = True
        cfg.load_from = args.resume

    if args.check_data or cfg.get('check_data', False):
        if not check_before_run(cfg):
            sys.exit(1)

    add_rng_state_hook(cfg)
    setup_cpu_distributed(cfg, args.launcher)
    if 'runner_type' in cfg:
        runner = RUNNERS.build(cfg)
    else:
        runner = Runner.from_cfg(cfg)
    guard_runner_data(runner, args.on_data_error)
    runner.train()


if __name__ == '__main__':
    main()
