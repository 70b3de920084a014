"""CLIPContrastive and its open_clip text tower, against open_clip itself.

open_clip models are built at random init from a tiny model config (nothing
is downloaded); their state dicts are saved as a user's checkpoint file and
loaded into :class:`OpenCLIPTextTower`, which must give open_clip's own
``encode_text``; the loss must be open_clip's ``ClipLoss``.
"""
import math

import open_clip
import pytest
import torch
from mmpretrain.structures import DataSample

import mmlocat  # noqa: F401  (registers the mmlocat scope)
from mmlocat.models import CLIPContrastive, OpenCLIPTextTower

EMBED = 16
MODEL_CFG = dict(
    embed_dim=EMBED,
    vision_cfg=dict(
        image_size=32, layers=1, width=32, patch_size=16, head_width=16),
    text_cfg=dict(
        context_length=12, vocab_size=49408, width=32, heads=2, layers=2))
TOWER = dict(
    type='mmlocat.CLIPViT',
    arch=dict(
        embed_dims=32,
        num_layers=2,
        num_heads=2,
        feedforward_channels=64,
        output_dims=EMBED),
    img_size=32,
    patch_size=8,
    act='gelu',
    pooling='lazy_strike',
    topk_ratio=0.5)


def _tokens(n=4, seed=0):
    tok = open_clip.tokenizer.SimpleTokenizer(context_length=12)
    words = [
        'a red star', 'a blue ring on stripes', 'a green triangle',
        'a yellow rectangle on a checkerboard', 'a cat'
    ]
    return tok([words[(i + seed) % len(words)] for i in range(n)])


def _model(**kwargs):
    cfg = dict(image_encoder=TOWER, text_encoder=dict(model_cfg=MODEL_CFG))
    cfg.update(kwargs)
    return CLIPContrastive(**cfg)


@pytest.mark.parametrize('custom_text', [False, True])
def test_text_tower_is_open_clips_encode_text(tmp_path, custom_text):
    torch.manual_seed(0)
    cfg = dict(MODEL_CFG, custom_text=custom_text)
    cls = open_clip.CustomTextCLIP if custom_text else open_clip.CLIP
    ref = cls(**{k: v for k, v in cfg.items() if k != 'custom_text'}).eval()
    path = str(tmp_path / 'open_clip.pt')
    torch.save(ref.state_dict(), path)
    tower = OpenCLIPTextTower(model_cfg=cfg, weights=path).eval()
    tower.init_weights()
    assert tower.embed_dim == EMBED
    assert not hasattr(tower.model, 'visual')
    tokens = _tokens()
    with torch.no_grad():
        torch.testing.assert_close(
            tower(tokens), ref.encode_text(tokens), rtol=0, atol=0)


def test_text_tower_from_a_model_name_is_open_clips():
    # the shipped configs name open_clip models: the tower has exactly the
    # text keys and shapes of open_clip.create_model (both on the meta
    # device: no memory, no download)
    with torch.device('meta'):
        tower = OpenCLIPTextTower(model_name='ViT-B-16-quickgelu')
        ref = open_clip.create_model(
            'ViT-B-16-quickgelu', pretrained=None, device='meta')
    assert tower.embed_dim == 512 and tower.context_length == 77
    expected = {
        k: v.shape
        for k, v in ref.state_dict().items()
        if not k.startswith('visual.') and k != 'logit_scale'
    }
    assert {
        k: v.shape
        for k, v in tower.model.state_dict().items()
    } == expected
    assert (type(tower.model.transformer.resblocks[0].mlp.gelu)
            is type(ref.transformer.resblocks[0].mlp.gelu))  # QuickGELU
    with torch.device('meta'):
        eva = OpenCLIPTextTower(model_name='EVA02-L-14-336')
    cfg = open_clip.get_model_config('EVA02-L-14-336')
    assert eva.embed_dim == cfg['embed_dim'] == 768
    assert len(
        eva.model.text.transformer.resblocks) == cfg['text_cfg']['layers']


def test_plain_clip_weights_into_custom_text_tower(tmp_path):
    # an open_clip CLIP checkpoint (text keys at the top level) loads into a
    # CustomTextCLIP tower through open_clip's own key conversion
    torch.manual_seed(1)
    ref = open_clip.CLIP(**MODEL_CFG).eval()
    path = str(tmp_path / 'clip.pt')
    torch.save({'state_dict': ref.state_dict()}, path)
    tower = OpenCLIPTextTower(
        model_cfg=dict(MODEL_CFG, custom_text=True), weights=path).eval()
    tower.init_weights()
    tokens = _tokens()
    with torch.no_grad():
        torch.testing.assert_close(tower(tokens), ref.encode_text(tokens))


def _load(path, cfg=MODEL_CFG):
    OpenCLIPTextTower(model_cfg=cfg, weights=path).init_weights()


