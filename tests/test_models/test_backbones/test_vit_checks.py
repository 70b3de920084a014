"""One loading, argument and input policy for every mmlocat backbone.

LocAtViT, LaStViT, CLIPViT and EVA02CLIPViT (tiny archs, random init):
strict ``Pretrained`` loading (missing prefix, foreign checkpoint, other
arch, plain ViT into LocAtViT, position-embedding resize), ``out_indices``
/ ``frozen_stages`` validation, empty batches and non-finite inputs, and
dense outputs that are contiguous NCHW.
"""
import pytest
import torch
import torchvision
from helpers.host_sync import HostSyncCounter as SyncCounter
from helpers.tiny_archs import tiny_vit
from mmdet.models.necks import FPN
from mmdet.models.roi_heads.roi_extractors import SingleRoIExtractor
from mmdet.utils import register_all_modules
from torchvision.ops import roi_align

import mmlocat  # noqa: F401
from mmlocat.models.backbones import CLIPViT, EVA02CLIPViT, LaStViT, LocAtViT
from mmlocat.utils.pretrained import drop_expected_unused, load_pretrained

ARCH = tiny_vit(num_layers=3)
WIDE = dict(ARCH, embed_dims=48, feedforward_channels=96)
BACKBONES = {
    'locat': LocAtViT,
    'last': LaStViT,
    'clip': CLIPViT,
    'eva02': EVA02CLIPViT,
}


def build(name: str, arch: dict = ARCH, **kwargs):
    kwargs.setdefault('img_size', 32)
    return BACKBONES[name](arch=arch, patch_size=16, **kwargs)


def save(tmp_path, state_dict: dict, name: str = 'ckpt.pth') -> str:
    path = str(tmp_path / name)
    torch.save(dict(state_dict=state_dict, meta={}), path)
    return path


def prefixed(model, prefix: str = 'backbone.') -> dict:
    return {prefix + k: v for k, v in model.state_dict().items()}


def pretrained(path: str, **kwargs) -> dict:
    return dict(type='Pretrained', checkpoint=path, **kwargs)


def _saved_backbone(name, tmp_path):
    """A seeded, initialised backbone and its weights saved under the
    ``backbone.`` prefix, as the converters write them."""
    torch.manual_seed(0)
    src = build(name)
    src.init_weights()
    return src, save(tmp_path, prefixed(src))


# ------------------------------------------------------------------ loading
@pytest.mark.parametrize('name', sorted(BACKBONES))
def test_converted_checkpoint_loads_with_prefix(name, tmp_path):
    src, path = _saved_backbone(name, tmp_path)
    model = build(name, init_cfg=pretrained(path, prefix='backbone.'))
    model.init_weights()
    for key, value in src.state_dict().items():
        torch.testing.assert_close(model.state_dict()[key], value)
    x = torch.randn(1, 3, 32, 32)
    with torch.no_grad():
        torch.testing.assert_close(model.eval()(x)[0], src.eval()(x)[0])


@pytest.mark.parametrize('name', sorted(BACKBONES))
def test_pretrained_keyword(name, tmp_path):
    """mmseg's ``pretrained=`` is a strict ``Pretrained`` init_cfg."""
    torch.manual_seed(0)
    src = build(name)
    src.init_weights()
    path = save(tmp_path, src.state_dict())
    model = build(name, pretrained=path)
    assert model.init_cfg == dict(type='Pretrained', checkpoint=path)
    model.init_weights()
    for key, value in src.state_dict().items():
        torch.testing.assert_close(model.state_dict()[key], value)
    with pytest.raises(ValueError, match='pretrained or init_cfg'):
        build(name, pretrained=path, init_cfg=pretrained(path))


MISSING = {
    'locat': 'layers.1.attn.gaug.log_var.weight',
    'last': 'ln1.weight',
    'clip': 'layers.1.ln1.weight',
    'eva02': 'layers.1.attn.q_proj.bias',
}


@pytest.mark.parametrize('name', sorted(BACKBONES))
def test_missing_key_refused_unless_allowed(name, tmp_path):
    """A checkpoint without a weight refuses instead of leaving it random
    (for LocAtViT: one with some GAug weights must have all), unless the
    caller names the key as new."""
    sd = prefixed(build(name))
    del sd['backbone.' + MISSING[name]]
    path = save(tmp_path, sd)
    model = build(name, init_cfg=pretrained(path, prefix='backbone.'))
    with pytest.raises(RuntimeError, match=MISSING[name]):
        model.init_weights()
    build(
        name,
        init_cfg=pretrained(
            path, prefix='backbone.',
            allowed_missing=[MISSING[name]])).init_weights()


