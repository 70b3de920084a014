"""ZeroShotClassCheckHook hands the test / val dataset's classes to the
model's check_classes before the loop starts."""
from types import SimpleNamespace

import pytest

from mmlocat.engine import ZeroShotClassCheckHook


class _Model:

    def __init__(self):
        self.seen = []

    def check_classes(self, classes):
        self.seen.append(list(classes))
        if classes[0] != 'cat':
            raise ValueError('text embeddings do not match the dataset')


def _runner(model, classes):
    loader = SimpleNamespace(
        dataset=SimpleNamespace(metainfo=dict(classes=classes)))
    return SimpleNamespace(
        model=model, test_dataloader=loader, val_dataloader=loader)


def test_checks_test_and_val_classes():
    model = _Model()
    hook = ZeroShotClassCheckHook()
    hook.before_test(_runner(model, ('cat', 'dog')))
    hook.before_val(_runner(model, ('cat', 'cow')))
    assert model.seen == [['cat', 'dog'], ['cat', 'cow']]
    with pytest.raises(ValueError, match='do not match'):
        hook.before_test(_runner(model, ('dog', 'cat')))


def test_needs_a_zero_shot_model():
    with pytest.raises(TypeError, match='check_classes'):
        ZeroShotClassCheckHook().before_test(_runner(object(), ('cat', )))
