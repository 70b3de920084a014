"""Regenerate the example pictures of the README's inference section.

Every picture is written by the tools themselves (tools/infer.py,
tools/analysis_tools/vis_gaug.py, vis_patch_score.py) on generated images,
with tiny **random-init** models derived from the shipped configs: they show
what the tools write, not what a trained model predicts. CPU, about a
minute::

    python docs/inference/make_pictures.py [WORK_DIR]   (from the repo root)
"""
import json
import os
import os.path as osp
import pathlib
import subprocess
import sys

import torch
from mmengine.config import Config
from mmengine.registry import MODELS, init_default_scope

ROOT = osp.dirname(osp.dirname(osp.dirname(osp.abspath(__file__))))
OUT = osp.join(ROOT, 'docs', 'inference')
sys.path.insert(0, ROOT)
# A maintainer's script of the checkout (not in the wheel): the pictures
# show what the tests' tiny configs produce, so it derives the segmentation
# and detection configs with the tests' one shrinker (tests/helpers/shrink.py)
# instead of a copy of its rules.
sys.path.insert(0, osp.join(ROOT, 'tests'))

from helpers.shrink import write_tiny_config  # noqa: E402
from helpers.shrink import write_tiny_ovd_config  # noqa: E402

from mmlocat.apis import collect_images  # noqa: E402
from mmlocat.testing import generate  # noqa: E402
from mmlocat.utils.checkpoint_io import save_checkpoint  # noqa: E402

TINY_CLS = """
_base_ = {base!r}
model = dict(
    backbone=dict(arch=dict(_delete_=True, embed_dims=32, num_layers=2,
                            num_heads=2, feedforward_channels=64),
                  img_size=128, patch_size=16),
    head=dict(num_classes=6, in_channels=32))
test_pipeline = [
    dict(type='LoadImageFromFile'),
    dict(type='ResizeEdge', scale=128, edge='short', backend='pillow'),
    dict(type='CenterCrop', crop_size=128),
    dict(type='PackInputs'),
]
test_dataloader = dict(dataset=dict(pipeline=test_pipeline))
"""
TINY_CLIP = dict(
    embed_dim=16,
    vision_cfg=dict(
        image_size=32, layers=1, width=32, head_width=16, patch_size=16),
    text_cfg=dict(
        context_length=77, vocab_size=49408, width=32, heads=2, layers=1))


def _random_checkpoint(cfg, scope, path, meta=None):
    init_default_scope(scope)
    torch.manual_seed(0)
    model = MODELS.build(Config.fromfile(cfg).model)
    model.init_weights()
    save_checkpoint(model.state_dict(), path, meta=meta)
    return path


def _run(*args):
    subprocess.run(
        [sys.executable] + [str(a) for a in args], cwd=ROOT, check=True)


def _keep(src, name):
    """Copy a tool's PNG here, re-encoded with a 256-colour palette to
    keep the repository small."""
    from PIL import Image
    Image.open(src).convert('RGB').quantize(256).save(
        osp.join(OUT, name), optimize=True)
    print(osp.join(OUT, name))


