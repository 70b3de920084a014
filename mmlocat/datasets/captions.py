"""Image-caption datasets for contrastive (CLIP) training.

Two on-disk formats users have: COCO Captions JSON (``captions_*.json``:
``images`` with ``id`` / ``file_name``, ``annotations`` with ``image_id`` /
``caption``) and a CC3M-style TSV (``path<TAB>caption`` per line, optionally
with a header naming the columns, as open_clip's ``CsvDataset``).
Webdataset tar shards: :mod:`mmlocat.datasets.caption_shards` (needs the
optional ``webdataset``).

Missing images are never skipped silently: ``missing_images='error'``
(default) refuses the file, ``'skip'`` drops them with a warning that counts
and names them. Empty captions are an error. Bytes that are not the file's
``encoding`` (UTF-8 unless told) are an error naming the file, the line and
the bytes.

TSV quoting (``TsvCaptionDataset(quoting=...)``): ``'csv'`` (default) reads
the file as open_clip's ``CsvDataset`` does (pandas ``read_csv`` with
``sep='\t'``: Python's csv dialect with ``"`` quotes), so a caption in
double quotes may hold tabs (and ``""`` for a quote); a quote that opens a
field must close it (a caption that starts with a quote is quoted itself).
``'none'``: quotes are plain characters and every tab separates columns.
Either way a row with another number of columns than the header (2
without a header) is refused naming the file and the line, so a tab inside
a caption never cuts it silently. Nor does a quote merge rows silently: a
quoted field that runs over a line break (a caption that opens a quote and
never closes it on its line takes the next rows in, until a quote) is
refused naming the file and the lines, unless the captions do hold line
breaks and the user says so (``multiline_captions=True``); so each row is
one physical line.
"""
import csv
import io
import json
import logging
import os
import os.path as osp
from collections import OrderedDict
from typing import Dict, Iterator, List, Optional, Sequence, Set, Tuple, Union

from mmengine.dataset import BaseDataset
from mmengine.logging import print_log

from mmlocat.registry import DATASETS

__all__ = [
    'BaseCaptionDataset', 'CocoCaptionDataset', 'TsvCaptionDataset',
    'decode_text', 'read_text', 'TSV_QUOTING', 'read_image_ids'
]

MISSING_POLICIES = ('error', 'skip')
#: ``TsvCaptionDataset(quoting=...)`` -> the csv module's quoting rule.
TSV_QUOTING = dict(csv=csv.QUOTE_MINIMAL, none=csv.QUOTE_NONE)


def decode_text(data: bytes,
                encoding: str,
                where: str,
                fix: Optional[str] = None) -> str:
    """``data`` decoded with ``encoding``.

    Args:
        data: The file's bytes.
        encoding: Their encoding.
        where: The file, for the message.
        fix: What the message tells the user to do; default: re-encode
            the file or set ``encoding=``.

    Raises:
        ValueError: Naming ``where``, the line and the bytes that are not
            ``encoding`` (instead of a bare ``UnicodeDecodeError``).
    """
    try:
        return data.decode(encoding)
    except UnicodeDecodeError as err:
        line = data.count(b'\n', 0, err.start) + 1
        fix = fix or (f're-encode the file as {encoding} or set encoding= '
                      "to its encoding (e.g. encoding='latin-1')")
        raise ValueError(
            f'{where}:{line}: bytes {data[err.start:err.end]!r} are not '
            f'valid {encoding} ({err.reason}); {fix}') from None


def read_text(path: str, encoding: str = 'utf-8') -> str:
    """The text of a file, with :func:`decode_text`'s errors."""
    with open(path, 'rb') as f:
        return decode_text(f.read(), encoding, path)


# (image path relative to the image prefix, caption, where it was read)
Pair = Tuple[str, str, str]


