"""Tiny ``arch`` dicts for tests (CPU, milliseconds per forward)."""
__all__ = ['TINY_VIT', 'DINO_S2', 'tiny_vit', 'tiny_open_clip_cfg']

#: The default tiny ViT: 32-d, 2 blocks, 2 heads, MLP 64.
TINY_VIT = dict(
    embed_dims=32, num_layers=2, num_heads=2, feedforward_channels=64)

#: DINO's ViT-S/16 widths at 2 blocks (timm / DINO checkpoint layout).
DINO_S2 = dict(
    embed_dims=384, num_layers=2, num_heads=6, feedforward_channels=1536)


def tiny_vit(**changes) -> dict:
    """:data:`TINY_VIT` with ``changes`` (e.g. ``num_layers=3``), a copy."""
    return {**TINY_VIT, **changes}


def tiny_open_clip_cfg(embed_dim: int = 16,
                       text_width: int = 32,
                       text_layers: int = 2,
                       context_length: int = 77,
                       **vision) -> dict:
    """An open_clip model config (``open_clip.CLIP(**cfg)``, an
    ``--model-config`` JSON) of a tiny CLIP: CLIP's BPE vocabulary, a
    ``text_width``-d text tower with ``text_width // 16`` heads and a
    1-block, 32-d, 32-px vision tower (``vision`` changes it)."""
    vision_cfg = dict(
        image_size=32, layers=1, width=32, head_width=16, patch_size=16)
    vision_cfg.update(vision)
    return dict(
        embed_dim=embed_dim,
        vision_cfg=vision_cfg,
        text_cfg=dict(
            context_length=context_length,
            vocab_size=49408,
            width=text_width,
            heads=max(1, text_width // 16),
            layers=text_layers))
