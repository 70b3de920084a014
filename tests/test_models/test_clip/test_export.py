"""export_image_tower: trained CLIPContrastive checkpoint -> backbone file
(the main path runs in tests/test_e2e/test_lastclip_e2e.py)."""
import pytest
import torch
from mmengine.config import Config

from mmlocat.models.clip.export import export_image_tower
from mmlocat.utils.checkpoint_io import save_checkpoint

TRAINED = dict(
    type='mmlocat.CLIPContrastive',
    image_encoder=dict(type='mmlocat.CLIPViT', arch='b', init_cfg=None),
    text_encoder=dict(model_name='ViT-B-16-quickgelu'),
    lock_text=True)


def _checkpoint(model=TRAINED, **extra):
    cfg = Config(dict(model=model, custom_imports=dict(imports=['nowhere'])))
    state = {
        'image_encoder.proj': torch.ones(2, 2),
        'text_encoder.model.ln_final.weight': torch.ones(2),
        'logit_scale': torch.tensor(1.)
    }
    return dict(state_dict=state, meta=dict(cfg=cfg.pretty_text, **extra))


def test_keys_meta_and_provenance(tmp_path):
    # the tower started from a converted CLIP whose record is copied
    init = str(tmp_path / 'clip.pth')
    save_checkpoint(
        {'backbone.proj': torch.zeros(2, 2)},
        init,
        meta=dict(
            clip=dict(
                name='ViT-B-16-quickgelu', act='quick_gelu', sha256='ab')))
    model = dict(TRAINED)
    model['image_encoder'] = dict(
        TRAINED['image_encoder'],
        init_cfg=dict(type='Pretrained', checkpoint=init))
    state, meta = export_image_tower(_checkpoint(model), 'run/epoch_10.pth')
    assert list(state) == ['backbone.proj']
    assert meta['clip'] == dict(
        name='ViT-B-16-quickgelu', act='quick_gelu', sha256='ab')
    assert meta['lastclip']['lock_text'] is True
    # a fine-tuned text tower: the record names the checkpoint instead
    model['lock_text'] = False
    _, meta = export_image_tower(_checkpoint(model), 'run/epoch_10.pth')
    assert meta['clip'] == dict(act='quick_gelu', name='lastclip:epoch_10.pth')


def test_errors():
    with pytest.raises(ValueError, match=r"no training config in meta"):
        export_image_tower(dict(state_dict={}, meta={}), 'x.pth')
    with pytest.raises(ValueError, match='not mmlocat.CLIPContrastive'):
        export_image_tower(_checkpoint(dict(type='ImageClassifier')), 'x.pth')
    with pytest.raises(ValueError, match='pass --act'):
        export_image_tower(_checkpoint(), 'x.pth')
    state, meta = export_image_tower(_checkpoint(), 'x.pth', act='gelu')
    assert meta['clip']['act'] == 'gelu'
    empty = _checkpoint()
    empty['state_dict'] = {'logit_scale': torch.tensor(1.)}
    with pytest.raises(ValueError, match=r'no image_encoder\.\* weights'):
        export_image_tower(empty, 'x.pth', act='gelu')