class BaseCaptionDataset(BaseDataset):
    """Common part: validation, missing-image policy, grouping.

    Each item is ``dict(img_path, caption, img_id)`` (one caption; training)
    or, with ``group_by_image``, ``dict(img_path, captions, img_id)`` (all
    captions of an image; retrieval evaluation).

    Args:
        ann_file: Caption file.
        missing_images: ``'error'`` or ``'skip'`` (see the module doc).
        group_by_image: One item per image with all its captions.
        data_prefix: ``dict(img_path=...)``: folder of the images.
        **kwargs: Other :class:`mmengine.dataset.BaseDataset` arguments.
    """

    def __init__(self,
                 ann_file: str,
                 missing_images: str = 'error',
                 group_by_image: bool = False,
                 data_prefix: dict = dict(img_path=''),
                 **kwargs) -> None:
        if missing_images not in MISSING_POLICIES:
            raise ValueError(f'missing_images must be one of '
                             f'{MISSING_POLICIES}, got {missing_images!r}')
        self.missing_images = missing_images
        self.group_by_image = group_by_image
        super().__init__(ann_file=ann_file, data_prefix=data_prefix, **kwargs)

    def read_pairs(self) -> List[Pair]:
        """The ``(image, caption, where)`` pairs of ``self.ann_file``."""
        raise NotImplementedError

    def check_ann_file(self) -> None:
        """Raise if ``self.ann_file`` cannot be read."""
        if not osp.isfile(self.ann_file):
            raise FileNotFoundError(f'caption file not found: {self.ann_file}')

    def image_exists(self, path: str) -> bool:
        """Whether the image of a pair (prefix joined) exists."""
        return osp.isfile(path)

    def image_fields(self, path: str) -> dict:
        """Item fields that locate the image (``img_path`` here)."""
        return dict(img_path=path)

    def image_path(self, path: str) -> str:
        """The path of a pair's image: under the image prefix (which
        mmengine has joined to ``data_root``)."""
        return osp.join(self.data_prefix.get('img_path', ''), path)

    def load_data_list(self) -> List[dict]:
        self.check_ann_file()
        try:
            pairs = self.read_pairs()
        except UnicodeDecodeError as err:
            # a reader that decoded by itself: name the file and the line
            read_text(self.ann_file, err.encoding)
            raise
        if not pairs:
            raise ValueError(f'{self.ann_file} holds no captions')
        by_image: 'OrderedDict[str, List[str]]' = OrderedDict()
        for path, caption, where in pairs:
            if not caption or not caption.strip():
                raise ValueError(f'{self.ann_file}: empty caption at '
                                 f'{where} (image {path!r})')
            by_image.setdefault(self.image_path(path),
                                []).append(caption.strip())
        missing = [p for p in by_image if not self.image_exists(p)]
        if missing:
            msg = (f'{self.ann_file}: {len(missing)} of {len(by_image)} '
                   f'images not found, e.g. {missing[:5]}')
            if len(missing) == len(by_image):
                # skipping would drop everything: the paths are wrong
                prefix = self.data_prefix.get('img_path', '')
                raise FileNotFoundError(
                    msg + '; none was found: check data_root and '
                    f'data_prefix (image prefix {prefix!r}, working '
                    f'directory {os.getcwd()})')
            if self.missing_images == 'error':
                raise FileNotFoundError(
                    msg + "; fix the paths or set missing_images='skip'")
            print_log(
                msg + f"; skipped (missing_images='skip'), "
                f'{len(by_image) - len(missing)} images kept',
                logger='current',
                level=logging.WARNING)
            for path in missing:
                del by_image[path]
        data_list = []
        for img_id, (path, captions) in enumerate(by_image.items()):
            where = self.image_fields(path)
            if self.group_by_image:
                data_list.append(dict(where, captions=captions, img_id=img_id))
            else:
                data_list.extend(
                    dict(where, caption=c, img_id=img_id) for c in captions)
        return data_list


