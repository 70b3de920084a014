"""Image-caption pairs from webdataset tar shards, map-style for mmengine.

webdataset's layout (https://github.com/webdataset/webdataset): each
sample is the tar members sharing a key, here ``key.jpg`` (or another
image extension of webdataset's decoder, e.g. ``key.png``) and
``key.txt`` (the caption, UTF-8), as img2dataset / open_clip write them.
The shard list is webdataset's notation (braces, ``::``), expanded by
webdataset itself; keys are split from extensions by webdataset's rule.
Each shard is indexed once (member headers only, with :mod:`tarfile`) and
an item's image is read by offset, so mmengine samplers, resuming and
``group_by_image`` work as for the other caption datasets, with their
rules: missing images refused or skipped with a count, empty captions
refused. A sample with no caption member is refused naming its shard and
key (``missing_captions='skip'`` drops such samples with a warning that
counts and names them; open_clip's webdataset loader drops them silently).
Captions that are not ``encoding`` are refused naming the shard member and
the line.

A shard cut short (an interrupted copy or download) is refused naming the
shard: a member whose data runs past the end of the file, and a shard
that does not end with the two zero blocks that close every tar archive
(a cut at a member boundary or inside a header, which :mod:`tarfile`
reads as a shorter archive). Where img2dataset's per-shard record
``<shard stem>_stats.json`` lies next to a shard (``successes``: the
samples it wrote), the shard's sample count must match it.
"""
import json
import logging
import os
import os.path as osp
import tarfile
from typing import Dict, List, Optional, Sequence, Tuple

import mmcv
from mmengine.logging import print_log

from mmlocat.registry import DATASETS
from .captions import MISSING_POLICIES, BaseCaptionDataset, Pair, decode_text
from .file_checks import DataFileError, Fault, bytes_fault, read_sample_file

__all__ = ['WebDatasetCaptionDataset']

# The pipeline step the dataset replaces (it decodes the image itself).
FILE_LOADERS = ('LoadImageFromFile', )
# A tar archive ends with two zero blocks of 512 bytes (POSIX).
TAR_BLOCK = 512
TAR_END = 2 * TAR_BLOCK


def import_webdataset():
    """``webdataset``, or an ImportError that says how to get it."""
    try:
        import webdataset
    except ImportError as err:
        raise ImportError(
            'mmlocat.WebDatasetCaptionDataset reads webdataset tar shards '
            'and needs the webdataset package (pip install webdataset); '
            'or use CocoCaptionDataset / TsvCaptionDataset') from err
    return webdataset


def _loader_steps(pipeline: Sequence) -> List[str]:
    steps = []
    for step in pipeline:
        kind = step.get('type') if isinstance(step, dict) else type(step)
        name = kind if isinstance(kind, str) else getattr(kind, '__name__', '')
        if name.split('.')[-1] in FILE_LOADERS:
            steps.append(name)
    return steps


def _check_tar_end(shard: str, size: int, end: int,
                   last: Optional[str]) -> None:
    """Refuse a shard whose last member (ending at byte ``end``) is not
    followed by the tar end-of-archive blocks."""
    with open(shard, 'rb') as f:
        f.seek(end)
        tail = f.read(TAR_END)
    if len(tail) == TAR_END and not tail.strip(b'\0'):
        return
    after = f'after member {last!r}' if last else 'at its start'
    found = ('nothing' if not tail else f'{len(tail)} bytes' +
             (' of zeros' if not tail.strip(b'\0') else
              ' that are no complete tar header'))
    raise ValueError(
        f'{shard} is truncated {after} (byte {end}): a tar shard ends '
        f'with {TAR_END} zero bytes, the file has {found} there, so '
        'samples after it may be lost; copy or download the shard again')


def recorded_count_file(shard: str) -> str:
    """img2dataset's record of a shard: ``<shard stem>_stats.json``."""
    return osp.splitext(shard)[0] + '_stats.json'