@pytest.mark.parametrize('name', sorted(BACKBONES))
def test_wrong_checkpoints_name_the_fix(name, tmp_path):
    """A classifier checkpoint without ``prefix``; a real torchvision
    ResNet-18 state dict (loads nothing); a 32-wide ('T') checkpoint into a
    48-wide ('S') model: each an error that says what is wrong."""
    sd = prefixed(build(name))
    path = save(tmp_path, sd)
    sd['head.layers.head.weight'] = torch.zeros(10, 32)  # a classifier ckpt
    model = build(name, init_cfg=pretrained(save(tmp_path, sd, 'cls.pth')))
    with pytest.raises(ValueError, match=r"add prefix='backbone\.'"):
        model.init_weights()
    resnet = save(tmp_path, torchvision.models.resnet18().state_dict(), 'r')
    model = build(name, init_cfg=pretrained(resnet))
    with pytest.raises(RuntimeError, match='loaded 0 of 1') as err:
        model.init_weights()
    assert 'partly random' in str(err.value)
    assert 'conv1.weight' in str(err.value)
    model = build(
        name, arch=WIDE, init_cfg=pretrained(path, prefix='backbone.'))
    with pytest.raises(RuntimeError, match='another shape') as err:
        model.init_weights()
    assert 'size mismatch for' in str(err.value)


@pytest.mark.parametrize('name', sorted(BACKBONES))
def test_pos_embed_is_still_resized_on_load(name, tmp_path):
    src, path = _saved_backbone(name, tmp_path)
    model = build(
        name, img_size=64, init_cfg=pretrained(path, prefix='backbone.'))
    model.init_weights()  # 2x2 grid -> 4x4 grid, no error
    assert model.pos_embed.shape[1] == model.num_extra_tokens + 16
    torch.testing.assert_close(model.state_dict()['cls_token'],
                               src.state_dict()['cls_token'])


def test_plain_vit_into_locat_only_gaug_is_new(tmp_path):
    torch.manual_seed(0)
    plain = build('locat', gaug=False)
    plain.init_weights()
    path = save(tmp_path, prefixed(plain))
    model = build('locat', init_cfg=pretrained(path, prefix='backbone.'))
    model.init_weights()
    for key, value in plain.state_dict().items():
        torch.testing.assert_close(model.state_dict()[key], value)


@pytest.mark.parametrize('name', sorted(BACKBONES))
def test_bad_pretrained_cfgs(name, tmp_path):
    with pytest.raises(FileNotFoundError, match='no/such.pth'):
        build(name, init_cfg=pretrained('no/such.pth')).init_weights()
    path = save(tmp_path, prefixed(build(name)))
    with pytest.raises(ValueError, match='unknown init_cfg'):
        build(name, init_cfg=pretrained(path, strict=False)).init_weights()
    with pytest.raises(ValueError, match="starts with 'head.'"):
        build(name, init_cfg=pretrained(path, prefix='head')).init_weights()
    # scoped / class spellings of Pretrained are strict too, and a list
    # holding a Pretrained entry (mmengine's lenient loader) is refused
    from mmengine.model.weight_init import PretrainedInit
    for init_type in ('mmengine.Pretrained', PretrainedInit):
        cfg = dict(pretrained(path), type=init_type)
        with pytest.raises(ValueError, match="add prefix='backbone.'"):
            build(name, init_cfg=cfg).init_weights()
    listed = [pretrained(path), dict(type='Constant', val=0, layer='Linear')]
    with pytest.raises(ValueError, match='list with a Pretrained entry'):
        build(name, init_cfg=listed).init_weights()


