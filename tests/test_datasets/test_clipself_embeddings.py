"""CLIPSelf's F-ViT text-embedding ``.pt`` files: reader and converter.

The files are ``torch.save``'d dicts ``{class name: (D,) tensor}`` with a
``'background'`` entry (F-ViT/datasets/embeddings/*.pt); F-ViT's head takes
the rows of its class json, in order, then the background.
"""
import hashlib
import importlib.util
import json
import os.path as osp
import sys
import zipfile

import numpy as np
import pytest
import torch
from helpers.fvit import build_detector, tiny_fvit_cfg
from helpers.harness import run_tool

from mmlocat.datasets.ov_coco import (OV_COCO_BASE_CLASSES, OV_COCO_CLASSES,
                                      OV_COCO_NOVEL_CLASSES)
from mmlocat.text import (load_text_embeddings, read_clipself_embeddings,
                          read_text_model)

TOOL = 'tools/misc/clipself_embeddings2npy.py'
# sha256 of CLIPSelf's own files (github.com/wusize/CLIPSelf, commit
# 1c7fe9c, F-ViT/datasets/; S-Lab License 1.0, non-commercial, so not
# copied here): the class jsons and the pickle (keys, storage layout; no
# float values) of embeddings/coco_with_background_evaclip_vitb_16.pt
CLIPSELF = {
    'mscoco_65_classes.json':
    '979e392a5eac1874ae4056ae34c0f5b421ab77d3b4cc139a85a92a5813f71492',
    'mscoco_seen_classes.json':
    'f287f8d36eb1adbdbc080f6690c32e5bd7c764df676316ae1975a30c06398853',
    'data.pkl':
    'fe759c8afa5ccaf0fff058654f016d69ca2b61b060a19dd8c76bdf58c84907fa',
}
D = 16


def coco80():
    from mmdet.datasets import CocoDataset
    return list(CocoDataset.METAINFO['classes'])


def clipself_file(path, names, dims=D, seed=0):
    """A file in CLIPSelf's format: unit rows keyed by name, background
    last (insertion order as in their files)."""
    gen = torch.Generator().manual_seed(seed)
    table = {
        n:
        torch.nn.functional.normalize(torch.randn(dims, generator=gen), dim=0)
        for n in list(names) + ['background']
    }
    torch.save(table, str(path))
    return table


def ovrcnn_val_file(path, names=OV_COCO_CLASSES):
    """The 65 OV-COCO categories as OVR-CNN's (and CLIPSelf's) split files
    label them: ``seen`` / ``unseen``."""
    cats = [
        dict(
            id=i + 1,
            name=n,
            split='seen' if n in OV_COCO_BASE_CLASSES else 'unseen')
        for i, n in enumerate(names)
    ]
    path.write_text(
        json.dumps(dict(images=[], annotations=[], categories=cats)))
    return str(path)


def test_rows_of_the_class_json_in_order(tmp_path):
    table = clipself_file(tmp_path / 'coco.pt', coco80())
    rows, names = read_clipself_embeddings(
        str(tmp_path / 'coco.pt'), OV_COCO_CLASSES)
    assert names == list(OV_COCO_CLASSES) + ['background']
    assert rows.shape == (66, D) and rows.dtype == np.float32
    for row, name in zip(rows, names):
        np.testing.assert_array_equal(row, table[name].numpy())
    rows, names = read_clipself_embeddings(
        str(tmp_path / 'coco.pt'), ['dog', 'cat'], background=False)
    assert names == ['dog', 'cat']
    np.testing.assert_array_equal(rows[0], table['dog'].numpy())


def test_bad_files_and_names(tmp_path):
    path = str(tmp_path / 'voc.pt')
    clipself_file(path, ['cat', 'dog'])
    with pytest.raises(
            ValueError,
            match=r"voc\.pt has no row for 1 of the 3 classes of "
            r"classes\.json: \['cow'\]"):
        read_clipself_embeddings(path, ['cat', 'cow'], 'classes.json')
    torch.save({'cat': torch.ones(4)}, path)
    with pytest.raises(ValueError, match=r"no row .*\['background'\]"):
        read_clipself_embeddings(path, ['cat'])
    torch.save({'cat': torch.ones(4), 'background': torch.ones(5)}, path)
    with pytest.raises(ValueError, match=r'widths \[4, 5\]'):
        read_clipself_embeddings(path, ['cat'])
    torch.save(torch.ones(3, 4), path)
    with pytest.raises(ValueError, match='not a CLIPSelf embedding file'):
        read_clipself_embeddings(path, ['cat'])
    torch.save({'cat': torch.ones(2, 4)}, path)
    with pytest.raises(ValueError, match='not a CLIPSelf embedding file'):
        read_clipself_embeddings(path, ['cat'])
    clipself_file(path, ['cat'])
    with pytest.raises(ValueError, match='duplicate'):
        read_clipself_embeddings(path, ['cat', 'cat'])


def _tool(repo_root):
    spec = importlib.util.spec_from_file_location('clipself_emb_tool',
                                                  osp.join(repo_root, TOOL))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.e2e
