"""Test (evaluate) a checkpoint with any OpenMMLab host.

The checkpoint is read once and loaded strictly by mmlocat's front-end
(:func:`mmlocat.utils.pretrained.load_model_weights`; the Runner itself
loads nothing, a config's ``load_from`` / ``resume`` are ignored): a
missing key, a key the model lacks or a shape mismatch (another arch, a
plain-ViT checkpoint under a LocAt config, a foreign state dict) stops the
run before any metric is computed, unless ``--allow-partial-checkpoint`` is
given (then they are only reported). The Runner's ``after_load_checkpoint``
hooks (e.g. an ``EMAHook``) still get the checkpoint where the Runner would
give it to them. The text-embedding files an open-vocabulary model reads
must be those it was trained with (the checkpoint's
``meta['class_files']``, see ``mmlocat.RecordHook``): a changed or
reordered file stops the run, naming both hashes, unless
``--allow-class-file-change`` is given.
``--show-dir`` switches on the host's own visualization hook (mmseg
``SegVisualizationHook``, mmdet ``DetVisualizationHook``, mmpretrain
``VisualizationHook``); ``--out`` dumps the predictions as a pickle through
mmengine's ``DumpResults``.
"""
import argparse
import os
import os.path as osp
import sys

from mmengine.config import Config, ConfigDict
from mmengine.evaluator import DumpResults
from mmengine.hooks import Hook
from mmengine.model import is_model_wrapper
from mmengine.registry import RUNNERS
from mmengine.runner import Runner

import mmlocat  # noqa: F401  (registry node)
from mmlocat.datasets.class_file_record import model_class_files
from mmlocat.utils.checkpoint_io import run_cli
from mmlocat.utils.launch import (add_cfg_options, add_data_root_option,
                                  apply_data_root, check_component_arguments,
                                  load_config, merge_cfg_options)
from mmlocat.utils.pretrained import (LoadedWeights, ModelCheckpoint,
                                      load_model_weights)
from mmlocat.utils.records import ALLOW_OPTION, check_class_files

PARTIAL_OPTION = '--allow-partial-checkpoint'


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description='Test (and eval) a model')
    parser.add_argument('config', help='test config file path')
    parser.add_argument('checkpoint', help='checkpoint file')
    parser.add_argument('--work-dir', help='the dir to save logs and metrics')
    parser.add_argument(
        '--out', help='dump predictions to this pickle file (.pkl)')
    parser.add_argument(
        '--show-dir', help='directory to write visualized predictions to')
    parser.add_argument(
        '--show', action='store_true', help='show predictions in a window')
    parser.add_argument(
        '--wait-time', type=float, default=2, help='seconds between shows')
    parser.add_argument(
        PARTIAL_OPTION,
        action='store_true',
        help='evaluate even if the checkpoint misses model keys, has keys '
        'the model lacks or tensors of another shape (they are reported; '
        'weights not loaded stay random)')
    parser.add_argument(
        ALLOW_OPTION,
        action='store_true',
        help='evaluate even if the text-embedding / class-name files differ '
        'from those the checkpoint was trained with (its '
        "meta['class_files'])")
    add_cfg_options(parser)
    add_data_root_option(parser)
    parser.add_argument(
        '--launcher',
        choices=['none', 'pytorch', 'slurm', 'mpi'],
        default='none',
        help='job launcher')
    parser.add_argument('--local_rank', '--local-rank', type=int, default=0)
    args = parser.parse_args()
    if 'LOCAL_RANK' not in os.environ:
        os.environ['LOCAL_RANK'] = str(args.local_rank)
    if args.out is not None and not args.out.endswith(('.pkl', '.pickle')):
        parser.error('--out must be a .pkl or .pickle file')
    load_from = (args.cfg_options or {}).get('load_from')
    if load_from not in (None, args.checkpoint):
        parser.error(f'--cfg-options load_from={load_from} differs from the '
                     f'checkpoint argument {args.checkpoint}; give the '
                     'checkpoint once')
    return args


