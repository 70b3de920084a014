"""The class files travel with the checkpoint
(mmlocat.utils.records.check_class_files on the files
mmlocat.datasets.class_file_record.py lists), on a tiny F-ViT built from the
shipped config; the hook is tested in
tests/test_engine/test_record_hook.py, the tool paths in
tests/test_e2e/test_ovd_e2e.py."""
import json
import logging
from types import SimpleNamespace

import numpy as np
import pytest
import torch
from helpers.fvit import EMBED, build_detector, tiny_fvit_cfg, write_embeddings
from mmengine.logging import MMLogger

from mmlocat.datasets.class_file_record import (class_file_record,
                                                model_class_files)
from mmlocat.utils.records import (CLASS_FILES_KEY, check_class_files,
                                   file_sha256, rows_sha256)

NAMES = ['cat', 'dog', 'remote control']
EMB = 'roi_head.bbox_head.text_embeddings'
BASE = 'roi_head.bbox_head.base_class_names'


def _model(emb, base=None, from_file=False):
    cfg = tiny_fvit_cfg(emb, NAMES, base_class_names=base)
    if from_file:  # the head's classes are the file's (OV-LVIS configs)
        cfg['roi_head']['bbox_head']['class_names'] = None
    return build_detector(cfg)


def _base_file(path, names):
    path.write_text(json.dumps(names))
    return str(path)


def _checkpoint(path, meta):
    torch.save(dict(state_dict={}, meta=meta), str(path))
    return str(path)


def _logged(call):
    """``call()``'s result and the ``(level, message)`` records it logged
    to the current logger."""
    messages = []
    handler = logging.Handler()
    handler.emit = lambda r: messages.append((r.levelno, r.getMessage()))
    logger = MMLogger.get_current_instance()
    logger.addHandler(handler)
    try:
        return call(), messages
    finally:
        logger.removeHandler(handler)


@pytest.fixture
def trained(tmp_path):
    """A model, its files and a checkpoint recording them."""
    emb = write_embeddings(tmp_path / 'emb.npy', NAMES, seed=0)
    base = _base_file(tmp_path / 'emb.base.json', NAMES[:2])
    model = _model(emb, base)
    record = class_file_record(model)
    ckpt = _checkpoint(tmp_path / 'epoch_1.pth', {CLASS_FILES_KEY: record})
    return SimpleNamespace(emb=emb, base=base, record=record, ckpt=ckpt)


def test_record_names_every_file_with_its_hash_and_rows(trained):
    assert trained.record == {
        BASE:
        dict(
            file=trained.base,
            sha256=file_sha256(trained.base),
            names=['cat', 'dog']),
        EMB:
        dict(
            file=trained.emb,
            sha256=file_sha256(trained.emb),
            names=NAMES + ['background']),
    }


def test_the_recorded_files_pass(trained):
    assert check_class_files(
        model_class_files(_model(trained.emb, trained.base)),
        trained.ckpt) == []


def test_regenerated_values_are_refused_unless_allowed(trained, tmp_path):
    write_embeddings(trained.emb, NAMES, seed=1)  # same names, other rows
    model = _model(trained.emb, trained.base)
    with pytest.raises(ValueError) as err:
        check_class_files(model_class_files(model), trained.ckpt)
    then = trained.record[EMB]['sha256']
    now = file_sha256(trained.emb)
    assert str(err.value) == (
        f"the class files are not the checkpoint's: {trained.ckpt} records "
        f'{EMB} {trained.emb} (sha256 {then}) but the model reads '
        f'{trained.emb} (sha256 {now}): the same names in the same order '
        'with other values (regenerated with another CLIP, prompts or '
        'weights?). Test with the files the checkpoint records, or pass '
        '--allow-class-file-change to evaluate with the new ones')
    problems, messages = _logged(lambda: check_class_files(
        model_class_files(model), trained.ckpt, allow_change=True))
    assert len(problems) == 1 and then in problems[0] and now in problems[0]
    assert (logging.WARNING, 'class files changed '
            f'(--allow-class-file-change): {problems[0]}') in messages


