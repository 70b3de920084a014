"""One entry point for every tiny dataset format.

``generate`` is idempotent: it writes a stamp file with its parameters last,
and a second call with the same parameters returns the recorded paths
without touching the files. A call with other parameters first deletes what
the previous call (identified by its stamp) wrote, so no stale image can be
picked up by a dataset that scans folders. It refuses to write over files
it did not create.

A *derived* kind (:data:`DERIVED_KINDS`: COCO-Object, a conversion of COCO
or COCO-Stuff written into their folder, as in ``data/``) first generates
its source kind in the same root with the same parameters (or reuses it,
by the source's stamp) and owns only what the conversion adds; so COCO and
COCO-Object share ``data/coco`` (and COCO-Stuff and COCO-Object
``data/coco_stuff164k``) whatever the order they are generated in.
"""
import json
import os
import os.path as osp
import shutil
from typing import Dict, Sequence

from .caption_writer import (CAPTIONS_OWNED, CC3M_OWNED, write_captions,
                             write_cc3m)
from .common import dump_json
from .imagenet_writer import IMAGENET_OWNED, write_imagenet
from .seg_writers import (ADE20K_OWNED, COCO_STUFF_OWNED, PASCAL_CONTEXT_OWNED,
                          write_ade20k, write_coco_stuff, write_pascal_context)
from .voc_cityscapes_writers import (CITYSCAPES_OWNED, VOC07_OWNED, VOC_OWNED,
                                     write_cityscapes, write_pascal_voc)

__all__ = ['DATASET_KINDS', 'DEFAULT_SUBDIRS', 'DERIVED_KINDS', 'generate']

DATASET_KINDS = ('ade20k', 'coco_stuff', 'pascal_context', 'coco', 'lvis',
                 'imagenet', 'captions', 'pascal_voc', 'pascal_voc07',
                 'cityscapes', 'coco_object', 'coco_object_stuff',
                 'mini_imagenet', 'coco20k', 'coco_captions', 'cc3m')

# Sub-folder of a common root per kind, mirroring the ``data/`` layout the
# upstream configs assume (``data/ade/ADEChallengeData2016``,
# ``data/coco_stuff164k``, ``data/VOCdevkit/VOC2010``, ``VOC2012`` and
# ``VOC2007`` beside it, ``data/coco`` (with COCO20k and COCO Captions),
# ``data/lvis_v1``, ``data/imagenet``, ``data/mini-imagenet``,
# ``data/cc3m``). CIFAR-100 is not written: mmpretrain's ``CIFAR100``
# accepts only the release's files (it checks their md5 sums).
DEFAULT_SUBDIRS = dict(
    ade20k='ade',
    coco_stuff='coco_stuff164k',
    pascal_context='',
    coco='coco',
    lvis='lvis_v1',
    imagenet='imagenet',
    captions='captions',
    pascal_voc='',
    pascal_voc07='',
    cityscapes='cityscapes',
    coco_object='coco',
    coco_object_stuff='coco_stuff164k',
    mini_imagenet='mini-imagenet',
    coco20k='coco',
    coco_captions='coco',
    cc3m='cc3m')

#: Kinds converted from another kind written in the same folder:
#: ``kind -> source kind``.
DERIVED_KINDS = dict(
    coco_object='coco',
    coco_object_stuff='coco_stuff',
    coco20k='coco',
    coco_captions='coco')

# Bump when the output of any writer changes, to invalidate old stamps.
GENERATOR_VERSION = 3


def _write_voc07(root: str, *args, **options) -> Dict:
    return write_pascal_voc(root, *args, year=2007, **options)