def enable_visualization(cfg: Config, args: argparse.Namespace) -> None:
    """Turn on the host's visualization hook for ``--show``/``--show-dir``."""
    hook = cfg.get('default_hooks', {}).get('visualization', None)
    if hook is None:
        raise ValueError('--show/--show-dir need a `visualization` hook in '
                         '`default_hooks` of the config')
    hook_type = hook['type'].split('.')[-1]
    if hook_type == 'VisualizationHook':  # mmpretrain
        hook.update(enable=True, show=args.show, wait_time=args.wait_time)
        if args.show_dir:
            hook['out_dir'] = args.show_dir
    else:  # mmseg SegVisualizationHook / mmdet DetVisualizationHook
        hook.update(draw=True, show=args.show, wait_time=args.wait_time)
        if args.show_dir and hook_type == 'DetVisualizationHook':
            hook['test_out_dir'] = args.show_dir
        elif args.show_dir:
            cfg.visualizer['save_dir'] = args.show_dir
    cfg.default_hooks.visualization = ConfigDict(hook)


class CheckpointToHooks(Hook):
    """Give the Runner's ``after_load_checkpoint`` hooks the checkpoint
    this tool loaded, where the Runner's own ``load_from`` would (after
    every hook's ``before_run``, before testing). As in
    ``Runner.load_checkpoint`` the model gets the weights the hooks leave:
    if one changed them (mmpretrain's ``EMAHook`` swaps its copy in), the
    model is loaded again from the checkpoint in memory."""
    priority = 'LOWEST'

    def __init__(self, loaded: LoadedWeights, load) -> None:
        self.loaded = loaded
        self.load = load

    def before_run(self, runner) -> None:
        checkpoint = self.loaded.checkpoint
        # named where mmengine's load_from would name it, for the hooks'
        # messages (the Runner read its own load_from, None, when built)
        runner.cfg.load_from = checkpoint.source
        runner.call_hook(
            'after_load_checkpoint', checkpoint=checkpoint.checkpoint)
        now = ModelCheckpoint.of(checkpoint.checkpoint, checkpoint.source)
        if any(
                now.state_dict.get(k) is not v
                for k, v in checkpoint.state_dict.items()):
            self.load(now)


def main() -> None:
    args = parse_args()
    for path in (args.config, args.checkpoint):
        if not osp.isfile(path):
            # one line and exit 2, as argparse reports a bad argument
            print(f'test.py: error: file not found: {path}', file=sys.stderr)
            sys.exit(2)
    cfg = load_config(args.config)
    cfg.launcher = args.launcher
    # before --cfg-options: a path given there wins
    run_cli('test.py', lambda: apply_data_root(cfg, args.data_root))
    run_cli(
        'test.py',
        lambda: merge_cfg_options(cfg, args.cfg_options, args.cfg_new_keys))
    if args.work_dir is not None:
        cfg.work_dir = args.work_dir
    elif cfg.get('work_dir', None) is None:
        cfg.work_dir = osp.join('./work_dirs',
                                osp.splitext(osp.basename(args.config))[0])
    # loaded below, once, by the front-end: the Runner loads nothing (with
    # resume=True and no load_from it would load work_dir's latest)
    cfg.load_from = None
    cfg.resume = False
    if args.show or args.show_dir:
        enable_visualization(cfg, args)
    run_cli('test.py', lambda: check_component_arguments(cfg))

    if 'runner_type' in cfg:
        runner = RUNNERS.build(cfg)
    else:
        runner = Runner.from_cfg(cfg)
    model = runner.model.module if is_model_wrapper(
        runner.model) else runner.model

    def load(checkpoint) -> LoadedWeights:
        return load_model_weights(
            model,
            checkpoint,
            strict=not args.allow_partial_checkpoint,
            partial_option=PARTIAL_OPTION,
            logger=runner.logger)

    loaded = []

    def load_and_check():
        loaded.append(load(args.checkpoint))
        check_class_files(
            model_class_files(model),
            args.checkpoint,
            allow_change=args.allow_class_file_change,
            logger=runner.logger,
            meta=loaded[0].meta)

    run_cli('test.py', load_and_check)
    runner.register_hook(CheckpointToHooks(loaded[0], load))
    if args.out is not None:
        runner.test_evaluator.metrics.append(
            DumpResults(out_file_path=args.out))
    runner.test()


if __name__ == '__main__':
    main()