def test_reordered_other_classes_and_base_are_named(trained, tmp_path):
    # the head reads its classes from the file: a reordered file builds
    write_embeddings(trained.emb, ['dog', 'cat', 'remote control'])
    with pytest.raises(
            ValueError,
            match=r"the same rows, named differently: the same names in "
            r"another order \(first difference at row 0: 'dog' now, 'cat' in "
            r"training\)"):
        check_class_files(
            model_class_files(
                _model(trained.emb, trained.base, from_file=True)),
            trained.ckpt)
    write_embeddings(trained.emb, ['cat', 'dog', 'tv'], seed=3)
    with pytest.raises(
            ValueError,
            match=r"other names: 4 now, 4 in training; new \['tv'\], gone "
            r"\['remote control'\]"):
        check_class_files(
            model_class_files(
                _model(trained.emb, trained.base, from_file=True)),
            trained.ckpt)
    write_embeddings(trained.emb, NAMES, seed=0)  # the training file again
    other_base = _base_file(tmp_path / 'other.base.json', ['cat'])
    with pytest.raises(
            ValueError,
            match=rf'records {BASE} .*emb\.base\.json \(sha256 '
            rf'{trained.record[BASE]["sha256"]}\) but the model reads '
            r".*other\.base\.json .*new \[\], gone \['dog'\]"):
        check_class_files(
            model_class_files(_model(trained.emb, other_base)), trained.ckpt)
    # no base file now (every class base): the record's file is missing
    with pytest.raises(
            ValueError, match=f'records {BASE} .* the model reads none'):
        check_class_files(model_class_files(_model(trained.emb)), trained.ckpt)


def test_checkpoints_without_a_record(trained, tmp_path):
    old = _checkpoint(tmp_path / 'old.pth', dict(epoch=3))
    problems, messages = _logged(
        lambda: check_class_files(model_class_files(_model(trained.emb)), old))
    assert problems == []
    assert (logging.INFO,
            f'class files: {old} records no class files (trained '
            f'before mmlocat recorded it, or converted): {trained.emb} used '
            'as given') in messages
    # converted by clipself_fvit2mmlocat.py: its record of F-ViT's rows
    rows = np.load(trained.emb).astype(np.float32)
    clipself = dict(
        classes=NAMES,
        class_embeddings=dict(
            shape=list(rows.shape),
            sha256=rows_sha256(torch.from_numpy(rows))))
    converted = _checkpoint(tmp_path / 'fvit.pth',
                            dict(clipself_fvit=clipself))
    assert check_class_files(
        model_class_files(_model(trained.emb)), converted) == []
    write_embeddings(trained.emb, NAMES, seed=2)
    with pytest.raises(ValueError) as err:
        check_class_files(model_class_files(_model(trained.emb)), converted)
    found = rows_sha256(
        torch.from_numpy(np.load(trained.emb).astype(np.float32)))
    assert (
        f'{converted} was converted from an F-ViT checkpoint whose class '
        f'embeddings [4, {EMBED}] have sha256 '
        f'{clipself["class_embeddings"]["sha256"]} (rows as float32) but '
        f'the model reads {EMB} {trained.emb} whose rows have sha256 '
        f'{found}: the same names in the same order with other values') in str(
            err.value)


def test_a_converted_record_covers_only_its_files(trained, tmp_path):
    """clipself_fvit2mmlocat.py records the class embeddings it saw; a
    base-class file the config adds is used as given for a converted
    checkpoint, refused for a trained one (training records every file)."""
    only_emb = {EMB: trained.record[EMB]}
    converted = _checkpoint(
        tmp_path / 'converted.pth',
        dict(converter='clipself_fvit2mmlocat', **{CLASS_FILES_KEY: only_emb}))
    model = _model(trained.emb, trained.base)
    problems, messages = _logged(
        lambda: check_class_files(model_class_files(model), converted))
    assert problems == []
    assert (logging.INFO,
            f'class files: {converted} (converted by clipself_fvit2mmlocat) '
            f'records no {BASE}: {trained.base} used as given') in messages
    trained_only_emb = _checkpoint(tmp_path / 'trained.pth',
                                   {CLASS_FILES_KEY: only_emb})
    with pytest.raises(
            ValueError,
            match=rf'the model reads {BASE} .*emb\.base\.json \(sha256 '
            rf'{trained.record[BASE]["sha256"]}\), which .*trained\.pth '
            'does not record'):
        check_class_files(model_class_files(model), trained_only_emb)
    # the embedding file the converter recorded is still compared
    write_embeddings(trained.emb, NAMES, seed=5)
    with pytest.raises(
            ValueError,
            match=rf'{converted} records {EMB} .* the same names in the '
            'same order with other values'):
        check_class_files(
            model_class_files(_model(trained.emb, trained.base)), converted)