def test_text_weights_errors(tmp_path):
    with pytest.raises(FileNotFoundError, match='nowhere.pt'):
        _load('nowhere.pt')
    wide = dict(
        MODEL_CFG, text_cfg=dict(MODEL_CFG['text_cfg'], width=48, heads=3))
    path = str(tmp_path / 'wide.pt')
    torch.save(open_clip.CLIP(**wide).state_dict(), path)
    with pytest.raises(ValueError, match='wrong shape'):
        _load(path)
    deep = dict(MODEL_CFG, text_cfg=dict(MODEL_CFG['text_cfg'], layers=3))
    torch.save(open_clip.CLIP(**deep).state_dict(), path)
    with pytest.raises(ValueError, match='unexpected'):
        _load(path)
    with pytest.raises(ValueError, match='does not know'):
        OpenCLIPTextTower(model_name='ViT-Nonexistent-99')
    with pytest.raises(ValueError, match='exactly one'):
        OpenCLIPTextTower()
    with pytest.raises(ValueError, match="needs 'text_cfg'"):
        OpenCLIPTextTower(model_cfg=dict(embed_dim=4, vision_cfg={}))
    with pytest.raises(ValueError, match='CoCa'):
        OpenCLIPTextTower(model_name='coca_ViT-B-32')


def test_width_mismatch_is_a_build_error():
    tower = dict(TOWER, arch=dict(TOWER['arch'], output_dims=24))
    with pytest.raises(
            ValueError, match='embeds into 16 dims.*projects to '
            '24'):
        _model(image_encoder=tower)
    with pytest.raises(ValueError, match="out_type='cls_token'"):
        _model(image_encoder=dict(TOWER, out_type='featmap'))


def test_loss_is_open_clips_cliploss_and_scale_clamped():
    torch.manual_seed(0)
    model = _model()
    assert math.isclose(
        float(model.logit_scale), math.log(1 / 0.07), rel_tol=1e-6)
    images = torch.randn(4, 3, 32, 32)
    tokens = _tokens()
    samples = [DataSample(text_tokens=t) for t in tokens]
    out = model.loss(images, samples)
    img = model.encode_image(images)
    txt = model.encode_text(tokens)
    ref = open_clip.ClipLoss()(img, txt, model.logit_scale.exp())
    torch.testing.assert_close(out['loss'], ref)
    # CLIP clamps the scale at 100
    with torch.no_grad():
        model.logit_scale.fill_(math.log(500.))
    assert float(model.scale()) == pytest.approx(100.)
    ref = open_clip.ClipLoss()(img, txt, torch.tensor(100.))
    torch.testing.assert_close(model.loss(images, samples)['loss'], ref)
    with pytest.raises(ValueError, match='one caption per image'):
        model.loss(images[:3], samples)


def test_lock_text_trains_image_tower_and_scale_only():
    model = _model(lock_text=True)
    samples = [DataSample(text_tokens=t) for t in _tokens()]
    model.loss(torch.randn(4, 3, 32, 32), samples)['loss'].backward()
    text = list(model.text_encoder.parameters())
    assert text and all(not p.requires_grad for p in text)
    assert model.logit_scale.grad is not None
    image = list(model.image_encoder.parameters())
    assert all(p.grad is not None for p in image)


def test_eva02_tower_and_cls_pooling_train():
    eva = dict(
        type='mmlocat.EVA02CLIPViT',
        arch=dict(
            embed_dims=32,
            num_layers=2,
            num_heads=2,
            feedforward_channels=48,
            output_dims=EMBED),
        img_size=32,
        patch_size=8)
    samples = [DataSample(text_tokens=t) for t in _tokens()]
    for tower in (eva, dict(TOWER, pooling='cls')):
        model = _model(image_encoder=tower)
        loss = model.loss(torch.randn(4, 3, 32, 32), samples)['loss']
        assert torch.isfinite(loss)
        loss.backward()


def test_predict_sets_embeddings_for_the_metrics():
    model = _model().eval()
    grouped = [
        DataSample(text_tokens=_tokens(2)),
        DataSample(text_tokens=_tokens(3, seed=1))
    ]
    with torch.no_grad():
        out = model.predict(torch.randn(2, 3, 32, 32), grouped)
    assert out[0].image_embedding.shape == (EMBED, )
    assert out[1].text_embeddings.shape == (3, EMBED)
    torch.testing.assert_close(out[1].text_embeddings.norm(dim=-1),
                               torch.ones(3))
    with torch.no_grad():
        torch.testing.assert_close(out[1].text_embeddings,
                                   model.encode_text(_tokens(3, seed=1)))


def test_text_weights_from_a_torchscript_archive(tmp_path):
    # OpenAI releases CLIP as TorchScript archives (ViT-B-16.pt)
    torch.manual_seed(2)
    ref = open_clip.CLIP(**MODEL_CFG).eval()
    tokens = _tokens()
    traced = torch.jit.trace_module(ref, {'encode_text': tokens})
    path = str(tmp_path / 'openai.pt')
    torch.jit.save(traced, path)
    tower = OpenCLIPTextTower(model_cfg=MODEL_CFG, weights=path).eval()
    tower.init_weights()
    with torch.no_grad():
        torch.testing.assert_close(
            tower(tokens), ref.encode_text(tokens), rtol=0, atol=0)
