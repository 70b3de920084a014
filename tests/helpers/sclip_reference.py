"""An independent transcription of SCLIP's zero-shot segmentation evaluator.

Written from github wangf3014/SCLIP (commit b56bd30): ``clip_segmentor.py``
(``CLIPForSegmentation`` with its CSA attention switched off, i.e. vanilla
CLIP), ``clip/model.py`` (``VisionTransformer.forward(return_all=True)``,
``custom_attn``), ``configs/cfg_*.py`` (test pipeline: ``LoadImageFromFile``
+ ``Resize(scale=(2048, short), keep_ratio=True)``, batch 1) and
``get_cls_idx``. It runs on an open_clip model (the same modules SCLIP's
OpenAI ``clip`` package builds: conv1, class / position embedding, ln_pre,
residual attention blocks, ln_post, proj) and uses mmcv for image decoding
and resizing, as SCLIP's mmseg pipeline does. It shares no code with
mmlocat: a test compares its label maps with mmlocat's shipped configs.

SCLIP runs in float16 on a GPU; this runs in float32 (see the report).
"""
import mmcv
import numpy as np
import torch
import torch.nn.functional as F

# SCLIP's CLIPForSegmentation defaults (clip_segmentor.py:19-21) and data
# preprocessor (clip_segmentor.py:22-26: OpenAI mean / std, channel flip).
MEAN = (122.771, 116.746, 104.094)
STD = (68.501, 66.632, 70.323)
SLIDE_STRIDE = 112
SLIDE_CROP = 224

# prompts/imagenet_template.py: openai_imagenet_template, in order
OPENAI_IMAGENET_TEMPLATES = [
    'a bad photo of a {c}.', 'a photo of many {c}.', 'a sculpture of a {c}.',
    'a photo of the hard to see {c}.', 'a low resolution photo of the {c}.',
    'a rendering of a {c}.', 'graffiti of a {c}.', 'a bad photo of the {c}.',
    'a cropped photo of the {c}.', 'a tattoo of a {c}.',
    'the embroidered {c}.', 'a photo of a hard to see {c}.',
    'a bright photo of a {c}.', 'a photo of a clean {c}.',
    'a photo of a dirty {c}.', 'a dark photo of the {c}.',
    'a drawing of a {c}.', 'a photo of my {c}.', 'the plastic {c}.',
    'a photo of the cool {c}.', 'a close-up photo of a {c}.',
    'a black and white photo of the {c}.', 'a painting of the {c}.',
    'a painting of a {c}.', 'a pixelated photo of the {c}.',
    'a sculpture of the {c}.', 'a bright photo of the {c}.',
    'a cropped photo of a {c}.', 'a plastic {c}.', 'a photo of the dirty {c}.',
    'a jpeg corrupted photo of a {c}.', 'a blurry photo of the {c}.',
    'a photo of the {c}.', 'a good photo of the {c}.',
    'a rendering of the {c}.', 'a {c} in a video game.', 'a photo of one {c}.',
    'a doodle of a {c}.', 'a close-up photo of the {c}.', 'a photo of a {c}.',
    'the origami {c}.', 'the {c} in a video game.', 'a sketch of a {c}.',
    'a doodle of the {c}.', 'a origami {c}.',
    'a low resolution photo of a {c}.', 'the toy {c}.',
    'a rendition of the {c}.', 'a photo of the clean {c}.',
    'a photo of a large {c}.', 'a rendition of a {c}.',
    'a photo of a nice {c}.', 'a photo of a weird {c}.',
    'a blurry photo of a {c}.', 'a cartoon {c}.', 'art of a {c}.',
    'a sketch of the {c}.', 'a embroidered {c}.',
    'a pixelated photo of a {c}.', 'itap of the {c}.',
    'a jpeg corrupted photo of the {c}.', 'a good photo of a {c}.',
    'a plushie {c}.', 'a photo of the nice {c}.', 'a photo of the small {c}.',
    'a photo of the weird {c}.', 'the cartoon {c}.', 'art of the {c}.',
    'a drawing of the {c}.', 'a photo of the large {c}.',
    'a black and white photo of a {c}.', 'the plushie {c}.',
    'a dark photo of a {c}.', 'itap of a {c}.', 'graffiti of the {c}.',
    'a toy {c}.', 'itap of my {c}.', 'a photo of a cool {c}.',
    'a photo of a small {c}.', 'a tattoo of the {c}.'
]


