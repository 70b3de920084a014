"""The model-zoo metafiles of configs/locat and configs/last are well formed,
list every shipped config of their folder, and mark every result as the
paper's."""
import glob
import os.path as osp

import pytest
import yaml

REPO = osp.dirname(osp.dirname(osp.dirname(osp.abspath(__file__))))
FOLDERS = ('locat', 'last')


def load(folder):
    with open(osp.join(REPO, 'configs', folder, 'metafile.yml')) as f:
        return yaml.safe_load(f)


@pytest.mark.parametrize('folder', FOLDERS)
def test_metafile_structure(folder):
    meta = load(folder)
    collections = {c['Name'] for c in meta['Collections']}
    assert collections
    for coll in meta['Collections']:
        assert coll['Paper']['URL'].startswith('https://arxiv.org/abs/')
        assert osp.isfile(osp.join(REPO, coll['README']))
    names = [m['Name'] for m in meta['Models']]
    assert len(names) == len(set(names))
    for model in meta['Models']:
        assert model['In Collection'] in collections, model['Name']
        config = osp.join(REPO, model['Config'])
        assert osp.isfile(config), model['Config']
        assert osp.basename(config)[:-3] == model['Name']
        assert isinstance(model['Metadata'], dict)
        assert model['Metadata']['Training Data']
        assert not model.get('Weights')  # nothing is hosted
        for result in model.get('Results') or []:
            assert result['Task'] and result['Dataset']
            assert result['Metrics']
            assert all(
                isinstance(v, (int, float))
                for v in result['Metrics'].values())
            assert 'paper' in result['Note'] and 'not reproduced' in result[
                'Note']


@pytest.mark.parametrize('folder', FOLDERS)
def test_every_config_is_listed_and_documented(folder):
    listed = {m['Config'] for m in load(folder)['Models']}
    shipped = {
        osp.relpath(p, REPO)
        for p in glob.glob(osp.join(REPO, 'configs', folder, '*.py'))
    }
    assert shipped - listed == set()
    with open(osp.join(REPO, 'configs', folder, 'README.md')) as f:
        readme = f.read()
    for config in shipped:
        assert f'({osp.basename(config)})' in readme.replace('./', ''), config


def test_paper_numbers_match_the_readme_tables():
    """The probe and classification numbers the LocAtViT paper reports
    (https://arxiv.org/abs/2603.04892), as configs/locat/README.md lists
    them."""
    results = {
        m['Name']: m['Results'][0]['Metrics']
        for m in load('locat')['Models'] if m.get('Results')
    }
    assert results['probe_locat-t_ade20k'] == {'mIoU': 23.47}
    assert results['probe_vit-b_pascal-context-59'] == {'mIoU': 43.10}
    assert results['probe_locat-b_coco-stuff164k'] == {'mIoU': 33.62}
    assert results['locat-b_8xb128_in1k'] == {'Top 1 Accuracy': 82.31}
    assert not any(name.startswith('upernet') for name in results)
