"""CLIPSelf's F-ViT detector, transcribed for the tests from its code.

Source: github wusize/CLIPSelf (Apache-2.0), ``F-ViT/models/``
(``evaclip_vit.py``: ``EvaCLIPViT`` with its ``interpolate1-4`` pyramid and
test-time forward; ``fvit_head.py``: ``FViTBBoxHead.forward`` with the VLM
score fusion, ``FViTRoIHead.simple_test_bboxes`` / ``_bbox_forward``;
``fvit.py``: ``FViT.simple_test``; ``custom_rpn_head.py``) and its
``open_clip`` fork (``src/open_clip/eva_clip/eva_vit_model.py``,
``rope.py``: the EVA02-CLIP tower, ``forward_without_attn``,
``rescale_positional_embedding``, ``VisionRotaryEmbeddingFast`` with the
grid tables it caches). Restated in the module tree F-ViT's checkpoints
come from, so that ``state_dict()`` has their key layout (the RoPE module
registered in every attention, cached tables and their counter persistent
as in the released files), around mmdet's own ``FPN``, ``RPNHead``,
``ConvFCBBoxHead``, ``FCNMaskHead`` and ``SingleRoIExtractor`` (their key
names are the same in mmdet 2.28 and 3.3). Nothing here reads mmlocat's
implementation.
"""
import math
from collections import OrderedDict

import torch
import torch.nn.functional as F
import torchvision
from mmcv.cnn import ConvModule
from mmdet.models.dense_heads import RPNHead
from mmdet.models.layers import multiclass_nms
from mmdet.models.necks import FPN
from mmdet.models.roi_heads.bbox_heads import ConvFCBBoxHead
from mmdet.models.roi_heads.mask_heads import FCNMaskHead
from mmdet.models.roi_heads.roi_extractors import SingleRoIExtractor
from mmdet.structures import DetDataSample
from mmdet.structures.bbox import bbox2roi
from mmengine.config import ConfigDict
from torch import nn

__all__ = [
    'FViTReference', 'EVAVisual', 'randomise_', 'mmcv_checkpoint',
    'rope_tables'
]


