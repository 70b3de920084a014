"""CLIPContrastive and its open_clip text tower, against open_clip itself.

open_clip models are built at random init from a tiny model config (nothing
is downloaded); their state dicts are saved as a user's checkpoint file and
loaded into :class:`OpenCLIPTextTower`, which must give open_clip's own
``encode_text``; the loss must be open_clip's ``ClipLoss``; the logit scale
starts at the checkpoint's and is clamped after the step as
``open_clip_train`` does; a text tower of another CLIP than the image
tower's init is refused at build.
"""
import math

import open_clip
import pytest
import torch
from helpers.tiny_archs import tiny_open_clip_cfg, tiny_vit
from mmpretrain.structures import DataSample

import mmlocat  # noqa: F401  (registers the mmlocat scope)
from mmlocat.models import CLIPContrastive, OpenCLIPTextTower

EMBED = 16
MODEL_CFG = tiny_open_clip_cfg(embed_dim=EMBED, context_length=12)
TOWER = dict(
    type='mmlocat.CLIPViT',
    arch=tiny_vit(output_dims=EMBED),
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
    # no text weights here: CLIP's from-scratch scale
    cfg = dict(
        image_encoder=TOWER,
        text_encoder=dict(model_cfg=MODEL_CFG),
        init_logit_scale=math.log(1 / 0.07))
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


def test_loss_is_open_clips_cliploss():
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
    with pytest.raises(ValueError, match='one caption per image'):
        model.loss(images[:3], samples)


def test_no_clamp_in_the_forward_the_step_clamps_as_open_clip():
    """open_clip's forward uses ``logit_scale.exp()`` as it is (above 100
    the loss still has a gradient for the scale) and its training loop
    clamps the parameter in place after the optimizer step."""
    torch.manual_seed(0)
    model = _model()
    images = torch.randn(4, 3, 32, 32)
    samples = [DataSample(text_tokens=t) for t in _tokens()]
    with torch.no_grad():
        model.logit_scale.fill_(math.log(150.))
    loss = model.loss(images, samples)
    assert float(loss['logit_scale']) == pytest.approx(150.)
    img = model.encode_image(images)
    txt = model.encode_text(_tokens())
    ref = open_clip.ClipLoss()(img, txt, torch.tensor(150.))
    torch.testing.assert_close(loss['loss'], ref)
    loss['loss'].backward()
    assert model.logit_scale.grad is not None
    assert float(model.logit_scale.grad.abs()) > 0
    # open_clip_train/train.py after optimizer.step():
    #     unwrap_model(model).logit_scale.clamp_(0, math.log(100))
    ref_param = model.logit_scale.detach().clone()
    ref_param.clamp_(0, math.log(100))
    model.clamp_logit_scale()
    assert float(model.logit_scale) == float(ref_param)
    assert float(model.logit_scale.exp()) == pytest.approx(100.)
    with torch.no_grad():
        model.logit_scale.fill_(-0.5)
    model.clamp_logit_scale()
    assert float(model.logit_scale) == 0.0


def _open_clip_file(tmp_path, name='clip.pt', scale=100., seed=0):
    """A user's open_clip checkpoint (random init) whose logit_scale is
    ``log(scale)`` (OpenAI's releases: log(100))."""
    torch.manual_seed(seed)
    ref = open_clip.CLIP(**MODEL_CFG)
    with torch.no_grad():
        ref.logit_scale.fill_(math.log(scale))
    path = str(tmp_path / name)
    torch.save(ref.state_dict(), path)
    return path


def _pretrained(weights, **kwargs):
    cfg = dict(
        image_encoder=TOWER,
        text_encoder=dict(model_cfg=MODEL_CFG, weights=weights))
    cfg.update(kwargs)
    return CLIPContrastive(**cfg)


def test_logit_scale_starts_at_the_checkpoints(tmp_path):
    path = _open_clip_file(tmp_path, scale=100.)
    model = _pretrained(path)
    assert model.init_logit_scale == 'pretrained'
    samples = [DataSample(text_tokens=t) for t in _tokens()]
    # not read yet: a loss now would use no scale at all
    with pytest.raises(RuntimeError, match='init_weights'):
        model.loss(torch.randn(4, 3, 32, 32), samples)
    model.init_weights()
    saved = torch.load(path, weights_only=True)['logit_scale']
    assert float(model.logit_scale) == float(saved)
    assert float(model.scale()) == pytest.approx(100., rel=1e-6)
    out = model.loss(torch.randn(4, 3, 32, 32), samples)
    assert float(out['logit_scale']) == pytest.approx(100., rel=1e-6)
    # a pretrained scale above the clamp is used for the first step (open
    # _clip clamps after it)
    high = _pretrained(_open_clip_file(tmp_path, 'high.pt', scale=120.))
    high.init_weights()
    assert float(high.scale()) == pytest.approx(120., rel=1e-6)


def test_logit_scale_errors(tmp_path):
    with pytest.raises(ValueError, match="'pretrained' reads logit_scale"):
        CLIPContrastive(
            image_encoder=TOWER, text_encoder=dict(model_cfg=MODEL_CFG))
    with pytest.raises(ValueError, match='log\\(max_logit_scale\\)'):
        _model(init_logit_scale=math.log(101.))
    with pytest.raises(ValueError, match="'pretrained' or a finite number"):
        _model(init_logit_scale='openai')
    with pytest.raises(ValueError, match='max_logit_scale must be > 0'):
        _model(max_logit_scale=0.)
    # a text-weights file without logit_scale (the text keys only)
    torch.manual_seed(0)
    state = {
        k: v
        for k, v in open_clip.CLIP(**MODEL_CFG).state_dict().items()
        if k != 'logit_scale'
    }
    path = str(tmp_path / 'text_only.pt')
    torch.save(state, path)
    model = _pretrained(path)
    with pytest.raises(ValueError, match='hold no logit_scale'):
        model.init_weights()
    # a number instead reads nothing
    model = _pretrained(path, init_logit_scale=math.log(50.))
    model.init_weights()
    assert float(model.scale()) == pytest.approx(50.)


def _image_init(tmp_path, record, name='init.pth'):
    """A converted image-tower checkpoint with ``meta['clip'] = record``
    (None: no record)."""
    from mmlocat.registry import MODELS
    tower = MODELS.build(dict(TOWER, init_cfg=None))
    state = {'backbone.' + k: v for k, v in tower.state_dict().items()}
    path = str(tmp_path / name)
    meta = {} if record is None else dict(clip=record)
    torch.save(dict(state_dict=state, meta=meta), path)
    return path


def _with_init(init):
    return dict(
        TOWER,
        init_cfg=dict(type='Pretrained', checkpoint=init, prefix='backbone.'))


def test_towers_of_the_same_clip_are_recorded(tmp_path):
    from mmlocat.utils.records import clip_provenance, file_sha256, text_sha256
    weights = _open_clip_file(tmp_path)
    init = _image_init(tmp_path,
                       dict(clip_provenance('tiny-clip', weights), act='gelu'))
    model = _pretrained(weights, image_encoder=_with_init(init)).eval()
    model.init_weights()
    sha = file_sha256(weights)
    # the text tower is recorded by its content too (what it trains from)
    fingerprint = text_sha256(torch.load(weights))
    assert model.text_encoder.fingerprint() == fingerprint
    assert model.clip_provenance == dict(
        text=dict(
            weights='clip.pt',
            sha256=sha,
            text_sha256=fingerprint,
            text_act='gelu'),
        image=dict(
            name='tiny-clip',
            weights='clip.pt',
            sha256=sha,
            act='gelu',
            checkpoint=init))


def test_another_clip_or_no_record_is_a_build_error(tmp_path):
    weights = _open_clip_file(tmp_path)
    other = _open_clip_file(tmp_path, 'other.pt', seed=1)
    from mmlocat.utils.records import clip_provenance
    init = _image_init(tmp_path, clip_provenance('tiny-clip', other))
    with pytest.raises(
            ValueError,
            match=r"sha256 .* but the image tower's "
            r'init checkpoint .*init\.pth'):
        _pretrained(weights, image_encoder=_with_init(init))
    # another open_clip model name for the same file
    named = _image_init(tmp_path, clip_provenance('ViT-B-16', weights),
                        'named.pth')
    text = dict(model_name='ViT-B-16-quickgelu', weights=weights)
    with torch.device('meta'):
        with pytest.raises(ValueError, match="name 'ViT-B-16-quickgelu'"):
            CLIPContrastive(
                image_encoder=dict(
                    _with_init(named), arch='b', img_size=224, patch_size=16),
                text_encoder=text)
    bare = _image_init(tmp_path, None, 'bare.pth')
    with pytest.raises(ValueError, match="records no CLIP"):
        _pretrained(weights, image_encoder=_with_init(bare))
    # a record with the text tower's fingerprint decides by it: another
    # file of the same weights is the same CLIP, other weights are not
    resaved = str(tmp_path / 'resaved.bin')
    torch.save({
        'module.' + k: v
        for k, v in torch.load(weights).items()
    }, resaved)
    from mmlocat.utils.records import file_text_sha256
    same = _image_init(
        tmp_path,
        dict(
            clip_provenance('tiny-clip', resaved),
            text_sha256=file_text_sha256(resaved)), 'same.pth')
    _pretrained(weights, image_encoder=_with_init(same))
    differ = _image_init(
        tmp_path,
        dict(
            clip_provenance('tiny-clip', weights),
            text_sha256=file_text_sha256(other)), 'differ.pth')
    with pytest.raises(
            ValueError,
            match=rf'text tower {file_text_sha256(weights)} \(clip\.pt '
            rf'sha256 \w+\) but .*differ\.pth from the CLIP text tower '
            rf'{file_text_sha256(other)} \(clip\.pt sha256'):
        _pretrained(weights, image_encoder=_with_init(differ))
    # the explicit override accepts both and records what it saw
    mixed = _pretrained(
        weights, image_encoder=_with_init(init), allow_mixed_clip=True)
    assert mixed.clip_provenance['image']['sha256'] != \
        mixed.clip_provenance['text']['sha256']
    _pretrained(weights, image_encoder=_with_init(bare), allow_mixed_clip=True)


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
        arch=tiny_vit(feedforward_channels=48, output_dims=EMBED),
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
    # OpenAI releases CLIP as TorchScript archives (ViT-B-16.pt), QuickGELU
    cfg = dict(MODEL_CFG, quick_gelu=True)
    torch.manual_seed(2)
    ref = open_clip.CLIP(**cfg).eval()
    tokens = _tokens()
    traced = torch.jit.trace_module(ref, {'encode_text': tokens})
    path = str(tmp_path / 'openai.pt')
    torch.jit.save(traced, path)
    tower = OpenCLIPTextTower(model_cfg=cfg, weights=path).eval()
    tower.init_weights()
    with torch.no_grad():
        torch.testing.assert_close(
            tower(tokens), ref.encode_text(tokens), rtol=0, atol=0)
    # the archive's logit scale is what init_logit_scale='pretrained' reads
    assert tower.pretrained_logit_scale == float(ref.logit_scale)
    # an archive is an OpenAI CLIP: a model with exact GELU is refused
    gelu = OpenCLIPTextTower(model_cfg=MODEL_CFG, weights=path)
    with pytest.raises(
            ValueError,
            match=r'openai\.pt is a TorchScript archive, i\.e\. an OpenAI '
            r'CLIP release, and OpenAI CLIP uses QuickGELU, but the text '
            r"model_cfg uses 'gelu'"):
        gelu.init_weights()