def test_converter_writes_what_the_fvit_head_reads(tmp_path, repo_root,
                                                   subprocess_env):
    src = str(tmp_path / 'coco_with_background_evaclip_vitb_16.pt')
    table = clipself_file(src, coco80())
    classes = tmp_path / 'mscoco_65_classes.json'
    classes.write_text(json.dumps(list(OV_COCO_CLASSES)))
    ann = ovrcnn_val_file(tmp_path / 'instances_val2017_all_2.json')
    out = str(tmp_path / 'emb' / 'ov-coco_eva02-clip-b16.npy')
    proc = run_tool(TOOL, src, out, '--class-names', classes, '--ann-file',
                    ann, '--model', 'EVA02-B-16')
    assert proc.returncode == 0, proc.stderr
    emb, bg, names = load_text_embeddings(out, OV_COCO_CLASSES)
    np.testing.assert_allclose(
        emb[OV_COCO_CLASSES.index('cat')], table['cat'].numpy(), atol=1e-6)
    np.testing.assert_allclose(bg, table['background'].numpy(), atol=1e-6)
    record = read_text_model(out)
    assert record['name'] == 'EVA02-B-16'
    assert record['embeddings'] == osp.basename(src)
    with open(out[:-len('.npy')] + '.base.json') as f:
        # OVR-CNN's seen / unseen labels of the annotation file
        assert json.load(f) == [
            n for n in OV_COCO_CLASSES if n not in OV_COCO_NOVEL_CLASSES
        ]
    # F-ViT's head reads it (names and order checked against its classes)
    cfg = tiny_fvit_cfg(out, OV_COCO_CLASSES)
    cfg['roi_head']['bbox_head'].update(
        fc_out_channels=D, base_class_names=out[:-len('.npy')] + '.base.json')
    cfg['backbone']['arch']['output_dims'] = D
    cfg['roi_head']['vlm_roi_extractor']['out_channels'] = D
    model = build_detector(cfg)
    assert model.roi_head.bbox_head.class_names == list(OV_COCO_CLASSES)
    assert int(model.roi_head.bbox_head.is_base.sum()) == 48 + 1


def test_converter_checks_names_against_the_dataset(tmp_path, repo_root,
                                                    monkeypatch):
    tool = _tool(repo_root)
    src = str(tmp_path / 'coco.pt')
    clipself_file(src, coco80())
    ann = ovrcnn_val_file(tmp_path / 'val.json')
    out = str(tmp_path / 'out.npy')

    def run(names, *extra):
        classes = tmp_path / 'classes.json'
        classes.write_text(json.dumps(list(names)))
        monkeypatch.setattr(
            sys, 'argv',
            ['tool', src, out, '--class-names',
             str(classes), *extra])
        tool.main()

    with pytest.raises(
            ValueError,
            match=r'classes\.json lists 64 classes, the dataset .*val\.json '
            '65'):
        run(OV_COCO_CLASSES[:-1], '--ann-file', ann)
    swapped = list(OV_COCO_CLASSES)
    swapped[2], swapped[3] = swapped[3], swapped[2]
    with pytest.raises(
            ValueError, match="differ at label 2: 'motorcycle' vs 'car'"):
        run(swapped, '--ann-file', ann)
    with pytest.raises(ValueError, match='no row for 1'):
        run(list(OV_COCO_CLASSES[:-1]) + ['unicorn'])
    base = tmp_path / 'seen.json'
    base.write_text(json.dumps(['car', 'unicorn']))
    with pytest.raises(ValueError, match=r"not in .*: \['unicorn'\]"):
        run(OV_COCO_CLASSES, '--base-class-names', str(base))
    assert not osp.exists(out)


def clipself_layout_file(path, names, dims=512, seed=0):
    """A file laid out as CLIPSelf's own: each row a column view of one
    ``(dims, N)`` float32 storage, background last."""
    gen = torch.Generator().manual_seed(seed)
    names = list(names) + ['background']
    matrix = torch.nn.functional.normalize(
        torch.randn(len(names), dims, generator=gen), dim=1).T.contiguous()
    table = {n: matrix[:, i] for i, n in enumerate(names)}
    torch.save(table, str(path))
    return table


def test_clipselfs_coco_file_layout(tmp_path):
    """CLIPSelf's COCO file with its class jsons: the 65 OV-COCO classes
    (mmdet 3's spelling and order) plus background, unit rows of EVA02-CLIP
    B/16's 512-d space; its seen list is our base. The files written here
    are CLIPSelf's byte for byte but the float values (see CLIPSELF)."""
    classes_json = tmp_path / 'mscoco_65_classes.json'
    classes_json.write_text(json.dumps(list(OV_COCO_CLASSES), indent=4))
    seen_json = tmp_path / 'mscoco_seen_classes.json'
    seen_json.write_text(json.dumps(list(OV_COCO_BASE_CLASSES), indent=4))
    src = tmp_path / 'coco_with_background_evaclip_vitb_16.pt'
    table = clipself_layout_file(src, coco80())
    with zipfile.ZipFile(src) as archive:
        pickled, = [
            archive.read(n) for n in archive.namelist()
            if n.endswith('/data.pkl')
        ]
    digests = {
        classes_json.name: hashlib.sha256(classes_json.read_bytes()),
        seen_json.name: hashlib.sha256(seen_json.read_bytes()),
        'data.pkl': hashlib.sha256(pickled),
    }
    assert {k: v.hexdigest() for k, v in digests.items()} == CLIPSELF
    with open(classes_json) as f:
        classes = json.load(f)
    with open(seen_json) as f:
        seen = json.load(f)
    assert classes == list(OV_COCO_CLASSES)
    assert seen == list(OV_COCO_BASE_CLASSES)
    rows, names = read_clipself_embeddings(
        str(src), classes, 'mscoco_65_classes.json')
    assert rows.shape == (66, 512) and names[-1] == 'background'
    np.testing.assert_allclose(np.linalg.norm(rows, axis=1), 1, atol=1e-5)
    for row, name in zip(rows, names):
        np.testing.assert_array_equal(row, table[name].numpy())