def rope_tables(grid, head_dim, pt_seq_len, theta=10000.):
    """``VisionRotaryEmbeddingFast`` tables for a ``grid x grid`` input."""
    dim = head_dim // 2
    freqs = 1. / (theta**(torch.arange(0, dim, 2)[:dim // 2].float() / dim))
    t = torch.arange(grid) / grid * pt_seq_len
    f = torch.einsum('i,f->if', t, freqs)
    f = torch.stack((f, f), -1).flatten(-2)  # '... n -> ... (n r)', r = 2
    f = torch.cat((f[:, None, :].expand(grid, grid, dim), f[None, :, :].expand(
        grid, grid, dim)), -1)
    f = f.reshape(grid * grid, -1)
    return f.cos(), f.sin()


def rotate_half(x):
    x = x.reshape(*x.shape[:-1], -1, 2)
    return torch.stack((-x[..., 1], x[..., 0]), -1).flatten(-2)


class Rope(nn.Module):
    """EVA's 2-D RoPE; tables of other grids are cached as (persistent)
    buffers ``freqs_{cos,sin}_N`` and counted in ``flag``."""

    def __init__(self, head_dim, ft_seq_len, pt_seq_len=16):
        super().__init__()
        self.head_dim, self.ft, self.pt = head_dim, ft_seq_len, pt_seq_len
        cos, sin = rope_tables(ft_seq_len, head_dim, pt_seq_len)
        self.register_buffer('freqs_cos', cos)
        self.register_buffer('freqs_sin', sin)
        self.register_buffer('flag', torch.tensor(0, dtype=torch.long))

    def forward(self, t):
        n = t.shape[2]
        if n == self.ft**2:
            cos, sin = self.freqs_cos, self.freqs_sin
        elif hasattr(self, f'freqs_cos_{n}'):
            cos, sin = (getattr(self, f'freqs_cos_{n}'),
                        getattr(self, f'freqs_sin_{n}'))
        else:
            cos, sin = rope_tables(math.isqrt(n), self.head_dim, self.pt)
            self.register_buffer(f'freqs_cos_{n}', cos)
            self.register_buffer(f'freqs_sin_{n}', sin)
            self.flag += 1
        return t * cos + rotate_half(t) * sin


class Attention(nn.Module):

    def __init__(self, dim, heads, rope):
        super().__init__()
        self.heads = heads
        self.q_proj = nn.Linear(dim, dim, bias=False)
        self.k_proj = nn.Linear(dim, dim, bias=False)
        self.v_proj = nn.Linear(dim, dim, bias=False)
        self.q_bias = nn.Parameter(torch.zeros(dim))
        self.v_bias = nn.Parameter(torch.zeros(dim))
        self.inner_attn_ln = nn.LayerNorm(dim, eps=1e-6)
        self.proj = nn.Linear(dim, dim)
        self.rope = rope  # a submodule of every attention, as in EVA

    def forward(self, x):
        b, n, c = x.shape

        def split(t):
            return t.reshape(b, n, self.heads, -1).permute(0, 2, 1, 3)

        q = split(F.linear(x, self.q_proj.weight, self.q_bias))
        k = split(F.linear(x, self.k_proj.weight))
        v = split(F.linear(x, self.v_proj.weight, self.v_bias))
        q = torch.cat((q[:, :, :1], self.rope(q[:, :, 1:])), -2).type_as(v)
        k = torch.cat((k[:, :, :1], self.rope(k[:, :, 1:])), -2).type_as(v)
        attn = (q * (c // self.heads)**-0.5) @ k.transpose(-2, -1)
        x = (attn.softmax(-1) @ v).transpose(1, 2).reshape(b, n, -1)
        return self.proj(self.inner_attn_ln(x))

    def proj_without_attn(self, x):
        x = F.linear(x, self.v_proj.weight, self.v_bias)
        return self.proj(self.inner_attn_ln(x))


class SwiGLU(nn.Module):

    def __init__(self, dim, hidden):
        super().__init__()
        self.w1 = nn.Linear(dim, hidden)
        self.w2 = nn.Linear(dim, hidden)
        self.ffn_ln = nn.LayerNorm(hidden, eps=1e-6)
        self.w3 = nn.Linear(hidden, dim)

    def forward(self, x):
        return self.w3(self.ffn_ln(F.silu(self.w1(x)) * self.w2(x)))


class Block(nn.Module):

    def __init__(self, dim, heads, hidden, rope):
        super().__init__()
        self.norm1 = nn.LayerNorm(dim, eps=1e-6)
        self.attn = Attention(dim, heads, rope)
        self.norm2 = nn.LayerNorm(dim, eps=1e-6)
        self.mlp = SwiGLU(dim, hidden)

    def forward(self, x):
        x = x + self.attn(self.norm1(x))
        return x + self.mlp(self.norm2(x))

    def forward_without_attn(self, x):
        x = x + self.attn.proj_without_attn(self.norm1(x))
        return x + self.mlp(self.norm2(x))


class EVAVisual(nn.Module):
    """``EVAVisionTransformer`` of EVA02-CLIP (no mean pooling: ``norm``
    then ``head``, ``fc_norm`` None)."""

    def __init__(self, dim, depth, heads, hidden, out_dim, patch, img):
        super().__init__()
        self.patch, self.grid = patch, img // patch
        self.patch_embed = nn.Module()
        self.patch_embed.proj = nn.Conv2d(3, dim, patch, patch)
        self.cls_token = nn.Parameter(torch.zeros(1, 1, dim))
        self.pos_embed = nn.Parameter(torch.zeros(1, self.grid**2 + 1, dim))
        self.rope = Rope(dim // heads, self.grid)
        self.blocks = nn.ModuleList(
            Block(dim, heads, hidden, self.rope) for _ in range(depth))
        self.norm = nn.LayerNorm(dim, eps=1e-6)
        self.head = nn.Linear(dim, out_dim)

    def rescale_positional_embedding(self, h, w):
        if (h, w) == (self.grid, self.grid):
            return self.pos_embed
        pe = self.pos_embed[0, 1:].T.reshape(1, -1, self.grid, self.grid)
        pe = F.interpolate(pe, (h, w), mode='bicubic', align_corners=False)
        return torch.cat(
            (self.pos_embed[:, :1], pe.flatten(2).transpose(1, 2)), 1)

    def embed(self, x):
        """Patch tokens after the class token, plus the positions:
        ``(tokens, (h, w))``."""
        b, h, w = x.shape[
            0], x.shape[2] // self.patch, x.shape[3] // self.patch
        x = self.patch_embed.proj(x).flatten(2).transpose(1, 2)
        x = torch.cat((self.cls_token.expand(b, -1, -1), x), 1)
        return x + self.rescale_positional_embedding(h, w), (h, w)

    def encode_dense(self, x):
        """The dense CLIP map: the last block on the value path, ``norm``,
        ``head``, L2 norm (``(B, D, h, w)``)."""
        x, (h, w) = self.embed(x)
        for blk in self.blocks[:-1]:
            x = blk(x)
        x = self.blocks[-1].forward_without_attn(x)[:, 1:]
        x = F.normalize(self.head(self.norm(x)), dim=-1)
        return x.reshape(x.shape[0], h, w, -1).permute(0, 3, 1, 2)


class EvaCLIPViT(nn.Module):
    """F-ViT's backbone: the frozen tower and the trainable pyramid."""

    def __init__(self, visual, out_indices, norm_cfg):
        super().__init__()
        width = visual.pos_embed.shape[-1]
        self.out_indices = out_indices
        self.interpolate1 = nn.Sequential(
            nn.ConvTranspose2d(width, width, 2, 2),
            nn.BatchNorm2d(width) if norm_cfg else nn.Identity(), nn.GELU(),
            nn.ConvTranspose2d(width, width, 2, 2))
        self.interpolate2 = nn.Sequential(
            nn.ConvTranspose2d(width, width, 2, 2))
        self.interpolate3 = nn.Identity()
        self.interpolate4 = nn.MaxPool2d(2, 2)
        self.visual = visual

    def forward(self, x):
        """Test-time forward: 4 pyramid levels and the dense CLIP map."""
        v = self.visual
        b = x.shape[0]
        x, (h, w) = v.embed(x)

        def expand(t):  # _expand_x
            return t[:, 1:].permute(0, 2, 1).contiguous().view(b, -1, h, w)

        outs = []
        for i, blk in enumerate(v.blocks[:-1]):
            x = blk(x)
            if i in self.out_indices:
                outs.append(expand(x))
        x = v.blocks[-1].forward_without_attn(x)
        if len(v.blocks) - 1 in self.out_indices:
            outs.append(expand(x))
        dense = F.normalize(v.head(v.norm(x[:, 1:])), dim=-1)
        dense = dense.reshape(b, h, w, -1).permute(0, 3, 1, 2)
        outs = [
            getattr(self, f'interpolate{i + 1}')(o) for i, o in enumerate(outs)
        ]
        return outs + [dense]


class FViTBBoxHead(ConvFCBBoxHead):
    """``ConvFCBBoxHead`` with F-ViT's cosine classifier and fusion."""

    def __init__(self, class_embed, is_base, vlm_temperature, alpha, beta,
                 learn_bg, **kwargs):
        super().__init__(**kwargs)
        self.detect_temperature = nn.Parameter(torch.tensor(50.0))
        self.vlm_temperature, self.alpha, self.beta = (vlm_temperature, alpha,
                                                       beta)
        self.learn_bg = learn_bg
        all_embed = F.normalize(class_embed.t().contiguous(), dim=0)
        self.register_buffer('all_embeddings', all_embed)
        if learn_bg:
            self.bg_embedding = nn.Parameter(all_embed[:, -1:].clone())
        self.base_idx = torch.tensor(list(is_base) + [True])
        self.novel_idx = ~self.base_idx

    def all_embed(self):
        if not self.learn_bg:
            return self.all_embeddings
        bg = F.normalize(self.bg_embedding, dim=0)
        return torch.cat([self.all_embeddings[:, :-1], bg], 1)

    def fvit_forward(self, x, vlm_box_feats):
        all_embed = self.all_embed().type_as(x)
        for conv in self.shared_convs:
            x = conv(x)
        x = x.flatten(1)
        for fc in self.shared_fcs:
            x = self.relu(fc(x))
        x_cls, x_reg = x, x
        for fc in self.cls_fcs:
            x_cls = self.relu(fc(x_cls))
        for fc in self.reg_fcs:
            x_reg = self.relu(fc(x_reg))
        bbox_pred = self.fc_reg(x_reg)
        x_cls = x_cls / x_cls.norm(dim=-1, keepdim=True)
        cls_score = (x_cls @ all_embed * self.detect_temperature).softmax(-1)
        vlm = F.normalize(vlm_box_feats, dim=-1) @ all_embed
        vlm = (vlm * self.vlm_temperature).softmax(-1)
        base, novel = self.base_idx, self.novel_idx
        cls_score[:, base] = (
            cls_score[:, base]**(1 - self.alpha) * vlm[:, base]**self.alpha)
        cls_score[:, novel] = (
            cls_score[:, novel]**(1 - self.beta) * vlm[:, novel]**self.beta)
        return cls_score, bbox_pred


class FViTReference(nn.Module):
    """F-ViT at test time, with F-ViT's module tree (``state_dict`` keys).

    Args:
        arch: ``dim, depth, heads, hidden, out_dim, patch, img`` of the EVA
            tower.
        out_indices: Tapped blocks.
        channels: FPN / RoI width.
        class_embed: ``(C + 1, D)`` text embeddings, background last.
        is_base: ``C`` flags (novel classes get ``beta`` in the fusion).
        rpn_norm: F-ViT's OV-LVIS ``CustomRPNHead`` (BN after the shared
            convs) instead of ``RPNHead``.
        with_mask: Add the class-agnostic FCN mask head (OV-LVIS).
        learn_bg: A learned background embedding (``learn_bg=True``).
        vlm_temperature, alpha, beta: F-ViT's fusion settings.
        rpn_test_cfg, rcnn_test_cfg: F-ViT's ``test_cfg.rpn`` / ``.rcnn``.
    """

    def __init__(self,
                 arch,
                 out_indices,
                 channels,
                 class_embed,
                 is_base,
                 rpn_test_cfg,
                 rcnn_test_cfg,
                 rpn_norm=False,
                 with_mask=False,
                 learn_bg=False,
                 vlm_temperature=75.0,
                 alpha=0.1,
                 beta=0.8):
        super().__init__()
        dim, patch = arch['dim'], arch['patch']
        norm = dict(type='BN', requires_grad=True)
        self.patch = patch
        self.backbone = EvaCLIPViT(EVAVisual(**arch), out_indices, norm)
        self.neck = FPN([dim] * 4, channels, 5, norm_cfg=norm)
        strides = [patch / 4 * 2**i for i in range(5)]
        self.rpn_head = RPNHead(
            in_channels=channels,
            feat_channels=channels,
            num_convs=2,
            anchor_generator=dict(
                type='AnchorGenerator',
                scales=[8],
                ratios=[0.5, 1.0, 2.0],
                strides=strides),
            bbox_coder=dict(
                type='DeltaXYWHBBoxCoder',
                target_means=[0.0] * 4,
                target_stds=[1.0] * 4),
            test_cfg=ConfigDict(rpn_test_cfg))
        if rpn_norm:  # CustomRPNHead: conv + norm + ReLU per shared conv
            self.rpn_head.rpn_conv = nn.Sequential(*[
                ConvModule(
                    channels,
                    channels,
                    3,
                    padding=1,
                    inplace=False,
                    norm_cfg=norm) for _ in range(2)
            ])
        self.roi_head = nn.Module()
        self.roi_head.bbox_head = FViTBBoxHead(
            class_embed=class_embed,
            is_base=is_base,
            vlm_temperature=vlm_temperature,
            alpha=alpha,
            beta=beta,
            learn_bg=learn_bg,
            num_shared_convs=4,
            num_shared_fcs=2,
            num_cls_fcs=1,
            num_reg_fcs=1,
            in_channels=channels,
            conv_out_channels=channels,
            fc_out_channels=class_embed.shape[1],
            roi_feat_size=7,
            num_classes=len(is_base),
            reg_class_agnostic=True,
            norm_cfg=norm,
            bbox_coder=dict(
                type='DeltaXYWHBBoxCoder',
                target_means=[0.0] * 4,
                target_stds=[0.1, 0.1, 0.2, 0.2]))
        if with_mask:
            self.roi_head.mask_head = FCNMaskHead(
                num_convs=4,
                in_channels=channels,
                conv_out_channels=channels,
                num_classes=len(is_base),
                class_agnostic=True,
                norm_cfg=norm)
        self.roi_extractor = SingleRoIExtractor(
            roi_layer=dict(type='RoIAlign', output_size=7, sampling_ratio=0),
            out_channels=channels,
            featmap_strides=strides[:4])
        self.rcnn_test_cfg = ConfigDict(rcnn_test_cfg)

    def simple_test(self, img):
        """``FViT.simple_test`` on a normalised, padded batch of one image
        (scale factor 1): ``(bboxes, scores, labels)`` after NMS."""
        feats = self.backbone(img)
        x = self.neck(feats[:-1])
        h, w = img.shape[-2:]
        sample = DetDataSample(
            metainfo=dict(img_shape=(h, w), ori_shape=(h, w)))
        proposals = self.rpn_head.predict(x, [sample], rescale=False)
        rois = bbox2roi([p.bboxes for p in proposals])
        bbox_feats = self.roi_extractor(x[:4], rois)
        # F-ViT's vlm_roi_extractor: torchvision's RoIAlign, 1x1, aligned
        vlm = torchvision.ops.roi_align(feats[-1], rois, (1, 1),
                                        1 / self.patch, 0, True)[..., 0, 0]
        head = self.roi_head.bbox_head
        scores, deltas = head.fvit_forward(bbox_feats, vlm)
        boxes = head.bbox_coder.decode(rois[:, 1:], deltas, max_shape=(h, w))
        cfg = self.rcnn_test_cfg
        dets, labels = multiclass_nms(boxes, scores, cfg.score_thr, cfg.nms,
                                      cfg.max_per_img)
        return dets[:, :4], dets[:, 4], labels


def randomise_(model, seed):
    """Random values everywhere (norm weights near 1, positive running
    variances), so that every tensor matters in a comparison."""
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            noise = torch.randn(p.shape, generator=gen)
            if name.endswith('weight') and p.dim() == 1:
                p.copy_(1 + 0.2 * noise)
            elif name.endswith('detect_temperature'):
                p.fill_(30.0)
            else:
                p.copy_(0.1 * noise)
        for name, b in model.named_buffers():
            if name.endswith('running_mean'):
                b.copy_(0.1 * torch.randn(b.shape, generator=gen))
            elif name.endswith('running_var'):
                b.copy_(0.5 + torch.rand(b.shape, generator=gen))
    return model.eval()


def mmcv_checkpoint(model, classes, epoch=3):
    """What mmcv 1.x's ``save_checkpoint`` writes for a model: ``meta``
    (mmdet 2.28's fields, the config as text), ``state_dict`` and the
    optimizer state."""
    params = list(model.parameters())
    return dict(
        meta=dict(
            mmdet_version='2.28.1',
            mmcv_version='1.7.0',
            config="model = dict(type='FViT')\n",
            CLASSES=tuple(classes),
            epoch=epoch,
            iter=epoch * 100,
            time='Mon Oct  2 10:00:00 2023'),
        state_dict=OrderedDict(
            (k, v.detach().clone()) for k, v in model.state_dict().items()),
        optimizer=dict(
            state={
                i: dict(step=torch.tensor(5.0), exp_avg=torch.zeros_like(p))
                for i, p in enumerate(params)
            },
            param_groups=[
                dict(
                    lr=1e-4, weight_decay=0.1, params=list(range(len(params))))
            ]))
