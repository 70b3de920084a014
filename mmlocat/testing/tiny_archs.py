"""Tiny ``arch`` dicts for tests (CPU, milliseconds per forward)."""
__all__ = ['TINY_VIT', 'tiny_vit']

#: The default tiny ViT: 32-d, 2 blocks, 2 heads, MLP 64.
TINY_VIT = dict(
    embed_dims=32, num_layers=2, num_heads=2, feedforward_channels=64)


def tiny_vit(**changes) -> dict:
    """:data:`TINY_VIT` with ``changes`` (e.g. ``num_layers=3``), a copy."""
    return {**TINY_VIT, **changes}