def read_image_ids(spec: Union[str, Sequence[int]]) -> Set[int]:
    """Image ids from a list, a ``.txt`` (one id a line) or a ``.json``
    (a list of ids, or a COCO / LVIS-format file: the ids of its
    ``images``; LVIS uses COCO's image ids).

    Raises:
        FileNotFoundError: A missing file.
        ValueError: Something that is not a list of integer ids.
    """
    where = 'exclude_ids'
    if isinstance(spec, str):
        where = spec
        if not osp.isfile(spec):
            raise FileNotFoundError(f'image-id list not found: {spec}')
        if spec.endswith('.json'):
            with open(spec, encoding='utf-8') as f:
                data = json.load(f)
            if isinstance(data, dict):
                if 'images' not in data:
                    raise ValueError(
                        f'{spec} is neither a list of image ids nor a '
                        "COCO / LVIS-format file (no 'images')")
                data = [img.get('id') for img in data['images']]
        else:
            with open(spec, encoding='utf-8') as f:
                data = [line.strip() for line in f if line.strip()]
            try:
                data = [int(x) for x in data]
            except ValueError as err:
                raise ValueError(f'{spec}: one integer image id a line '
                                 f'expected ({err})') from None
    else:
        data = list(spec)
    bad = [x for x in data if isinstance(x, bool) or not isinstance(x, int)]
    if bad:
        raise ValueError(f'{where}: image ids must be integers, got '
                         f'{bad[:5]}')
    return set(data)


@DATASETS.register_module()
class CocoCaptionDataset(BaseCaptionDataset):
    """COCO Captions (``captions_{train,val}2017.json``).

    Example (train2017 without the LVIS v1 val images, which LVIS drew from
    it)::

        dict(type='mmlocat.CocoCaptionDataset', data_root='data/coco',
             ann_file='annotations/captions_train2017.json',
             data_prefix=dict(img_path='train2017/'),
             exclude_ids='data/lvis_v1/annotations/lvis_v1_val.json')

    Args:
        exclude_ids: Images to leave out, by COCO image id: a list, or a
            file (:func:`read_image_ids`: e.g. ``lvis_v1_val.json``). The
            number left out is logged; a list that matches no image of
            ``ann_file`` is an error (a wrong file).
        **kwargs: :class:`BaseCaptionDataset` arguments.
    """

    def __init__(self,
                 *args,
                 exclude_ids: Union[str, Sequence[int], None] = None,
                 **kwargs) -> None:
        self.exclude_ids = exclude_ids
        self._excluded = (
            read_image_ids(exclude_ids) if exclude_ids is not None else None)
        super().__init__(*args, **kwargs)

    def _drop_excluded(self, files: Dict[int, str]) -> Dict[int, str]:
        if self._excluded is None:
            return files
        where = (
            self.exclude_ids if isinstance(self.exclude_ids, str) else
            f'exclude_ids ({len(self._excluded)} ids)')
        hit = self._excluded & set(files)
        if not hit:
            raise ValueError(
                f'{where} matches no image of {self.ann_file} '
                f'({len(files)} images, ids e.g. {sorted(files)[:3]}); '
                'exclude_ids takes COCO image ids')
        print_log(
            f'{self.ann_file}: left out {len(hit)} of {len(files)} images '
            f'listed in {where}; {len(files) - len(hit)} images kept',
            logger='current',
            level=logging.INFO)
        return {k: v for k, v in files.items() if k not in hit}

    def read_pairs(self) -> List[Pair]:
        with open(self.ann_file, encoding='utf-8') as f:
            data = json.load(f)
        if not isinstance(data, dict) or not {'images', 'annotations'
                                              } <= set(data):
            raise ValueError(f'{self.ann_file} is not a COCO captions file '
                             "(needs 'images' and 'annotations')")
        files: Dict[int, str] = {
            img['id']: img['file_name']
            for img in data['images']
        }
        kept = self._drop_excluded(files)
        pairs = []
        for ann in data['annotations']:
            if ann.get('image_id') not in files:
                raise ValueError(
                    f'{self.ann_file}: annotation {ann.get("id")} names '
                    f'image_id {ann.get("image_id")!r}, which is not in '
                    "'images'")
            if ann['image_id'] not in kept:
                continue
            pairs.append((kept[ann['image_id']], ann.get('caption')
                          or '', f'annotation id {ann.get("id")}'))
        return pairs


