"""Session-scoped runs shared by the end-to-end tests (issue 38).

* ``tiny_imagenet_root``: the tiny ImageNet of :func:`tiny_cls.tiny_imagenet`,
  generated once per session (it is deterministic: seed 0).
* ``cls_reference``: ``reference(**params)`` -> :class:`ClsReference`, the
  uninterrupted tiny classification run of
  :func:`tiny_cls.write_tiny_cls_config` with ``params`` (and ``procs``
  gloo processes), trained once per session for each distinct set of
  parameters, so the resume and preemption tests that compare a resumed
  run with the same reference share one training.
"""
from typing import Callable, Dict, NamedTuple, Optional, Tuple

import pytest
from tiny_cls import (probe_env, read_losses, run_train, tiny_imagenet,
                      write_tiny_cls_config)


class ClsReference(NamedTuple):
    """A finished reference run: ``config`` (the config file it trained;
    a test's interrupted and resumed runs use this very file) and
    ``losses`` (iteration -> loss, or ``(rank, iteration)`` -> loss for
    ``procs > 1``)."""
    config: str
    losses: dict


@pytest.fixture(scope='session')
def tiny_imagenet_root(tmp_path_factory) -> str:
    return tiny_imagenet(str(tmp_path_factory.mktemp('imagenet')))


@pytest.fixture(scope='session')
def cls_reference(tiny_imagenet_root, tmp_path_factory, repo_root,
                  subprocess_env) -> Callable[..., ClsReference]:
    """``reference(iters, batch_size, num_workers=0, checkpoint_interval=0,
    epochs=0, optimizer=None, random_train=True, procs=1)``: the
    uninterrupted run with these parameters on ``tiny_imagenet_root``,
    trained on first request (a subprocess, as the runs compared with it),
    then reused."""
    runs: Dict[Tuple, ClsReference] = {}

    def reference(iters: int,
                  batch_size: int,
                  num_workers: int = 0,
                  checkpoint_interval: int = 0,
                  epochs: int = 0,
                  optimizer: Optional[dict] = None,
                  random_train: bool = True,
                  procs: int = 1) -> ClsReference:
        params = dict(
            iters=iters,
            batch_size=batch_size,
            num_workers=num_workers,
            checkpoint_interval=checkpoint_interval,
            epochs=epochs,
            optimizer=optimizer,
            random_train=random_train)
        key = (repr(sorted(params.items())), procs)
        if key not in runs:
            root = tmp_path_factory.mktemp('cls_reference')
            config = write_tiny_cls_config(
                str(root / 'tiny.py'), repo_root, tiny_imagenet_root, **params)
            losses = str(root / 'ref.txt')
            run_train(
                config,
                str(root / 'ref'),
                probe_env(subprocess_env, losses=losses),
                repo_root,
                procs=procs)
            runs[key] = ClsReference(config,
                                     read_losses(losses, by_rank=procs > 1))
        return runs[key]

    return reference