# ---------------------------------------------------------------- arguments
@pytest.mark.parametrize('name', sorted(BACKBONES))
def test_out_indices_validated(name):
    model = build(name, out_type='featmap', out_indices=(0, -1))
    assert list(model.out_indices) == [0, 2]
    assert len(model.eval()(torch.randn(1, 3, 32, 32))) == 2
    for bad, match in [((3, ), 'out of range'), ((-4, ), 'out of range'),
                       ((2, 2), 'twice'), ((1, -2), 'twice'),
                       ((2, 0), 'increasing'), ((), 'empty')]:
        with pytest.raises(ValueError, match=match):
            build(name, out_type='featmap', out_indices=bad)
    with pytest.raises(TypeError, match='ints'):
        build(name, out_indices=(1.0, ))


@pytest.mark.parametrize('name', sorted(BACKBONES))
def test_frozen_stages_bounded(name):
    model = build(name, frozen_stages=3, out_type='avg_featmap')
    assert not any(p.requires_grad for p in model.layers.parameters())
    # all blocks frozen: the final norm and the GAP norm too
    assert not model.ln1.weight.requires_grad
    assert not model.ln2.weight.requires_grad
    for bad in (4, 99, -2):
        with pytest.raises(ValueError, match='frozen_stages'):
            build(name, frozen_stages=bad)


@pytest.mark.parametrize('name', sorted(BACKBONES))
def test_one_freezing_mechanism(name):
    """``frozen_stages`` and ``frozen`` are applied once the leaf class has
    built everything (EVA and LocAtViT replace the host's blocks, LocAtViT
    adds registers, the towers add a projection) and kept by ``train()``."""
    extra = dict(num_register_tokens=1) if name == 'locat' else {}
    model = build(name, frozen_stages=2, drop_rate=0.1, **extra).train()
    stem = [model.patch_embed, *model.layers[:2]]
    assert not any(p.requires_grad for m in stem for p in m.parameters())
    assert not any(m.training for m in stem)
    assert not any(t.requires_grad for t in model.prefix_tokens())
    assert not model.cls_token.requires_grad
    if name == 'locat':
        assert not model.reg_token.requires_grad
    assert not model.pos_embed.requires_grad
    assert all(p.requires_grad for p in model.layers[2].parameters())
    assert model.ln1.weight.requires_grad
    assert model.layers[2].training and model.drop_after_pos.training is False
    plain = build(name).train()
    assert plain.training and all(p.requires_grad for p in plain.parameters())
    # frozen: eval without grads, deterministic despite dropout / drop path
    model = build(
        name,
        arch=dict(ARCH, output_dims=8) if name == 'clip' else ARCH,
        frozen=True,
        drop_rate=0.1,
        drop_path_rate=0.1,
        **extra).train()
    assert model.frozen and not model.training
    assert not any(m.training for m in model.modules())
    assert not any(p.requires_grad for p in model.parameters())
    if name == 'clip':
        assert not model.proj.requires_grad
    x = torch.randn(1, 3, 32, 32)
    y = model(x)[0]
    assert not y.requires_grad
    torch.testing.assert_close(y, model(x)[0])


@pytest.mark.parametrize('host', ['mmpretrain', 'mmseg', 'mmdet'])
@pytest.mark.parametrize('name', sorted(BACKBONES))
def test_build_from_host_registries(name, host):
    registry = __import__(f'{host}.registry', fromlist=['MODELS']).MODELS
    model = registry.build(
        dict(
            type=f'mmlocat.{BACKBONES[name].__name__}',
            arch=ARCH,
            img_size=32,
            patch_size=16,
            out_type='featmap',
            out_indices=(0, 1),
            frozen=True))
    assert isinstance(model, BACKBONES[name]) and model.frozen
    assert not model.training
    outs = model(torch.rand(1, 3, 64, 48))
    assert [o.shape for o in outs] == [(1, 32, 4, 3)] * 2


@pytest.mark.parametrize('name', sorted(BACKBONES))
def test_constant_pos_embed(name):
    """Inside ``constant_pos_embed`` (ONNX export) each grid's resampled
    embedding is computed once, detached, and equals the live one; outside
    nothing is cached."""
    model = build(name).eval()
    x = torch.randn(1, 3, 48, 64)
    with torch.no_grad():
        want = model(x)
    live = model._pos_embed_for((3, 4))
    assert live.requires_grad
    with model.constant_pos_embed():
        first = model._pos_embed_for((3, 4))
        assert model._pos_embed_for((3, 4)) is first
        assert not first.requires_grad
        torch.testing.assert_close(first, live, rtol=0, atol=0)
        with torch.no_grad():
            for a, b in zip(model(x), want):
                assert torch.equal(a, b)
    assert model._pos_embed_cache is None
    assert model._pos_embed_for((3, 4)) is not first


