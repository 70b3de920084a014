"""The loader front-end of the tools and APIs
(:func:`mmlocat.utils.pretrained.load_model_weights`), on a tiny real
mmpretrain classifier with a LocAtViT backbone (random init): whole model
or backbone, ``module.`` / ``state_dict`` wrappers, strict errors naming
the keys, the checkpoint's ``meta`` and one read of the file."""
import os

import pytest
import torch
from helpers.tiny_archs import tiny_vit
from mmengine.registry import init_default_scope
from mmpretrain.registry import MODELS

from mmlocat.utils import checkpoint_io
from mmlocat.utils.checkpoint_io import read_state_dict
from mmlocat.utils.pretrained import ModelCheckpoint, load_model_weights

ARCH = tiny_vit(num_layers=1)
META = dict(dataset_meta=dict(classes=['a', 'b', 'c']), note='kept')


class Lines:
    """A logger that keeps what it is told."""

    def __init__(self):
        self.lines = []

    def info(self, message):
        self.lines.append(message)

    warning = info


HEAD = dict(type='LinearClsHead', num_classes=3, in_channels=32)


def classifier(seed: int, head: dict = HEAD, **backbone):
    init_default_scope('mmpretrain')
    torch.manual_seed(seed)
    return MODELS.build(
        dict(
            type='ImageClassifier',
            backbone=dict(
                type='mmlocat.LocAtViT',
                arch=ARCH,
                img_size=32,
                patch_size=8,
                **backbone),
            head=head))


def save(tmp_path, obj, name='ckpt.pth') -> str:
    path = str(tmp_path / name)
    torch.save(obj, path)
    return path


def same(a: dict, b: dict) -> bool:
    return a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


def part(state_dict: dict, prefix: str) -> dict:
    return {
        k[len(prefix):]: v
        for k, v in state_dict.items() if k.startswith(prefix)
    }


def test_whole_model_checkpoint_loads_the_model_and_gives_its_meta(tmp_path):
    src, dst = classifier(1), classifier(2)
    path = save(tmp_path, dict(state_dict=src.state_dict(), meta=META))
    loaded = load_model_weights(dst, path, logger=Lines())
    assert loaded.part == 'model'
    assert loaded.report.missing == [] and loaded.report.unexpected == []
    assert same(dst.state_dict(), src.state_dict())
    assert loaded.meta == META  # no second read for dataset_meta & co.


@pytest.mark.parametrize('layout', ['prefixed', 'bare'])
def test_backbone_file_loads_the_backbone_only_where_accepted(
        layout, tmp_path):
    src, dst = classifier(1), classifier(2)
    backbone = part(src.state_dict(), 'backbone.')
    if layout == 'prefixed':  # what mmlocat's converters write
        backbone = {'backbone.' + k: v for k, v in backbone.items()}
    path = save(tmp_path, dict(state_dict=backbone, meta={}))
    head_before = part(dst.state_dict(), 'head.')
    # a test / inference run needs the whole model
    with pytest.raises(RuntimeError, match='missing keys') as err:
        load_model_weights(dst, path, logger=Lines())
    if layout == 'prefixed':  # only the head is missing, by name
        assert 'missing keys (2): [head.fc.weight, head.fc.bias]' in str(
            err.value)
    loaded = load_model_weights(
        dst, path, accept_backbone=True, logger=Lines())
    assert loaded.part == 'backbone'
    assert same(dst.backbone.state_dict(), src.backbone.state_dict())
    assert same(part(dst.state_dict(), 'head.'), head_before)
    # a whole-model file is still loaded whole where a backbone is accepted
    whole = save(tmp_path, dict(state_dict=src.state_dict()), 'whole.pth')
    assert load_model_weights(
        classifier(3), whole, accept_backbone=True,
        logger=Lines()).part == 'model'


@pytest.mark.parametrize(
    'wrap', [
        lambda sd: dict(state_dict={
            'module.' + k: v
            for k, v in sd.items()
        }),
        lambda sd: {
            'module.' + k: v
            for k, v in sd.items()
        },
        lambda sd: dict(model=dict(state_dict=sd)),
        lambda sd: dict(module=sd, meta=META),
    ],
    ids=['state_dict+module.', 'module.', 'model', 'module'])
def test_wrappers_are_unwrapped(wrap, tmp_path):
    src, dst = classifier(1), classifier(2)
    path = save(tmp_path, wrap(src.state_dict()))
    assert load_model_weights(dst, path, logger=Lines()).part == 'model'
    assert same(dst.state_dict(), src.state_dict())


def test_missing_and_unexpected_keys_are_named(tmp_path):
    src = classifier(1)
    state = src.state_dict()
    del state['head.fc.bias']
    state['head.extra.weight'] = torch.zeros(2)
    path = save(tmp_path, dict(state_dict=state))
    with pytest.raises(RuntimeError) as err:
        load_model_weights(
            classifier(2),
            path,
            partial_option='--allow-partial-checkpoint',
            logger=Lines())
    message = str(err.value)
    assert 'head.fc.bias' in message and 'head.extra.weight' in message
    assert message.endswith('pass --allow-partial-checkpoint to use it '
                            'anyway')
    # strict=False: reported, the rest loaded
    dst = classifier(2)
    report = load_model_weights(dst, path, strict=False, logger=Lines()).report
    assert report.missing == ['head.fc.bias']
    assert report.unexpected == ['head.extra.weight']
    assert torch.equal(dst.head.fc.weight, src.head.fc.weight)


