"""What is wrong with one data file, in one line.

Shared by the dataset checker (:mod:`mmlocat.datasets.dataset_check`), the
training / testing wrapper :class:`mmlocat.CheckedDataset` and
:class:`mmlocat.CheckSegMap`, so the three name a fault the same way.

A file is read with mmengine's file backends (as ``LoadImageFromFile``
reads it) and decoded twice: with ``mmcv.imfrombytes`` (OpenCV, the
loaders' decoder) and with Pillow, whose full decode is the one that tells
a truncated file (OpenCV returns no image for it, and mmcv's loader then
fails with ``failed to load image``; older OpenCV builds return a partly
grey image instead). EXIF orientation is read with Pillow: OpenCV applies
it when decoding with ``color_type='color'`` (mmcv's default) and the
annotations of the file may not follow.

A local path is stat-ed before it is opened and never opened unless it is
a regular file: a directory fails to load and a FIFO blocks its reader
forever (``not_regular``). A JPEG that libjpeg decodes with its warning
``Corrupt JPEG data: N extraneous bytes before marker 0xXX`` (printed
without a file name; the pixels may be damaged) is found by walking its
markers as libjpeg does (:func:`jpeg_corruption`).
"""
import io
import os
import stat
from typing import Dict, Iterator, List, NamedTuple, Optional, Tuple

import mmcv
from mmengine import fileio
from PIL import Image, UnidentifiedImageError

__all__ = [
    'FAULT_KINDS', 'DataFileError', 'Fault', 'bytes_fault', 'read_or_fault',
    'file_fault', 'first_file_fault', 'exif_orientation', 'sample_files',
    'read_sample_file', 'hw_text', 'rotation_hint', 'regular_file_fault',
    'sample_file_fault', 'jpeg_corruption'
]

#: Every kind of fault the checks report, in report order.
FAULT_KINDS = ('missing', 'not_regular', 'empty', 'undecodable', 'truncated',
               'size_mismatch', 'label_channels', 'label_out_of_range',
               'box_outside', 'exif_rotated', 'load_error')

#: The fields of a data sample that name a file (mmengine / mmseg /
#: mmdet / mmpretrain data infos).
FILE_KEYS = ('img_path', 'seg_map_path')

# EXIF orientations that swap height and width (rotations by 90 / 270
# degrees, with or without a mirror); 1 is "as stored".
EXIF_ORIENTATION_TAG = 0x0112
TRANSPOSING = (5, 6, 7, 8)


class DataFileError(ValueError):
    """A data file that cannot be used; the message names it (one line).

    Args:
        message: The one-line message.
        fault: The :class:`Fault` behind it, when known.
    """

    def __init__(self, message: str, fault: Optional['Fault'] = None) -> None:
        super().__init__(message)
        self.fault = fault


class Fault(NamedTuple):
    """One fault: its kind (:data:`FAULT_KINDS`), the file, what is wrong."""
    kind: str
    path: str
    detail: str

    def __str__(self) -> str:
        return f'{self.path}: {self.detail}'


def hw_text(hw: Tuple[int, int]) -> str:
    """``(h, w)`` as ``'HxW'`` (the order every message uses)."""
    return f'{int(hw[0])}x{int(hw[1])}'


def sample_files(info: Dict) -> Iterator[Tuple[str, str]]:
    """``(key, path)`` of the files a data sample names."""
    for key in FILE_KEYS:
        path = info.get(key)
        if isinstance(path, str) and path:
            yield key, path


def _file_type(mode: int) -> str:
    for test, name in ((stat.S_ISDIR, 'a directory'), (stat.S_ISFIFO,
                                                       'a FIFO (named pipe)'),
                       (stat.S_ISSOCK, 'a socket'), (stat.S_ISCHR,
                                                     'a character device'),
                       (stat.S_ISBLK, 'a block device')):
        if test(mode):
            return name
    return 'no regular file'