def _check_recorded_count(shard: str, found: int) -> None:
    """Refuse a shard with another number of samples than its
    ``_stats.json`` records (``successes``), where there is one."""
    record = recorded_count_file(shard)
    if not osp.isfile(record):
        return
    try:
        with open(record, encoding='utf-8') as f:
            count = json.load(f)['successes']
    except (ValueError, KeyError, TypeError) as err:
        raise ValueError(
            f'{record}: not an img2dataset shard record with an integer '
            f"'successes' ({type(err).__name__}: {err}); fix or remove it")
    if isinstance(count, bool) or not isinstance(count, int):
        raise ValueError(f"{record}: 'successes' must be an integer, got "
                         f'{count!r}')
    if count != found:
        raise ValueError(
            f'{shard} holds {found} samples, its record {record} says '
            f"{count} ('successes'): the shard is incomplete or another "
            'one; copy or download it again (or remove the stale record)')


@DATASETS.register_module()
class WebDatasetCaptionDataset(BaseCaptionDataset):
    """Captioned images in webdataset tar shards.

    The image is decoded by the dataset (the bytes in the shard, with
    ``mmcv.imfrombytes`` as ``LoadImageFromFile`` would), so the pipeline
    starts after loading: a ``LoadImageFromFile`` step is refused. Items
    (``dataset[i]``) carry ``img``, ``img_shape``, ``ori_shape`` and
    ``img_path`` (``'<shard>/<member>'``, for the log and the metas);
    ``get_data_info`` gives the member's location (``shard``, ``offset``,
    ``size``) without decoding it.

    Example::

        dict(type='mmlocat.WebDatasetCaptionDataset', data_root='data/cc3m',
             ann_file='shards/cc3m-train-{0000..0575}.tar',
             pipeline=[dict(type='RandomResizedCrop', scale=224), ...])

    Args:
        ann_file: Shard list in webdataset's notation, e.g.
            ``'shards/train-{000000..000009}.tar'`` (under ``data_root``
            when relative).
        split_lines: Every non-empty line of ``key.txt`` is one caption of
            the image (COCO-style several captions). Default: the whole
            file is one caption, as open_clip's webdataset loader reads it.
        color_type: ``mmcv.imfrombytes`` flag (``LoadImageFromFile``'s
            ``color_type``).
        imdecode_backend: ``mmcv.imfrombytes`` backend.
        missing_captions: ``'error'`` (default) or ``'skip'`` for samples
            without a ``key.txt`` member (see the module doc).
        encoding: The text encoding of the ``key.txt`` members.
        **kwargs: :class:`BaseCaptionDataset` arguments
            (``missing_images``, ``group_by_image``, ...).
    """

    def __init__(self,
                 ann_file: str,
                 split_lines: bool = False,
                 color_type: str = 'color',
                 imdecode_backend: str = 'cv2',
                 missing_captions: str = 'error',
                 encoding: str = 'utf-8',
                 pipeline: Sequence = (),
                 **kwargs) -> None:
        import_webdataset()  # the clear error before anything else
        if missing_captions not in MISSING_POLICIES:
            raise ValueError(f'missing_captions must be one of '
                             f'{MISSING_POLICIES}, got {missing_captions!r}')
        self.missing_captions = missing_captions
        self.encoding = encoding
        loaders = _loader_steps(pipeline)
        if loaders:
            raise ValueError(
                f'WebDatasetCaptionDataset decodes the images from the shards '
                f'itself: remove {loaders} from its pipeline')
        self.split_lines = split_lines
        self.color_type = color_type
        self.imdecode_backend = imdecode_backend
        # '<shard>/<member>' -> (shard, data offset, size)
        self._members: Dict[str, Tuple[str, int, int]] = {}
        super().__init__(ann_file=ann_file, pipeline=list(pipeline), **kwargs)

    def shards(self) -> List[str]:
        """The expanded shard paths (webdataset's notation)."""
        return list(import_webdataset().shardlists.expand_urls(self.ann_file))

    def load_data_list(self) -> List[dict]:
        data_list = super().load_data_list()
        self._members = {}  # the items hold the locations now
        return data_list

    def check_ann_file(self) -> None:
        missing = [s for s in self.shards() if not osp.isfile(s)]
        if missing:
            raise FileNotFoundError(
                f'{len(missing)} webdataset shard(s) of {self.ann_file} not '
                f'found, e.g. {missing[:5]}')

    def image_path(self, path: str) -> str:
        # '<shard>/<member>': the shard path is under data_root already
        return path

    def _index(self, shard: str) -> 'Dict[str, Dict[str, tarfile.TarInfo]]':
        """key -> extension -> member, in shard order."""
        samples: Dict[str, Dict[str, tarfile.TarInfo]] = {}
        base_plus_ext = import_webdataset().tariterators.base_plus_ext
        size = os.path.getsize(shard)
        end, last = 0, None
        try:
            with tarfile.open(shard, mode='r:') as tar:
                for info in tar:
                    data_end = info.offset_data + info.size
                    if data_end > size:
                        raise ValueError(
                            f'{shard} is truncated inside member '
                            f'{info.name!r}: its data ends at byte '
                            f'{data_end}, the file has {size} bytes; copy '
                            'or download the shard again')
                    end = info.offset_data + -(-info.size // TAR_BLOCK) * \
                        TAR_BLOCK
                    last = info.name
                    if not info.isfile():
                        continue
                    key, ext = base_plus_ext(info.name)
                    if key is None:
                        continue  # no extension: not a sample member
                    sample = samples.setdefault(key, {})
                    if ext.lower() in sample:
                        raise ValueError(
                            f'{shard}: member {info.name!r} repeats sample '
                            f'{key!r} (webdataset keys are unique)')
                    sample[ext.lower()] = info
        except tarfile.TarError as err:
            raise ValueError(f'{shard} is not an uncompressed tar shard: '
                             f'{err}') from None
        _check_tar_end(shard, size, end, last)
        _check_recorded_count(shard, len(samples))
        return samples

    def _caption(self, shard: str, info: tarfile.TarInfo) -> List:
        with open(shard, 'rb') as f:
            f.seek(info.offset_data)
            data = f.read(info.size)
        text = decode_text(data, self.encoding, f'{shard}/{info.name}')
        if not self.split_lines:
            return [text]
        return [line for line in text.splitlines() if line.strip()] or ['']

    def read_pairs(self) -> List[Pair]:
        images = tuple(import_webdataset().autodecode.IMAGE_EXTENSIONS)
        pairs = []
        uncaptioned = []
        for shard in self.shards():
            samples = self._index(shard)
            if not samples:
                raise ValueError(f'{shard} holds no webdataset samples')
            for key, members in samples.items():
                if 'txt' not in members:
                    uncaptioned.append(f'{shard} key {key!r} (members '
                                       f'{sorted(members)})')
                    continue
                found = [e for e in images if e in members]
                if found:
                    info = members[found[0]]
                    path = f'{shard}/{info.name}'
                    self._members[path] = (shard, info.offset_data, info.size)
                else:  # named by its key; image_exists() says no
                    path = f'{shard}/{key}.<no image: {sorted(members)}>'
                for caption in self._caption(shard, members['txt']):
                    pairs.append(
                        (path, caption, f'{osp.basename(shard)} key {key!r}'))
        if uncaptioned:
            self._refuse_uncaptioned(uncaptioned, len(pairs))
        return pairs

    def _refuse_uncaptioned(self, uncaptioned: List[str], kept: int) -> None:
        msg = (f'{len(uncaptioned)} sample(s) of {self.ann_file} have no '
               f'caption (key.txt) member, e.g. {uncaptioned[:5]}')
        if self.missing_captions == 'error':
            raise ValueError(msg + "; fix the shards or set "
                             "missing_captions='skip'")
        print_log(
            msg + f"; skipped (missing_captions='skip'), {kept} caption(s) "
            'kept',
            logger='current',
            level=logging.WARNING)

    def image_exists(self, path: str) -> bool:
        return path in self._members

    def image_fields(self, path: str) -> dict:
        shard, offset, size = self._members[path]
        return dict(img_path=path, shard=shard, offset=offset, size=size)

    def load_image(self, info: dict) -> dict:
        """Decode the item's image from its shard, as ``LoadImageFromFile``
        would (``img``, ``img_shape``, ``ori_shape``)."""
        data = read_sample_file(info, 'img_path')
        try:
            img = mmcv.imfrombytes(
                data, flag=self.color_type, backend=self.imdecode_backend)
        except Exception:  # OpenCV raises on empty input
            img = None
        if img is None:
            fault = bytes_fault(info['img_path'], data) or Fault(
                'undecodable', info['img_path'],
                f'cannot be decoded as an image ({len(data)} bytes)')
            raise DataFileError(str(fault), fault)
        info.update(img=img, img_shape=img.shape[:2], ori_shape=img.shape[:2])
        return info

    def prepare_data(self, idx: int):
        return self.pipeline(self.load_image(self.get_data_info(idx)))