# ------------------------------------------------------------------- inputs
@pytest.mark.parametrize('name', sorted(BACKBONES))
def test_empty_and_malformed_batches(name):
    model = build(name).eval()
    with pytest.raises(ValueError, match=r'empty batch of shape \(0, 3'):
        model(torch.randn(0, 3, 32, 32))
    with pytest.raises(ValueError, match=r'empty batch'):
        model.train()(torch.randn(2, 3, 0, 32))
    with pytest.raises(ValueError, match='3-D input'):
        model(torch.randn(3, 32, 32))


@pytest.mark.parametrize('name', sorted(BACKBONES))
def test_non_finite_input_eval_error_train_passes(name):
    model = build(name).eval()
    x = torch.randn(2, 3, 32, 32)
    x[1, 0, 5, 7] = float('nan')
    x[0, 2, 0, 0] = float('inf')
    with pytest.raises(ValueError) as err:
        with torch.no_grad():
            model(x)
    message = str(err.value)
    assert '2 NaN/inf' in message and '(2, 3, 32, 32)' in message
    assert 'input' in message
    # training: no check, no host sync; the loss / AMP scaler sees the NaN
    # (the default output, LazyStrike-pooled for the LaSt family, too)
    for out_type in ('featmap', None):
        kwargs = {} if out_type is None else dict(out_type=out_type)
        model = build(name, **kwargs).train()
        out = model(x)[0]
        assert not torch.isfinite(out).all()


@pytest.mark.parametrize('name', sorted(BACKBONES))
def test_check_finite_argument_overrides_the_mode(name):
    """A frozen backbone kept in eval mode while a detector trains (F-ViT
    passes ``check_finite=False``): no error and no host sync, LazyStrike's
    pooling included; ``True`` checks in training too."""
    model = build(name).eval()
    x = torch.randn(2, 3, 32, 32)
    x[1, 0, 5, 7] = float('nan')
    with torch.no_grad(), SyncCounter() as counter:
        out = model(x, check_finite=False)[0]
    assert counter.syncs == []
    assert not torch.isfinite(out).all()
    assert not hasattr(model, 'check_finite')  # no attribute to set
    model.train()
    with pytest.raises(ValueError, match='non-finite input'):
        model(x, check_finite=True)


def test_locat_eval_no_longer_silently_nan():
    model = build('locat').eval()
    x = torch.randn(1, 3, 32, 32)
    with torch.no_grad():
        assert torch.isfinite(model(x)[0]).all()
    x[0, 0, 0, 0] = float('nan')
    with pytest.raises(ValueError, match='non-finite input'):
        with torch.no_grad():
            model(x)


def test_drill_cases_with_the_real_archs(tmp_path):
    """The issue's drill with the shipped aliases (12 blocks, T vs S)."""
    for bad, match in [(12, r'12 is out of range for 12 blocks'),
                       ((11, 11), 'twice'), ((8, 2), r'write \(2, 8\)')]:
        with pytest.raises(ValueError, match=match):
            LocAtViT('t', out_type='featmap', out_indices=bad)
    with pytest.raises(ValueError, match='frozen_stages=99'):
        LocAtViT('t', frozen_stages=99)
    path = save(tmp_path, prefixed(LocAtViT('t')))
    model = LocAtViT('deit-s', init_cfg=pretrained(path, prefix='backbone.'))
    with pytest.raises(RuntimeError, match='have another shape'):
        model.init_weights()
    model = LocAtViT('t', init_cfg=pretrained(path))
    with pytest.raises(ValueError, match=r"of the 198 keys .* add prefix="):
        model.init_weights()


# ------------------------------------------------- expected-unused leftovers
class Lines:
    """A logger that keeps its ``info`` lines."""

    def __init__(self):
        self.lines = []

    def info(self, message: str) -> None:
        self.lines.append(message)


def dropped_lines(logger: Lines) -> list:
    return [line for line in logger.lines if 'does not use' in line]