def regular_file_fault(path: str) -> Optional[Fault]:
    """``missing`` or ``not_regular`` for a local path that is no regular
    file, from ``os.stat`` alone (it opens nothing); None for a regular
    file or a URL (another backend's)."""
    if '://' in path:
        return None
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        return Fault('missing', path, 'file not found')
    except OSError as err:
        return Fault('missing', path, f'cannot be read: {err}')
    if stat.S_ISREG(mode):
        return None
    return Fault(
        'not_regular', path, f'{_file_type(mode)}, not a regular file: '
        'loading it fails or (a FIFO) blocks forever, and a folder listing '
        'leaves it out; put the file there')


def sample_file_fault(info: Dict) -> Optional[Fault]:
    """The first file of a data sample that is missing or no regular file
    (``os.stat`` only), or None."""
    for key, path in sample_files(info):
        if not _is_member(info, key):
            fault = regular_file_fault(path)
            if fault is not None:
                return fault
    return None


def read_sample_file(info: Dict, key: str) -> bytes:
    """The bytes of ``info[key]``: a file, or a webdataset member (the
    info's ``shard`` / ``offset`` / ``size``, see
    :class:`mmlocat.WebDatasetCaptionDataset`).

    Raises:
        DataFileError: A local path that is no regular file (never
            opened: a FIFO would block).
    """
    if _is_member(info, key):
        with open(info['shard'], 'rb') as f:
            f.seek(info['offset'])
            return f.read(info['size'])
    fault = regular_file_fault(info[key])
    if fault is not None and fault.kind == 'not_regular':
        raise DataFileError(str(fault), fault)
    return fileio.get(info[key])


def _is_member(info: Dict, key: str) -> bool:
    return key == 'img_path' and 'shard' in info


def _pillow_fault(data: bytes) -> Optional[str]:
    """Pillow's reason the bytes are truncated, or None."""
    try:
        with Image.open(io.BytesIO(data)) as img:
            img.load()
    except UnidentifiedImageError:
        return None  # a format Pillow does not read: OpenCV decides
    except (OSError, SyntaxError, ValueError) as err:
        text = str(err)
        if 'truncated' in text.lower() or 'broken' in text.lower():
            return text
    return None


def _decodes(data: bytes) -> bool:
    try:
        return mmcv.imfrombytes(data, flag='unchanged') is not None
    except Exception:  # OpenCV raises on some inputs, returns None on others
        return False


def bytes_fault(path: str, data: bytes) -> Optional[Fault]:
    """The fault of an image's encoded bytes (``empty``, ``truncated``,
    ``undecodable``), or None if they decode."""
    if not data:
        return Fault('empty', path, 'empty file (0 bytes)')
    truncated = _pillow_fault(data)
    if truncated is not None:
        return Fault('truncated', path,
                     f'truncated image ({len(data)} bytes): {truncated}')
    if not _decodes(data):
        return Fault('undecodable', path,
                     f'cannot be decoded as an image ({len(data)} bytes)')
    return None


def read_or_fault(info: Dict,
                  key: str) -> Tuple[Optional[bytes], Optional[Fault]]:
    """``(bytes, None)`` of the file ``info[key]``, or ``(None, fault)``
    when it is missing or unreadable."""
    path = info[key]
    if not _is_member(info, key):
        fault = regular_file_fault(path)
        if fault is not None:
            return None, fault
        if not fileio.exists(path):
            return None, Fault('missing', path, 'file not found')
    try:
        return read_sample_file(info, key), None
    except OSError as err:
        return None, Fault('missing', path, f'cannot be read: {err}')


def file_fault(info: Dict, key: str) -> Optional[Fault]:
    """The fault of the file ``info[key]`` names, or None if it decodes.

    Kinds: ``missing``, ``empty`` (0 bytes), ``truncated`` (Pillow's full
    decode stops early) and ``undecodable`` (OpenCV reads no image).
    """
    data, fault = read_or_fault(info, key)
    return fault if fault is not None else bytes_fault(info[key], data)


