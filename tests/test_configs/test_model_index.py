"""The root model-index.yml and its metafiles in the OpenMMLab format.

Parsed with the ``model-index`` package (``modelindex``, installed with
mmpretrain) and with yaml: one Collection per metafile (Paper, Code), every
referenced file exists, every shipped model config is a Model with
Parameters and FLOPs, converted weights say where from, results are the
papers'. Two counts are redone: the plain ViT-T's Parameters equal the
installed mmpretrain metafile's DeiT-tiny entry (the same network) and its
FLOPs agree within 1 %; LocAtViT-T's numbers equal a fresh
``get_flops.py --check`` count.
"""
import glob
import os.path as osp
import re

import pytest
import yaml
from helpers.harness import run_tool

import mmlocat

REPO = osp.dirname(osp.dirname(osp.dirname(osp.abspath(__file__))))
INDEX = osp.join(REPO, 'model-index.yml')
# recipes on tiny embedded data, not models of the zoo
NOT_MODELS = ('configs/demo/', 'configs/_base_/')
# Model names must be unique in the whole index (mim finds models by name).
# Known clash: the plain-ViT-B UperNet twin of the LocAt recipe and of the
# LaSt recipe share a config basename; renaming configs is left to their
# owners, and no new clash may appear.
KNOWN_CLASHES = {
    'upernet_vit-b_ade20k', 'upernet_vit-b_pascal-context-59',
    'upernet_vit-b_coco-stuff164k'
}


def _load(path: str) -> dict:
    with open(path) as f:
        return yaml.safe_load(f)


def metafiles():
    return _load(INDEX)['Import']


def all_models():
    return [(path, m) for path in metafiles()
            for m in _load(osp.join(REPO, path))['Models']]


def test_index_lists_every_metafile():
    listed = metafiles()
    on_disk = sorted(
        osp.relpath(p, REPO)
        for p in glob.glob(osp.join(REPO, 'configs', '*', 'metafile.yml')))
    assert sorted(listed) == on_disk


def test_modelindex_package_parses_without_errors():
    modelindex = pytest.importorskip('modelindex')
    index = modelindex.load(INDEX)
    # OpenMMLab metafiles give README paths from the repository root (as
    # mmpretrain's own index does, which the package flags the same way);
    # the package resolves them from the metafile's folder. Their existence
    # is checked from the root below; every other check must pass.
    errors = [
        e for e in index.check(silent=True) if not re.search(
            r'Path to README file configs/\w+/README\.md is '
            'not a valid file', e)
    ]
    assert errors == []
    # the root index merges each Collection into its Models (Paper, Code)
    models = list(index.models)
    assert len(models) == len(all_models())
    for model in models:
        full = model.full_model
        assert full.config and full.in_collection, full.name
        assert full.paper['URL'].startswith('https://arxiv.org/abs/')
        assert full.code['Version'] == f'v{mmlocat.__version__}'


@pytest.mark.parametrize('path', metafiles())
def test_one_collection_with_paper_and_code(path):
    meta = _load(osp.join(REPO, path))
    collection, = meta['Collections']
    assert collection['Paper']['Title']
    assert collection['Paper']['URL'].startswith('https://arxiv.org/abs/')
    assert osp.isfile(osp.join(REPO, collection['README']))
    code = collection['Code']
    assert osp.isfile(osp.join(REPO, code['URL'])), code
    assert code['Version'] == f'v{mmlocat.__version__}'
    assert {m['In Collection'] for m in meta['Models']} == {collection['Name']}


def test_every_model_has_counts_and_honest_sources():
    names = []
    for path, model in all_models():
        names.append(model['Name'])
        assert osp.isfile(osp.join(REPO, model['Config'])), model['Config']
        assert osp.basename(model['Config'])[:-3] == model['Name']
        meta = model['Metadata']
        for key in ('Parameters', 'FLOPs'):
            assert isinstance(meta[key],
                              int) and meta[key] > 0, (model['Name'], key)
        assert re.fullmatch(r'\d+x\d+', meta['FLOPs Input']), model['Name']
        assert meta.get('Counted', 'backbone + neck') == 'backbone + neck'
        assert not model.get('Weights'), model['Name']  # nothing is hosted
        source = model.get('Converted From')
        if source is not None:
            assert set(source) == {'Weights', 'Code'}, model['Name']
            assert all(v.startswith('https://') for v in source.values())
        for result in model.get('Results') or []:
            assert 'paper' in result['Note'], model['Name']
    clashes = {n for n in names if names.count(n) > 1}
    assert clashes <= KNOWN_CLASHES, clashes - KNOWN_CLASHES


def test_every_shipped_model_config_is_listed():
    listed = {m['Config'] for _, m in all_models()}
    shipped = {
        osp.relpath(p, REPO)
        for p in glob.glob(osp.join(REPO, 'configs', '*', '*.py'))
    }
    shipped = {p for p in shipped if not p.startswith(NOT_MODELS)}
    assert shipped - listed == set()
    assert listed - shipped == set()


def _model(name: str) -> dict:
    return next(m for _, m in all_models() if m['Name'] == name)


def test_vit_t_counts_match_mmpretrain_deit_tiny():
    """Same network as mmpretrain's DeiT-tiny (ViT-T/16, 1000 classes)."""
    mmpretrain = pytest.importorskip('mmpretrain')
    deit = osp.join(
        osp.dirname(mmpretrain.__file__), '.mim', 'configs', 'deit',
        'metafile.yml')
    reference = next(
        m for m in _load(deit)['Models']
        if m['Name'] == 'deit-tiny_4xb256_in1k')['Metadata']
    ours = _model('vit-t_8xb128_in1k')['Metadata']
    assert ours['FLOPs Input'] == '224x224'
    assert ours['Parameters'] == reference['Parameters']
    # mmengine's counter also counts norms and activations
    assert abs(ours['FLOPs'] / reference['FLOPs'] - 1) < 0.01


@pytest.mark.e2e
def test_stated_counts_are_a_fresh_count():
    tool = osp.join(REPO, 'tools', 'analysis_tools', 'get_flops.py')
    proc = run_tool(tool, '--metafiles',
                    osp.join(REPO, 'configs', 'locat',
                             'metafile.yml'), '--check', '--only',
                    'locat-t_8xb128_in1k', 'probe_locat-t_ade20k')
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    assert proc.stdout.count("'Parameters'") == 2