@DATASETS.register_module()
class TsvCaptionDataset(BaseCaptionDataset):
    """CC3M-style tab-separated captions: ``path<TAB>caption`` a line.

    Args:
        header: The first line names the columns; ``img_key`` /
            ``caption_key`` select them (open_clip's ``CsvDataset``
            defaults ``filepath`` / ``title``). Without a header the first
            column is the path and the second the caption.
        img_key: Column of the image path (with ``header``).
        caption_key: Column of the caption (with ``header``).
        quoting: ``'csv'`` (default, open_clip's reading) or ``'none'``
            (see the module doc).
        encoding: The file's text encoding; a UTF-8 byte-order mark is
            dropped, as pandas drops it.
        multiline_captions: Quoted captions may hold line breaks (a row
            then spans several lines, as pandas reads it). Default False:
            such a row is refused naming its lines (an unclosed quote
            would merge the following rows into one caption).
        **kwargs: :class:`BaseCaptionDataset` arguments.
    """

    def __init__(self,
                 *args,
                 header: bool = False,
                 img_key: str = 'filepath',
                 caption_key: str = 'title',
                 quoting: str = 'csv',
                 encoding: str = 'utf-8',
                 multiline_captions: bool = False,
                 **kwargs) -> None:
        if quoting not in TSV_QUOTING:
            raise ValueError(f'quoting must be one of {sorted(TSV_QUOTING)}, '
                             f'got {quoting!r}')
        self.header = header
        self.img_key = img_key
        self.caption_key = caption_key
        self.quoting = quoting
        self.encoding = encoding
        self.multiline_captions = multiline_captions
        super().__init__(*args, **kwargs)

    def _columns(self, first: Sequence[str]) -> Tuple[int, int]:
        if not self.header:
            return 0, 1
        for key in (self.img_key, self.caption_key):
            if key not in first:
                raise ValueError(f'{self.ann_file}: header {list(first)} has '
                                 f'no column {key!r}')
        return first.index(self.img_key), first.index(self.caption_key)

    def rows(self) -> Iterator[Tuple[int, List[str]]]:
        """``(first line number, fields)`` of each non-blank row."""
        text = read_text(self.ann_file, self.encoding)
        reader = csv.reader(
            io.StringIO(text.lstrip('\ufeff'), newline=''),
            delimiter='\t',
            quotechar='"',
            doublequote=True,
            quoting=TSV_QUOTING[self.quoting],
            strict=True)
        start = 1
        while True:
            try:
                row = next(reader)
            except StopIteration:
                return
            except csv.Error as err:
                reason = str(err).replace('\t', '\\t')
                raise ValueError(
                    f'{self.ann_file}:{start}: {reason} (quoting='
                    f"{self.quoting!r}: a field that starts with \" must be "
                    'quoted to its end, with "" for a quote inside; set '
                    "quoting='none' if quotes are plain text)") from None
            if reader.line_num > start and not self.multiline_captions:
                self._refuse_multiline(start, reader.line_num)
            if any(field.strip() for field in row):
                yield start, row
            start = reader.line_num + 1

    def _refuse_multiline(self, start: int, end: int) -> None:
        raise ValueError(
            f'{self.ann_file}:{start}: a quoted field runs over lines '
            f'{start}-{end}, so {end - start + 1} lines would load as one '
            'row (a caption that opens a double quote takes the next rows '
            'in until a quote closes it): close the quote on its line '
            '("" for a quote inside), set quoting=\'none\' if quotes are '
            'plain text, or multiline_captions=True if captions do hold '
            'line breaks')

    def read_pairs(self) -> List[Pair]:
        rows = self.rows()
        columns = 2
        img_col, cap_col = 0, 1
        if self.header:
            first = next(rows, None)
            if first is None:
                raise ValueError(f'{self.ann_file} is empty (no header)')
            img_col, cap_col = self._columns(first[1])
            columns = len(first[1])
        pairs = []
        for lineno, cols in rows:
            if len(cols) != columns:
                raise ValueError(
                    f'{self.ann_file}:{lineno}: expected {columns} '
                    f'tab-separated columns, found {len(cols)}'
                    f'{self._column_hint(len(cols) > columns)}: '
                    f'{"|".join(cols)[:80]!r}')
            pairs.append((cols[img_col], cols[cap_col], f'line {lineno}'))
        return pairs

    def _column_hint(self, more: bool) -> str:
        if not more:
            return ' (a missing column)'
        if self.quoting == 'none':
            return (" (a tab inside a caption? with quoting='none' every "
                    "tab separates columns: quote the caption and use "
                    "quoting='csv')")
        return (' (a tab inside a caption? put the caption in double '
                'quotes)')