def first_file_fault(info: Dict) -> Optional[Fault]:
    """The first fault among the files of a data sample, or None."""
    for key, _ in sample_files(info):
        fault = file_fault(info, key)
        if fault is not None:
            return fault
    return None


def exif_orientation(data: bytes) -> int:
    """The EXIF orientation of encoded image bytes (1 when none)."""
    try:
        with Image.open(io.BytesIO(data)) as img:
            return int(img.getexif().get(EXIF_ORIENTATION_TAG, 1))
    except Exception:  # no readable header: decoding reports it
        return 1


def rotation_hint(info: Dict) -> str:
    """A hint when the sample's image carries a transposing EXIF rotation
    (OpenCV turns it while decoding, its annotation may not follow)."""
    if 'img_path' not in info:
        return ''
    try:
        orientation = exif_orientation(read_sample_file(info, 'img_path'))
    except (OSError, DataFileError):
        return ''
    if orientation not in TRANSPOSING:
        return ''
    return (f'; the image has EXIF orientation {orientation}, which the '
            "loader applies (color_type='color'): use "
            "color_type='color_ignore_orientation' in LoadImageFromFile if "
            'the annotation follows the stored pixels')


_NO_LENGTH = frozenset(range(0xD0, 0xD8)) | {0x01}


def _scan_end(data: bytes, pos: int) -> Optional[int]:
    """Where a JPEG scan's entropy-coded data from ``pos`` ends: the first
    0xFF (with its fill 0xFFs) before a marker code (0x00 is a stuffed
    byte, 0xD0-0xD7 restarts), or None.

    ``bytes.find`` (memchr) between the 0xFFs, not a regular expression:
    this runs on every training load (CheckedDataset), and the regex took
    about as long as decoding the image.
    """
    size = len(data)
    while True:
        at = data.find(b'\xff', pos)
        if at < 0:
            return None
        end = at + 1
        while end < size and data[end] == 0xFF:
            end += 1
        if end >= size:
            return None
        code = data[end]
        if code != 0 and not 0xD0 <= code <= 0xD7:
            return at
        pos = end + 1


def _next_marker(data: bytes, pos: int) -> Optional[Tuple[int, int, int]]:
    """libjpeg's ``next_marker``: ``(marker, position after it, bytes
    discarded before it)``, or None at the end of the data."""
    discarded = 0
    while True:
        at = data.find(b'\xff', pos)
        if at < 0:
            return None
        discarded += at - pos
        pos = at
        while pos < len(data) and data[pos] == 0xFF:
            pos += 1
        if pos >= len(data):
            return None
        code = data[pos]
        pos += 1
        if code != 0:
            return code, pos, discarded
        discarded += 2  # 0xFF 0x00 outside a scan is no marker


def jpeg_corruption(data: bytes) -> List[str]:
    """libjpeg's ``Corrupt JPEG data: N extraneous bytes before marker
    0xXX`` warnings for JPEG bytes (bytes between marker segments that
    libjpeg skips while it decodes the image anyway); ``[]`` for a clean
    JPEG or bytes that are no JPEG.

    Scans are skipped, not Huffman-decoded, so stray bytes at the end of a
    scan's entropy-coded data (which libjpeg counts only once it has
    decoded the scan) are not found; what is found libjpeg reports too.
    """
    if data[:2] != b'\xff\xd8':
        return []
    found, pos = [], 2
    while True:
        step = _next_marker(data, pos)
        if step is None:
            return found
        code, pos, discarded = step
        if discarded:
            found.append(f'Corrupt JPEG data: {discarded} extraneous bytes '
                         f'before marker 0x{code:02x}')
        if code == 0xD9:  # end of image
            return found
        if code in _NO_LENGTH:
            continue
        if pos + 2 > len(data):
            return found
        pos += int.from_bytes(data[pos:pos + 2], 'big')
        if code == 0xDA:  # start of scan: skip its entropy-coded data
            end = _scan_end(data, pos)
            if end is None:
                return found
            pos = end
