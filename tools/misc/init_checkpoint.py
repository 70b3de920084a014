"""Save a config's model as built as a checkpoint ``tools/test.py`` reads.

The model gets its ``init_cfg`` (with ``--cfg-options
model.backbone.init_cfg=None`` or a recipe that names no weights: the
hosts' random initialisation), so an evaluation-only recipe (PiB, CorLoc,
coarse segmentation) can be smoke-tested end to end without downloaded
weights; its numbers mean nothing (docs/tools.md, "Smoke trials")::

    python tools/misc/init_checkpoint.py \
        configs/last/corloc_dino-s_voc07.py work/init.pth
    python tools/test.py configs/last/corloc_dino-s_voc07.py work/init.pth \
        --data-root data/tiny \
        --cfg-options test_dataloader.dataset.expected_num_images=None
"""
import argparse

from mmengine.registry import MODELS, init_default_scope

import mmlocat  # noqa: F401  (registry node)
from mmlocat.utils.checkpoint_io import run_cli, save_checkpoint
from mmlocat.utils.launch import (add_cfg_options, add_data_root_option,
                                  apply_data_root, load_config,
                                  merge_cfg_options)
from mmlocat.utils.output_guard import refuse_output_over_input


def parse_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('config', help='config file')
    parser.add_argument('out', help='output checkpoint (.pth)')
    add_data_root_option(parser)
    add_cfg_options(parser)
    return parser.parse_args(argv)


def main(argv=None) -> None:
    args = parse_args(argv)
    refuse_output_over_input(dict(OUT=args.out), dict(CONFIG=args.config))
    cfg = load_config(args.config)
    # a model may read data files when built (text-embedding files); as
    # tools/train.py, --cfg-options come after and are not moved
    apply_data_root(cfg, args.data_root)
    merge_cfg_options(cfg, args.cfg_options, args.cfg_new_keys)
    init_default_scope(cfg.get('default_scope', 'mmengine'))
    model = MODELS.build(cfg.model)
    model.init_weights()
    save_checkpoint(
        model.state_dict(),
        args.out,
        meta=dict(converter='init_checkpoint', config=args.config))
    print(f'{args.out}: {len(model.state_dict())} tensors of '
          f'{type(model).__name__} as built (not trained)')


if __name__ == '__main__':
    run_cli('init_checkpoint', main)