@pytest.mark.parametrize('name', ['locat', 'last'])
def test_final_norm_of_the_checkpoint_left_out_with_final_norm_false(
        name, tmp_path):
    """A converted classification ViT (with its final norm) into a dense
    config with ``final_norm=False`` (UperNet, the probe): loads, and one
    log line names the final norm's tensors."""
    torch.manual_seed(0)
    src = build(name)  # final_norm=True, as trained for classification
    src.init_weights()
    path = save(tmp_path, prefixed(src))
    cfg = pretrained(path, prefix='backbone.')
    model = build(name, final_norm=False, out_type='featmap', init_cfg=cfg)
    assert model.expected_unused_keys() == {
        'ln1': 'final_norm=False builds no final norm',
        'ln2': "out_type='featmap' builds no GAP norm (only 'avg_featmap' "
        'does)'
    }
    model.init_weights()  # through the mixin, as tools/train.py does
    for key, value in model.state_dict().items():
        torch.testing.assert_close(value, src.state_dict()[key])
    logger = Lines()
    model = build(name, final_norm=False, out_type='featmap')
    load_pretrained(
        model,
        cfg,
        logger=logger,
        expected_unused=model.expected_unused_keys())
    (line, ) = dropped_lines(logger)
    assert "['ln1.bias', 'ln1.weight']" in line
    assert 'final_norm=False' in line and 'does not use 2 tensor(s)' in line


@pytest.mark.parametrize('name', ['locat', 'last'])
def test_other_leftovers_are_still_refused(name, tmp_path):
    src = build(name)
    sd = prefixed(src)
    sd['backbone.ln1x.weight'] = torch.zeros(32)  # not the final norm
    sd['backbone.foo.weight'] = torch.zeros(3)
    model = build(
        name,
        final_norm=False,
        init_cfg=pretrained(save(tmp_path, sd), prefix='backbone.'))
    with pytest.raises(RuntimeError, match='unexpected keys') as err:
        model.init_weights()
    assert 'foo.weight' in str(err.value) and 'ln1x.weight' in str(err.value)
    # a deeper checkpoint: its extra block is not an expected leftover
    deep = prefixed(build(name, arch=tiny_vit(num_layers=4)))
    model = build(
        name,
        final_norm=False,
        init_cfg=pretrained(
            save(tmp_path, deep, 'deep.pth'), prefix='backbone.'))
    with pytest.raises(RuntimeError, match=r'layers\.3\.'):
        model.init_weights()
    # and nothing the model does build may be missing
    sd = prefixed(src)
    del sd['backbone.layers.0.ln1.weight']
    model = build(
        name,
        final_norm=False,
        init_cfg=pretrained(save(tmp_path, sd, 'm.pth'), prefix='backbone.'))
    with pytest.raises(RuntimeError, match=r'layers\.0\.ln1\.weight'):
        model.init_weights()


def test_gap_norm_left_out_unless_built(tmp_path):
    """timm's GAP ViT keeps ``fc_norm`` (our ``ln2``): unused by a featmap
    model, required by an ``avg_featmap`` one."""
    torch.manual_seed(0)
    gap = build('last', out_type='avg_featmap')
    path = save(tmp_path, prefixed(gap))
    model = build(
        'last',
        out_type='featmap',
        init_cfg=pretrained(path, prefix='backbone.'))
    model.init_weights()
    torch.testing.assert_close(model.ln1.weight, gap.ln1.weight)
    path = save(tmp_path, prefixed(build('last')), 'cls.pth')
    model = build(
        'last',
        out_type='avg_featmap',
        init_cfg=pretrained(path, prefix='backbone.'))
    assert 'ln2' not in model.expected_unused_keys()
    with pytest.raises(RuntimeError, match=r'ln2\.weight'):
        model.init_weights()


def test_cls_token_left_out_by_a_gap_locat(tmp_path):
    torch.manual_seed(0)
    src = build('locat', out_type='avg_featmap')  # a CLS token and ln2
    path = save(tmp_path, prefixed(src))
    model = build(
        'locat', pooling='gap', init_cfg=pretrained(path, prefix='backbone.'))
    assert 'cls_token' in model.expected_unused_keys()
    model.init_weights()  # pos_embed: the CLS position is dropped too
    torch.testing.assert_close(model.pos_embed, src.pos_embed[:, 1:])
    assert 'cls_token' not in build('locat').expected_unused_keys()