def get_cls_idx(path):
    """clip_segmentor.py:201-212: query names and their class indices."""
    with open(path, 'r') as f:
        name_sets = f.readlines()
    class_names, class_indices = [], []
    for idx in range(len(name_sets)):
        names_i = name_sets[idx].split(', ')
        class_names += names_i
        class_indices += [idx for _ in range(len(names_i))]
    class_names = [item.replace('\n', '') for item in class_names]
    return class_names, class_indices


@torch.no_grad()
def query_features(clip_model, tokenizer, query_words):
    """clip_segmentor.py:35-44: per query, encode its 80 prompts, normalise
    each, average, normalise."""
    features = []
    for qw in query_words:
        query = tokenizer([t.format(c=qw) for t in OPENAI_IMAGENET_TEMPLATES])
        feature = clip_model.encode_text(query)
        feature /= feature.norm(dim=-1, keepdim=True)
        feature = feature.mean(dim=0)
        feature /= feature.norm()
        features.append(feature.unsqueeze(0))
    return torch.cat(features, dim=0)


def load_and_resize(img_path, short_side):
    """The test pipeline of cfg_*.py: LoadImageFromFile (cv2, BGR) and
    mmcv's Resize(scale=(2048, short_side), keep_ratio=True)."""
    img = mmcv.imread(img_path)  # BGR uint8
    resized = mmcv.imrescale(
        img, (2048, short_side), interpolation='bilinear', backend='cv2')
    return img.shape[:2], resized


def preprocess(img_bgr):
    """SegDataPreProcessor(mean, std, rgb_to_bgr=True) on one image:
    channel flip, float, (x - mean) / std; (1, 3, H, W)."""
    x = torch.from_numpy(np.ascontiguousarray(img_bgr.transpose(2, 0, 1)))
    x = x[[2, 1, 0], ...].float()
    mean = torch.tensor(MEAN).view(-1, 1, 1)
    std = torch.tensor(STD).view(-1, 1, 1)
    return ((x - mean) / std)[None]


def custom_attn(attn_layer, x):
    """clip/model.py ``custom_attn`` with csa=False (plain softmax
    attention), on batch-first ``(N, L, D)`` tokens."""
    num_heads = attn_layer.num_heads
    bsz, tgt_len, embed_dim = x.size()
    head_dim = embed_dim // num_heads
    scale = head_dim**-0.5
    q, k, v = F.linear(x, attn_layer.in_proj_weight,
                       attn_layer.in_proj_bias).chunk(
                           3, dim=-1)

    def heads(t):
        return t.reshape(bsz, tgt_len, num_heads,
                         head_dim).permute(0, 2, 1,
                                           3).reshape(bsz * num_heads, tgt_len,
                                                      head_dim)

    q, k, v = heads(q), heads(k), heads(v)
    attn_weights = torch.bmm(q * scale, k.transpose(1, 2))
    attn_weights = F.softmax(attn_weights, dim=-1)
    attn_output = torch.bmm(attn_weights, v)
    attn_output = attn_output.reshape(bsz, num_heads, tgt_len,
                                      head_dim).permute(0, 2, 1, 3).reshape(
                                          bsz, tgt_len, embed_dim)
    return attn_layer.out_proj(attn_output)


@torch.no_grad()
def encode_image_all(visual, x):
    """clip/model.py ``VisionTransformer.forward(return_all=True,
    csa=False)`` on an open_clip ``VisionTransformer`` (batch-first blocks):
    ``ln_post(tokens) @ proj`` of every token, CLS first."""
    x = visual.conv1(x)
    x = x.reshape(x.shape[0], x.shape[1], -1).permute(0, 2, 1)
    cls = visual.class_embedding.to(x.dtype) + torch.zeros(
        x.shape[0], 1, x.shape[-1], dtype=x.dtype)
    x = torch.cat([cls, x], dim=1)
    if x.shape[1] != visual.positional_embedding.shape[0]:
        raise NotImplementedError('only the native grid is transcribed '
                                  '(SCLIP resamples the position '
                                  'embeddings otherwise)')
    x = x + visual.positional_embedding.to(x.dtype)
    x = visual.ln_pre(x)
    blocks = visual.transformer.resblocks
    for blk in blocks[:-1]:
        x = blk(x)
    blk = blocks[-1]
    x = x + custom_attn(blk.attn, blk.ln_1(x))
    x = x + blk.mlp(blk.ln_2(x))
    return visual.ln_post(x) @ visual.proj