def test_other_shape_is_refused_or_let_through_when_not_strict(tmp_path):
    src = classifier(1)
    state = src.state_dict()
    state['backbone.cls_token'] = torch.zeros(1, 1, 48)  # a wider arch
    path = save(tmp_path, state)
    with pytest.raises(RuntimeError, match='another shape'):
        load_model_weights(classifier(2), path, logger=Lines())
    logger = Lines()
    loaded = load_model_weights(
        classifier(2), path, strict=False, logger=logger)
    assert loaded.report is None
    assert any('strict=False: ' in line and 'another shape' in line
               for line in logger.lines)


def test_parts_the_config_does_not_build_are_left_out(tmp_path):
    """A checkpoint of a model with the final norm, loaded into one built
    with ``final_norm=False``: the backbone's ``expected_unused_keys()``
    (``ln1``) is left out with one line; any other extra key still
    raises."""
    src = classifier(1)
    path = save(tmp_path, dict(state_dict=src.state_dict()))
    dst = classifier(2, final_norm=False)
    logger = Lines()
    load_model_weights(dst, path, logger=logger)
    assert any('backbone.ln1.weight' in line and 'final_norm=False' in line
               for line in logger.lines)
    assert same(
        part(dst.state_dict(), 'head.'), part(src.state_dict(), 'head.'))
    state = src.state_dict()
    state['backbone.ln9.weight'] = torch.ones(32)
    with pytest.raises(
            RuntimeError,
            match=r'unexpected keys \(1\): '
            r'\[backbone\.ln9\.weight\]'):
        load_model_weights(
            classifier(2, final_norm=False),
            save(tmp_path, state, 'extra.pth'),
            logger=Lines())


def test_a_part_the_model_does_not_build_is_left_out(tmp_path):
    """A classifier's checkpoint under a head-less model (the coarse
    segmentation configs test one with ``PatchScoreClassifier``): the
    ``head`` is left out with one line; a model that builds a head still
    refuses an extra key in it."""
    src = classifier(1)
    path = save(tmp_path, dict(state_dict=src.state_dict()))
    dst = classifier(2, head=None)
    logger = Lines()
    load_model_weights(dst, path, logger=logger)
    assert any('head: ImageClassifier builds no head' in line
               and 'head.fc.bias' in line for line in logger.lines)
    assert same(dst.state_dict(), {
        k: v
        for k, v in src.state_dict().items() if not k.startswith('head.')
    })
    state = src.state_dict()
    state['head.extra.weight'] = torch.zeros(2)
    with pytest.raises(RuntimeError, match='head.extra.weight'):
        load_model_weights(
            classifier(2), save(tmp_path, state, 'extra.pth'), logger=Lines())


def test_the_file_is_read_once(tmp_path, monkeypatch):
    """Every read goes through checkpoint_io.read_checkpoint; the file is
    removed right after the first, so a second read of any kind (mmengine,
    torch.load, our reader) would fail."""
    src, dst = classifier(1), classifier(2)
    path = save(tmp_path, dict(state_dict=src.state_dict(), meta=META))
    reads = []
    read = checkpoint_io.read_checkpoint

    def read_then_remove(source, *args, **kwargs):
        reads.append(source)
        obj = read(source, *args, **kwargs)
        os.remove(source)
        return obj

    monkeypatch.setattr(checkpoint_io, 'read_checkpoint', read_then_remove)
    loaded = load_model_weights(dst, path, logger=Lines())
    assert reads == [path] and not os.path.exists(path)
    assert same(dst.state_dict(), src.state_dict())
    assert loaded.meta == META


def test_a_checkpoint_read_first_is_not_read_again(tmp_path):
    """``tools/infer.py`` reads before it builds: a bad file is named
    before anything is built, and loading then reads nothing."""
    src, dst = classifier(1), classifier(2)
    path = save(tmp_path, dict(state_dict=src.state_dict()))
    read = ModelCheckpoint.read(path)
    os.remove(path)
    load_model_weights(dst, read, logger=Lines())
    assert same(dst.state_dict(), src.state_dict())


@pytest.mark.parametrize('content', [b'', b'not a checkpoint\n'])
def test_bad_file_gets_the_readers_error(content, tmp_path):
    path = tmp_path / 'bad.pth'
    path.write_bytes(content)
    with pytest.raises(ValueError) as want:
        read_state_dict(str(path))
    with pytest.raises(ValueError) as got:
        load_model_weights(classifier(0), str(path), logger=Lines())
    assert str(got.value) == str(want.value)


def test_non_finite_weights_are_refused(tmp_path):
    state = classifier(1).state_dict()
    state['head.fc.weight'][0, 0] = float('nan')
    path = save(tmp_path, state)
    with pytest.raises(ValueError, match='NaN/inf'):
        load_model_weights(classifier(2), path, logger=Lines())
