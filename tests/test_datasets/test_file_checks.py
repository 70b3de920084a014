"""``jpeg_corruption`` says what libjpeg says: checked against libjpeg's
own warnings (OpenCV's decoder prints them on stderr) for baseline and
progressive JPEGs with and without restart markers, stray bytes between
header segments and at the end of the last scan. The scan's entropy-coded
data is skipped, not decoded: a wrong skip would report bytes libjpeg does
not; stray bytes at the end of a scan, which libjpeg counts only after
Huffman-decoding it, are not found (documented)."""
import cv2
import numpy as np
import pytest

from mmlocat.datasets.file_checks import jpeg_corruption


def _jpeg(seed: int, restart_interval: int, progressive: bool) -> bytes:
    rng = np.random.default_rng(seed)
    image = cv2.GaussianBlur((rng.random((48, 64, 3)) * 255).astype(np.uint8),
                             (3, 3), 1)
    ok, encoded = cv2.imencode('.jpg', image, [
        cv2.IMWRITE_JPEG_RST_INTERVAL, restart_interval,
        cv2.IMWRITE_JPEG_PROGRESSIVE,
        int(progressive)
    ])
    assert ok
    return encoded.tobytes()


def _libjpeg_warnings(data: bytes, capfd) -> list:
    capfd.readouterr()
    assert cv2.imdecode(np.frombuffer(data, np.uint8), 1) is not None
    return [
        line.strip() for line in capfd.readouterr().err.splitlines()
        if line.startswith('Corrupt JPEG data')
    ]


@pytest.mark.parametrize('progressive', [False, True])
@pytest.mark.parametrize('restart_interval', [0, 1, 3])
@pytest.mark.parametrize('where', ['clean', 'after_app0', 'end_of_scan'])
def test_agrees_with_libjpeg(progressive, restart_interval, where, capfd):
    for seed in range(3):
        data = _jpeg(seed, restart_interval, progressive)
        if where == 'after_app0':
            end = 4 + int.from_bytes(data[4:6], 'big')
            data = data[:end] + b'\x01\x02\x03' + data[end:]
        elif where == 'end_of_scan':  # stray bytes before the end of image
            assert data[-2:] == b'\xff\xd9'
            data = data[:-2] + b'\x07\x08' + data[-2:]
        expected = _libjpeg_warnings(data, capfd)
        found = jpeg_corruption(data)
        if where == 'end_of_scan':
            assert found == []  # libjpeg may warn: missed, not misreported
        else:
            assert (expected == []) == (where == 'clean')
            assert found == expected
