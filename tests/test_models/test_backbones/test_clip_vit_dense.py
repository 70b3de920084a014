"""CLIPViT.value_path_dense / forward_dense (F-ViT's dense CLIP map)."""
import pytest
import torch
import torch.nn.functional as F
from helpers.tiny_archs import tiny_vit

from mmlocat.models.backbones import CLIPViT

ARCH = tiny_vit(num_layers=3, num_heads=4, output_dims=16)


def _reference(model, tokens):
    """The value path written out with raw weights."""
    sd = {k: v.detach() for k, v in model.state_dict().items()}
    p = f'layers.{ARCH["num_layers"] - 1}.'
    c = ARCH['embed_dims']

    def ln(x, name):
        return F.layer_norm(x, (c, ), sd[name + '.weight'], sd[name + '.bias'],
                            1e-5)

    h = ln(tokens, p + 'ln1')
    v = h @ sd[p + 'attn.qkv.weight'][2 * c:].t() + sd[p + 'attn.qkv.bias'][2 *
                                                                            c:]
    x = tokens + v @ sd[p + 'attn.proj.weight'].t() + sd[p + 'attn.proj.bias']
    h = ln(x, p + 'ln2')
    h = h @ sd[p + 'ffn.layers.0.0.weight'].t() + sd[p + 'ffn.layers.0.0.bias']
    h = h * torch.sigmoid(1.702 * h)  # QuickGELU
    x = x + h @ sd[p + 'ffn.layers.1.weight'].t() + sd[p + 'ffn.layers.1.bias']
    x = ln(x, 'ln1')[:, 1:] @ sd['proj']
    return F.normalize(x, dim=-1)


def test_value_path_matches_reference():
    torch.manual_seed(0)
    model = CLIPViT(
        arch=ARCH, img_size=64, out_type='featmap', out_indices=(0, 2)).eval()
    # Non-trivial norms and biases.
    for p in model.parameters():
        p.data.add_(0.1 * torch.randn_like(p))
    tokens = torch.randn(2, 1 + 3 * 5, 32)
    out = model.value_path_dense(tokens, (3, 5))
    assert out.shape == (2, 16, 3, 5)
    ref = _reference(model, tokens).transpose(1, 2).reshape(2, 16, 3, 5)
    torch.testing.assert_close(out, ref, atol=1e-5, rtol=1e-4)
    assert torch.allclose(out.norm(dim=1), torch.ones(2, 3, 5), atol=1e-5)


def test_forward_dense_consistent_with_forward():
    torch.manual_seed(1)
    model = CLIPViT(
        arch=ARCH,
        img_size=64,
        out_type='featmap',
        out_indices=(0, 2),
        frozen=True)
    x = torch.randn(1, 3, 48, 80)
    with torch.no_grad():
        outs, dense = model.forward_dense(x)
        plain = model(x)
        # The map uses the tokens entering the last block.
        kept, hw = model.forward_intermediates(x, [1])
        ref = model.value_path_dense(kept[0], hw)
    assert len(outs) == len(plain) == 2
    for a, b in zip(outs, plain):
        torch.testing.assert_close(a, b)
    torch.testing.assert_close(dense, ref)
    assert dense.shape == (1, 16, 3, 5)
    # The map differs from the ordinary last-layer tokens (attention on).
    (tokens, ), _ = model.forward_intermediates(x, [2])
    last = F.normalize(model.embed_global(tokens[:, 1:]), dim=-1)
    assert not torch.allclose(
        dense.flatten(2).transpose(1, 2), last, atol=1e-3)


def test_needs_two_layers():
    model = CLIPViT(
        arch=dict(ARCH, num_layers=1), img_size=32, out_type='featmap')
    with pytest.raises(ValueError, match='at least 2 layers'):
        model.forward_dense(torch.randn(1, 3, 32, 32))