def main(work):
    os.makedirs(work, exist_ok=True)
    imnet = generate(
        'imagenet',
        osp.join(work, 'in'),
        1,
        1, (150, 150),
        seed=3,
        num_classes=6)
    image = collect_images(osp.join(imnet['data_root'], 'val'))[0]
    stem = osp.splitext(osp.basename(image))[0]
    # classification (LocAtViT), GAug maps and patch scores (LaSt-ViT)
    cls_cfg = osp.join(work, 'locat_cls.py')
    with open(cls_cfg, 'w') as f:
        f.write(
            TINY_CLS.format(
                base=osp.join(ROOT, 'configs/locat/locat-t_8xb128_in1k.py')))
    cls_ckpt = _random_checkpoint(
        cls_cfg, 'mmpretrain', osp.join(work, 'locat_cls.pth'),
        dict(dataset_meta=dict(classes=imnet['classes'])))
    _run('tools/infer.py', image, cls_cfg, cls_ckpt, '--out',
         osp.join(work, 'cls'))
    # tools/infer.py names outputs after the image's file name
    _keep(
        osp.join(work, 'cls',
                 osp.basename(image) + '.png'), 'classification.png')
    _run('tools/analysis_tools/vis_gaug.py', cls_cfg, cls_ckpt, image,
         '--queries', '2,5', '--out-dir', osp.join(work, 'gaug'))
    _keep(osp.join(work, 'gaug', stem + '_q2-5_gaug.png'), 'vis_gaug.png')
    last_cfg = osp.join(work, 'last_cls.py')
    with open(last_cfg, 'w') as f:
        f.write(
            TINY_CLS.format(
                base=osp.join(ROOT, 'configs/last/last-b_8xb512_in1k.py')))
    last_ckpt = _random_checkpoint(last_cfg, 'mmpretrain',
                                   osp.join(work, 'last_cls.pth'))
    _run('tools/analysis_tools/vis_patch_score.py', last_cfg, last_ckpt, image,
         '--out-dir', osp.join(work, 'ps'))
    _keep(
        osp.join(work, 'ps', stem + '_patch_score.png'), 'vis_patch_score.png')

    # segmentation: UperNet + LocAtViT on a generated ADE20K image
    ade = generate('ade20k', osp.join(work, 'ade'), 1, 1, (128, 192), seed=0)
    seg_cfg = write_tiny_config(
        osp.join(ROOT, 'configs/locat/upernet_locat-b_ade20k.py'),
        osp.join(work, 'seg.py'), ade['data_root'])
    seg_ckpt = _random_checkpoint(seg_cfg, 'mmseg', osp.join(work, 'seg.pth'))
    seg_dir = osp.join(ade['data_root'], ade['val_img_dir'])
    _run('tools/infer.py', seg_dir, seg_cfg, seg_ckpt, '--out',
         osp.join(work, 'seg'))
    name = osp.relpath(collect_images(seg_dir)[0], seg_dir)
    _keep(osp.join(work, 'seg', name + '.png'), 'segmentation.png')

    # open-vocabulary detection with a vocabulary typed at run time
    import open_clip

    from mmlocat.text import names_from_annotations
    coco = generate('coco', osp.join(work, 'coco'), 1, 1, (160, 160), seed=2)
    val_ann = osp.join(coco['data_root'], coco['ov_val_ann_file'])
    with open(val_ann) as f:
        names, _ = names_from_annotations(json.load(f))
    clip_cfg = osp.join(work, 'tiny-clip16.json')
    with open(clip_cfg, 'w') as f:
        json.dump(TINY_CLIP, f)
    open_clip.add_model_config(clip_cfg)
    torch.manual_seed(0)
    clip = open_clip.create_model('tiny-clip16', pretrained=None)
    weights = osp.join(work, 'tiny-clip16.bin')
    torch.save(clip.state_dict(), weights)
    names_file = osp.join(work, 'coco_names.txt')
    with open(names_file, 'w') as f:
        f.write('\n'.join(names) + '\n')
    emb = osp.join(work, 'coco_tiny-clip.npy')
    _run('tools/misc/dump_text_embeddings.py', '--names', names_file,
         '--model-config', clip_cfg, '--pretrained', weights, '--background',
         emb)
    det_cfg = write_tiny_ovd_config(
        pathlib.Path(work) / 'fvit.py',
        osp.join(ROOT, 'configs/ovd/fvit_clip-b16_ov-coco.py'),
        coco['data_root'], emb, val_ann)
    det_ckpt = _random_checkpoint(det_cfg, 'mmdet', osp.join(work, 'fvit.pth'))
    det_dir = osp.join(coco['data_root'], coco['val_img_dir'])
    _run('tools/infer.py', det_dir, det_cfg, det_ckpt, '--out',
         osp.join(work, 'det'), '--classes', 'cat, remote control, traffic '
         'cone', '--text-model-config', clip_cfg, '--score-thr', '0.5',
         '--vocab-cache', osp.join(work, 'vocab'))
    name = osp.relpath(collect_images(det_dir)[0], det_dir)
    _keep(osp.join(work, 'det', name + '.png'), 'detection_classes.png')


if __name__ == '__main__':
    main(sys.argv[1] if len(sys.argv) > 1 else 'work_dirs/readme_pictures')