def _writer(kind: str, options: Dict):
    if kind == 'ade20k':
        return write_ade20k, ADE20K_OWNED
    if kind == 'coco_stuff':
        return write_coco_stuff, COCO_STUFF_OWNED
    if kind == 'pascal_context':
        return write_pascal_context, PASCAL_CONTEXT_OWNED
    if kind in ('imagenet', 'mini_imagenet'):  # the same folder layout
        return write_imagenet, IMAGENET_OWNED
    if kind == 'cc3m':
        return write_cc3m, CC3M_OWNED
    if kind == 'captions':
        return write_captions, CAPTIONS_OWNED
    if kind == 'pascal_voc':
        year = options.get('year', 2012)
        return write_pascal_voc, VOC07_OWNED if year == 2007 else VOC_OWNED
    if kind == 'pascal_voc07':  # the CorLoc rows' VOC 2007, beside 2012
        return _write_voc07, VOC07_OWNED
    if kind == 'cityscapes':
        return write_cityscapes, CITYSCAPES_OWNED
    # The detection writers need pycocotools; import them only when used.
    if kind == 'coco':
        from .coco_writer import COCO_OWNED, write_coco
        return write_coco, COCO_OWNED
    if kind == 'lvis':
        from .lvis_writer import LVIS_OWNED, write_lvis
        return write_lvis, LVIS_OWNED
    # Derived kinds: the writer converts the source's paths.
    if kind == 'coco_object':
        from .coco_object_writer import DERIVED_OWNED, derive_coco_object
        return derive_coco_object, DERIVED_OWNED
    if kind == 'coco_object_stuff':
        from .coco_object_writer import DERIVED_OWNED, derive_coco_object_stuff
        return derive_coco_object_stuff, DERIVED_OWNED
    if kind == 'coco20k':
        from .coco_derived_writers import COCO20K_OWNED, derive_coco20k
        return derive_coco20k, COCO20K_OWNED
    if kind == 'coco_captions':
        from .coco_derived_writers import (COCO_CAPTIONS_OWNED,
                                           derive_coco_captions)
        return derive_coco_captions, COCO_CAPTIONS_OWNED
    raise ValueError(
        f'unknown dataset kind {kind!r}; choose from {DATASET_KINDS}')


def _normalise(obj):
    """What ``obj`` looks like after a JSON round trip."""
    return json.loads(json.dumps(obj))


def generate(kind: str,
             root: str,
             num_train: int = 4,
             num_val: int = 2,
             img_size: Sequence[int] = (64, 64),
             seed: int = 0,
             **options) -> Dict:
    """Generate a tiny dataset of ``kind`` under ``root``.

    Args:
        kind: One of :data:`DATASET_KINDS`.
        root: Directory to write into; the layout under it is that of the
            real dataset (see each writer).
        num_train, num_val: Images per split (per class for 'imagenet').
        img_size: ``(H, W)`` of every image.
        seed: Same arguments, same bytes.
        **options: Extra keyword arguments of the writer (e.g.
            ``segm_format='polygon'`` for 'coco', ``num_classes`` for
            'imagenet' and 'lvis').

    Returns:
        dict: Paths written (``data_root`` plus kind-specific entries).
    """
    writer, owned = _writer(kind, options)
    params = _normalise(
        dict(
            kind=kind,
            num_train=num_train,
            num_val=num_val,
            img_size=list(img_size),
            seed=seed,
            options=options,
            version=GENERATOR_VERSION))
    source = DERIVED_KINDS.get(kind)
    if source is not None:
        source_paths = generate(source, root, num_train, num_val, img_size,
                                seed, **options)
        # the source's files as they are now (a later call with other
        # parameters rewrites them: this stamp no longer matches then)
        params['source'] = _stamp_record(root, source)['params']

        def write(root, *_, **__):
            return writer(root, source_paths)
    else:
        write = writer
    stamp = _stamp_path(root, kind)
    if osp.isfile(stamp):
        record = _stamp_record(root, kind)
        if (record.get('params') == params
                and osp.isdir(record['paths']['data_root'])):
            return record['paths']
        # Our own earlier output with other parameters: start afresh.
        for name in owned:
            path = osp.join(root, name)
            if osp.isdir(path):
                shutil.rmtree(path)
            elif osp.exists(path):  # a file a derived kind added
                os.remove(path)
        os.remove(stamp)
    else:
        clash = [n for n in owned if osp.exists(osp.join(root, n))]
        if clash:
            raise FileExistsError(
                f'{root} already holds {clash} not written by generate() '
                f"(no stamp {osp.basename(stamp)}); use another root for "
                f'the {kind!r} dataset or remove them')
    os.makedirs(root, exist_ok=True)
    paths = _normalise(
        write(root, num_train, num_val, tuple(img_size), seed, **options))
    dump_json(stamp, dict(params=params, paths=paths))
    return paths


def _stamp_path(root: str, kind: str) -> str:
    return osp.join(root, f'.mmlocat_tiny_{kind}.json')


def _stamp_record(root: str, kind: str) -> Dict:
    with open(_stamp_path(root, kind), encoding='utf-8') as f:
        return json.load(f)
