"""What mmlocat's ``tools/train.py`` and ``tools/test.py`` do to the data.

:func:`guard_runner_data` wraps the dataset of every dataloader the runner
will build in :class:`mmlocat.CheckedDataset`, so a file that cannot be
loaded is named (path, dataset, index) in one line, and a label map of
another size than its image is refused. It changes the runner's dataloader
settings, not its config: the config dumped into the work dir, logged and
stored in the checkpoints stays as written, so the hosts' inferencers and
``tools/test.py`` read it unchanged. The config's ``checked_dataset``
dict, if any, gives the wrapper's arguments (``on_error``,
``seg_map_size``); ``on_error='skip'`` applies to the training data only.
"""
import logging
from typing import Optional

from mmengine.logging import print_log
from mmengine.runner import Runner

from mmlocat.datasets.checked_dataset import ON_ERROR, checked_dataset_cfg

__all__ = ['guard_runner_data', 'CONFIG_KEY']

#: Top-level config key holding :class:`mmlocat.CheckedDataset` arguments.
CONFIG_KEY = 'checked_dataset'

_LOADERS = (('train', '_train_dataloader'), ('val', '_val_dataloader'),
            ('test', '_test_dataloader'))


def guard_runner_data(runner: Runner, on_error: Optional[str] = None) -> None:
    """Wrap the runner's dataloader datasets in :class:`CheckedDataset`.

    Call it after building the runner and before ``train()`` / ``test()``.

    Args:
        runner: An mmengine ``Runner`` (its dataloaders not built yet).
        on_error: For the training data: ``'raise'`` or ``'skip'`` (then
            :class:`mmlocat.SkippedFilesHook` is registered). None: the
            config's ``checked_dataset.on_error``, else ``'raise'``.
    """
    options = dict(runner.cfg.get(CONFIG_KEY, None) or {})
    train_error = on_error or options.pop('on_error', 'raise')
    options.pop('on_error', None)
    if train_error not in ON_ERROR:
        raise ValueError(f'on_error must be one of {ON_ERROR}, got '
                         f'{train_error!r}')
    wrapped = []
    for split, attr in _LOADERS:
        # mmengine 0.10 keeps each loader's settings here until it builds it
        loader = getattr(runner, attr, None)
        if not isinstance(loader, dict) or not loader.get('dataset'):
            continue
        error = train_error if split == 'train' else 'raise'
        dataset = checked_dataset_cfg(
            loader['dataset'], on_error=error, **options)
        if dataset is loader['dataset']:  # the config wraps it itself
            error = dataset.get('on_error', 'raise')
        setattr(runner, attr, dict(loader, dataset=dataset))
        wrapped.append((split, error))
    hooks = [
        str(h.get('type', '')).split('.')[-1]
        for h in runner.cfg.get('custom_hooks', None) or []
    ]
    if ('train', 'skip') in wrapped and 'SkippedFilesHook' not in hooks:
        runner.register_hook(dict(type='mmlocat.SkippedFilesHook'))
    if wrapped:
        print_log(
            'data files are checked as they load (mmlocat.CheckedDataset, '
            'on_error): ' + ', '.join(f'{split} ({error})'
                                      for split, error in wrapped),
            logger='current',
            level=logging.INFO)
