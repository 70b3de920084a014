"""Random GAug modules and q / k / v for the kernel tests."""
import torch

from mmlocat.models.layers import GaussianAugment


def random_gaug(grid, num_prefix, clamp, head_dims=8, seed=0):
    """A GAug module with parameters far from init, so every term matters."""
    torch.manual_seed(seed)
    gaug = GaussianAugment(head_dims, grid, num_prefix, clamp=clamp)
    with torch.no_grad():
        for p in gaug.parameters():
            p.normal_(0, 0.3)
    return gaug


def random_qkv(gaug, hw, batch=2, heads=3, seed=1):
    """``(q, k, v)``, each ``(batch, heads, prefix + h * w, head_dims)``."""
    torch.manual_seed(seed)
    n = gaug.num_prefix_tokens + hw[0] * hw[1]
    return torch.randn(3, batch, heads, n, gaug.head_dims).unbind(0)