@torch.no_grad()
def forward_feature(visual, patch_size, query_feats, img):
    """clip_segmentor.py:59-77: cosines of every patch with every query,
    bilinearly resized to the crop."""
    image_features = encode_image_all(visual, img)
    image_features /= image_features.norm(dim=-1, keepdim=True)
    image_features = image_features[:, 1:]
    logits = image_features @ query_feats.T
    w, h = img[0].shape[-2] // patch_size, img[0].shape[-1] // patch_size
    out_dim = logits.shape[-1]
    logits = logits.permute(0, 2, 1).reshape(-1, out_dim, w, h)
    return F.interpolate(logits, size=img.shape[-2:], mode='bilinear')


@torch.no_grad()
def forward_slide(visual,
                  patch_size,
                  query_feats,
                  img,
                  ori_shape,
                  stride=SLIDE_STRIDE,
                  crop_size=SLIDE_CROP):
    """clip_segmentor.py:79-125 (no PAMR): windows' cosines summed where
    they overlap, divided by the count, resized to the original image."""
    h_stride, w_stride = stride, stride
    h_crop, w_crop = crop_size, crop_size
    batch_size, _, h_img, w_img = img.shape
    out_channels = query_feats.shape[0]
    h_grids = max(h_img - h_crop + h_stride - 1, 0) // h_stride + 1
    w_grids = max(w_img - w_crop + w_stride - 1, 0) // w_stride + 1
    preds = img.new_zeros((batch_size, out_channels, h_img, w_img))
    count_mat = img.new_zeros((batch_size, 1, h_img, w_img))
    for h_idx in range(h_grids):
        for w_idx in range(w_grids):
            y1 = h_idx * h_stride
            x1 = w_idx * w_stride
            y2 = min(y1 + h_crop, h_img)
            x2 = min(x1 + w_crop, w_img)
            y1 = max(y2 - h_crop, 0)
            x1 = max(x2 - w_crop, 0)
            crop_img = img[:, :, y1:y2, x1:x2]
            crop_seg_logit = forward_feature(visual, patch_size, query_feats,
                                             crop_img)
            preds += F.pad(crop_seg_logit, (int(x1), int(preds.shape[3] - x2),
                                            int(y1), int(preds.shape[2] - y2)))
            count_mat[:, :, y1:y2, x1:x2] += 1
    assert (count_mat == 0).sum() == 0
    preds = preds / count_mat
    return F.interpolate(preds, size=ori_shape, mode='bilinear')


def postprocess(seg_logits, query_idx, logit_scale, prob_thd):
    """clip_segmentor.py:148-170 for one image (area_thd None): scale,
    softmax over all queries, a class's max over its queries, argmax,
    pixels below ``prob_thd`` to 0."""
    seg_logits = seg_logits[0] * logit_scale
    seg_logits = seg_logits.softmax(0)
    query_idx = torch.tensor(query_idx, dtype=torch.int64)
    num_cls, num_queries = max(query_idx) + 1, len(query_idx)
    if num_cls != num_queries:
        seg_logits = seg_logits.unsqueeze(0)
        cls_index = F.one_hot(query_idx)
        cls_index = cls_index.T.view(num_cls, num_queries, 1, 1)
        seg_logits = (seg_logits * cls_index).max(1)[0]
    seg_pred = seg_logits.argmax(0, keepdim=True)
    seg_pred[seg_logits.max(0, keepdim=True)[0] < prob_thd] = 0
    return seg_pred[0]


def sclip_cosines(clip_model, query_feats, img_path, short_side):
    """What SCLIP's ``predict`` hands to ``postprocess_result`` for one
    image: ``(1, Q, H, W)`` query cosines at the original size."""
    ori_shape, resized = load_and_resize(img_path, short_side)
    img = preprocess(resized)
    visual = clip_model.visual
    patch = visual.patch_size
    patch = patch[0] if isinstance(patch, (tuple, list)) else patch
    return forward_slide(visual, patch, query_feats, img, ori_shape)
