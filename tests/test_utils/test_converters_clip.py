"""OpenAI CLIP / open_clip image tower -> CLIPViT keys."""
import pytest
import torch

from mmlocat.utils.converters import convert_clip

D, N = 8, 5


def openai_visual(layers=2, prefix='visual.'):
    sd = {
        'conv1.weight': torch.randn(D, 3, 4, 4),
        'class_embedding': torch.randn(D),
        'positional_embedding': torch.randn(N, D),
        'ln_pre.weight': torch.randn(D),
        'ln_pre.bias': torch.randn(D),
        'ln_post.weight': torch.randn(D),
        'ln_post.bias': torch.randn(D),
        'proj': torch.randn(D, 4),
    }
    for i in range(layers):
        b = f'transformer.resblocks.{i}.'
        sd.update({
            b + 'ln_1.weight': torch.randn(D),
            b + 'ln_1.bias': torch.randn(D),
            b + 'attn.in_proj_weight': torch.randn(3 * D, D),
            b + 'attn.in_proj_bias': torch.randn(3 * D),
            b + 'attn.out_proj.weight': torch.randn(D, D),
            b + 'attn.out_proj.bias': torch.randn(D),
            b + 'ln_2.weight': torch.randn(D),
            b + 'ln_2.bias': torch.randn(D),
            b + 'mlp.c_fc.weight': torch.randn(4 * D, D),
            b + 'mlp.c_fc.bias': torch.randn(4 * D),
            b + 'mlp.c_proj.weight': torch.randn(D, 4 * D),
            b + 'mlp.c_proj.bias': torch.randn(D),
        })
    return {prefix + k: v for k, v in sd.items()}


def test_mapping_and_shapes():
    sd = openai_visual()
    out = convert_clip(sd)
    assert len(out) == len(sd)
    assert out['cls_token'].shape == (1, 1, D)
    assert torch.equal(out['cls_token'].flatten(),
                       sd['visual.class_embedding'])
    assert out['pos_embed'].shape == (1, N, D)
    assert torch.equal(out['patch_embed.projection.weight'],
                       sd['visual.conv1.weight'])
    assert torch.equal(out['pre_norm.weight'], sd['visual.ln_pre.weight'])
    assert torch.equal(out['ln1.bias'], sd['visual.ln_post.bias'])
    assert torch.equal(out['proj'], sd['visual.proj'])
    r = 'visual.transformer.resblocks.1.'
    assert torch.equal(out['layers.1.attn.qkv.weight'],
                       sd[r + 'attn.in_proj_weight'])
    assert torch.equal(out['layers.1.attn.qkv.bias'],
                       sd[r + 'attn.in_proj_bias'])
    assert torch.equal(out['layers.1.attn.proj.weight'],
                       sd[r + 'attn.out_proj.weight'])
    assert torch.equal(out['layers.1.ffn.layers.0.0.weight'],
                       sd[r + 'mlp.c_fc.weight'])
    assert torch.equal(out['layers.1.ffn.layers.1.bias'],
                       sd[r + 'mlp.c_proj.bias'])
    assert torch.equal(out['layers.0.ln2.weight'],
                       sd['visual.transformer.resblocks.0.ln_2.weight'])


def test_text_tower_dropped_and_bare_visual_accepted():
    sd = openai_visual()
    full = dict(sd)
    # the text tower reuses the names transformer.resblocks.* at top level
    full['transformer.resblocks.0.ln_1.weight'] = torch.zeros(3)
    full['token_embedding.weight'] = torch.zeros(4, 3)
    full['logit_scale'] = torch.tensor(1.)
    a = convert_clip(full)
    b = convert_clip(openai_visual(prefix=''))
    assert set(a) == set(b) == set(convert_clip(sd))
    assert a['layers.0.ln1.weight'].shape == (D, )
    wrapped = {'module.' + k: v for k, v in sd.items()}
    assert set(convert_clip(wrapped)) == set(a)


def test_other_layouts_raise():
    with pytest.raises(ValueError, match='trunk'):
        convert_clip({'visual.trunk.blocks.0.norm1.weight': torch.ones(2)})
    with pytest.raises(ValueError, match='vision_model'):
        convert_clip(
            {'vision_model.embeddings.class_embedding': torch.ones(2)})
    with pytest.raises(ValueError, match='OpenAI CLIP ViT image tower format'):
        convert_clip({'visual.layer1.0.conv1.weight': torch.ones(2)})
    sd = openai_visual()
    sd['visual.transformer.resblocks.0.ls_1.gamma'] = torch.ones(D)
    with pytest.raises(ValueError, match='ls_1.gamma'):
        convert_clip(sd)