@pytest.mark.parametrize('name, part', [('clip', 'proj'), ('eva02', 'head')])
def test_projection_left_out_by_a_tower_without_one(name, part, tmp_path):
    torch.manual_seed(0)
    src = build(name, arch=dict(ARCH, output_dims=8))
    path = save(tmp_path, prefixed(src))
    model = build(name, init_cfg=pretrained(path, prefix='backbone.'))
    assert model.output_dims is None
    assert model.expected_unused_keys()[part] == (
        'output_dims=None builds no ' +
        ('projection' if part == 'proj' else 'head'))
    model.init_weights()
    torch.testing.assert_close(model.ln1.weight, src.ln1.weight)
    assert getattr(model, part) is None
    assert model(torch.randn(1, 3, 32, 32))[0].shape == (1, 32)
    # a tower with a projection needs it
    path = save(tmp_path, prefixed(build(name)), 'plain.pth')
    model = build(
        name,
        arch=dict(ARCH, output_dims=8),
        init_cfg=pretrained(path, prefix='backbone.'))
    with pytest.raises(RuntimeError, match=part):
        model.init_weights()


@pytest.mark.parametrize('name', ['clip', 'eva02'])
def test_forward_with_scores_adds_projected_embedding(name):
    model = build(name, arch=dict(ARCH, output_dims=16), img_size=64).eval()
    x = torch.randn(2, 3, 64, 64)
    with torch.no_grad():
        out = model.forward_with_scores(x)
        ref = model(x)
    assert out['global_token'].shape == (2, 32)
    assert out['embedding'].shape == (2, 16) == ref[0].shape
    project = model.head if name == 'eva02' else lambda t: t @ model.proj
    torch.testing.assert_close(out['embedding'], project(out['global_token']))
    assert out['patch_score'].shape == (2, 1, 4, 4)
    assert out['vote_map'].sum(dim=(1, 2, 3)).eq(32).all()


def test_drop_expected_unused_names_whole_parts_only():
    sd = {
        'ln1.weight': 1,
        'ln1': 2,
        'ln10.weight': 3,
        'layers.0.ln1.weight': 4,
        'proj': 5,
    }
    logger = Lines()
    out = drop_expected_unused(
        sd, {
            'ln1': 'why',
            'proj': 'why not'
        },
        model_keys=['proj'],
        source='x.pth',
        model_name='M',
        logger=logger)
    assert list(out) == ['ln10.weight', 'layers.0.ln1.weight', 'proj']
    assert logger.lines == [
        "M does not use 2 tensor(s) of x.pth (ln1: why); left out: "
        "['ln1', 'ln1.weight']"
    ]
    assert drop_expected_unused(sd, {}, [], 'x.pth', logger=logger) is sd
    assert len(logger.lines) == 1


# ------------------------------------------------------------ dense layout
@pytest.mark.parametrize('name', sorted(BACKBONES))
def test_featmaps_are_contiguous_and_roi_pooled_right(name):
    """mmcv's RoIAlign reads its input as contiguous NCHW memory whatever
    the strides (open-mmlab/mmcv#2203): a permuted (NHWC) feature map, and
    the FPN outputs computed from it, would be pooled at the wrong places.
    The reference is torchvision's ``roi_align``, which follows the
    strides."""
    register_all_modules()
    torch.manual_seed(0)
    backbone = build(
        name,
        arch=tiny_vit(),
        img_size=64,
        out_type='featmap',
        out_indices=(0, 1)).eval()
    channels = backbone.embed_dims
    fpn = FPN([channels, channels], out_channels=8, num_outs=2).eval()
    extractor = SingleRoIExtractor(
        roi_layer=dict(type='RoIAlign', output_size=7, sampling_ratio=0),
        out_channels=8,
        featmap_strides=[16, 32])
    image = torch.rand(1, 3, 96, 128)
    # small boxes: mmdet maps them to the stride-16 level
    rois = torch.tensor([[0., 4., 6., 60., 50.], [0., 30., 10., 90., 70.]])
    with torch.no_grad():
        featmaps = backbone(image)
        assert all(f.is_contiguous() for f in featmaps)
        levels = fpn(featmaps)
        pooled = extractor(levels[:1], rois)
    reference = roi_align(
        levels[0],
        rois,
        output_size=7,
        spatial_scale=1 / 16,
        sampling_ratio=0,
        aligned=True)
    torch.testing.assert_close(pooled, reference, rtol=1e-5, atol=1e-5)
