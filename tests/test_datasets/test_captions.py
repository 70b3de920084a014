"""Caption datasets (COCO Captions JSON, TSV) and caption tokenisation."""
import json
import os.path as osp

import open_clip
import pytest
import torch
from mm_warnings import logged_warnings

import mmlocat  # noqa: F401
from mmlocat.datasets import (CocoCaptionDataset, TokenizeCaption,
                              TsvCaptionDataset)
from mmlocat.testing import generate


@pytest.fixture(scope='module')
def captions(tmp_path_factory):
    return generate('captions', str(tmp_path_factory.mktemp('cap')), 6, 3,
                    (32, 32))


def _coco(paths, **kwargs):
    return CocoCaptionDataset(
        data_root=paths['data_root'],
        ann_file=paths['train_ann_file'],
        data_prefix=dict(img_path=paths['train_prefix']),
        **kwargs)


def test_coco_and_tsv_read_the_same_pairs(captions):
    coco = _coco(captions)
    tsv = TsvCaptionDataset(
        data_root=captions['data_root'], ann_file=captions['train_tsv'])
    assert len(coco) == len(tsv) == 12  # 6 images x 2 captions
    for a, b in zip(coco, tsv):
        assert a['caption'] == b['caption']
        assert osp.samefile(a['img_path'], b['img_path'])
        assert a['img_id'] == b['img_id']
    assert coco[0]['caption'].startswith('a red star on a ')
    grouped = _coco(captions, group_by_image=True)
    assert len(grouped) == 6
    assert grouped[0]['captions'] == [coco[0]['caption'], coco[1]['caption']]


def test_tsv_header_columns(tmp_path, captions):
    root = captions['data_root']
    path = tmp_path / 'cc3m.tsv'
    path.write_text('title\tfilepath\nred thing\t' +
                    osp.join(root, 'train2017/000000.jpg') + '\n')
    data = TsvCaptionDataset(ann_file=str(path), header=True)
    assert data[0]['caption'] == 'red thing'
    with pytest.raises(ValueError, match="no column 'url'"):
        TsvCaptionDataset(ann_file=str(path), header=True, img_key='url')
    path.write_text('only-one-column\n')
    with pytest.raises(ValueError, match=r'cc3m.tsv:1: expected 2'):
        TsvCaptionDataset(ann_file=str(path))


def _with_missing(tmp_path, captions):
    with open(osp.join(captions['data_root'],
                       captions['train_ann_file'])) as f:
        ann = json.load(f)
    ann['images'].append(dict(id=99, file_name='gone.jpg'))
    ann['images'].append(dict(id=98, file_name='lost.jpg'))
    ann['annotations'].append(dict(id=990, image_id=99, caption='x'))
    ann['annotations'].append(dict(id=980, image_id=98, caption='y'))
    path = tmp_path / 'missing.json'
    path.write_text(json.dumps(ann))
    return str(path)


def test_missing_images_refused_or_skipped_with_a_count(tmp_path, captions):
    ann = _with_missing(tmp_path, captions)
    prefix = osp.join(captions['data_root'], captions['train_prefix'])
    with pytest.raises(
            FileNotFoundError,
            match=r'2 of 8 images not found.*gone.jpg.*lost.jpg'
            r".*missing_images='skip'"):
        CocoCaptionDataset(ann_file=ann, data_prefix=dict(img_path=prefix))
    with logged_warnings() as warned:
        data = CocoCaptionDataset(
            ann_file=ann,
            data_prefix=dict(img_path=prefix),
            missing_images='skip')
    assert len(data) == 12
    assert any('2 of 8 images not found' in m and 'gone.jpg' in m
               and '6 images kept' in m for m in warned), warned
    with pytest.raises(ValueError, match='missing_images must be one of'):
        CocoCaptionDataset(ann_file=ann, missing_images='ignore')


def test_empty_captions_and_bad_files_are_errors(tmp_path, captions):
    img = osp.join(captions['data_root'], 'train2017/000000.jpg')
    path = tmp_path / 'empty.tsv'
    path.write_text(f'{img}\ta red star\n{img}\t  \n')
    with pytest.raises(ValueError, match=r'empty caption at line 2'):
        TsvCaptionDataset(ann_file=str(path))
    coco = tmp_path / 'coco.json'
    coco.write_text(
        json.dumps(
            dict(
                images=[dict(id=1, file_name=img)],
                annotations=[dict(id=7, image_id=1, caption='')])))
    with pytest.raises(ValueError, match='empty caption at annotation id 7'):
        CocoCaptionDataset(ann_file=str(coco))
    coco.write_text(
        json.dumps(
            dict(
                images=[dict(id=1, file_name=img)],
                annotations=[dict(id=7, image_id=2, caption='a')])))
    with pytest.raises(ValueError, match="image_id 2, which is not in"):
        CocoCaptionDataset(ann_file=str(coco))
    coco.write_text(json.dumps(dict(images=[])))
    with pytest.raises(ValueError, match='not a COCO captions file'):
        CocoCaptionDataset(ann_file=str(coco))
    with pytest.raises(FileNotFoundError, match='nope.json'):
        CocoCaptionDataset(ann_file=str(tmp_path / 'nope.json'))


def test_tokenize_caption_is_open_clips_tokenizer():
    ref = open_clip.get_tokenizer('ViT-B-16')
    step = TokenizeCaption(model_name='ViT-B-16')
    out = step(dict(caption='a red star on a checkerboard'))['text_tokens']
    assert out.dtype == torch.long and out.shape == (77, )
    torch.testing.assert_close(out, ref(['a red star on a checkerboard'])[0])
    many = step(dict(captions=['a', 'b c']))['text_tokens']
    torch.testing.assert_close(many, ref(['a', 'b c']))
    # the four CLIPs of configs/last share the tokenizer (77 BPE tokens)
    for name in ('ViT-L-14-quickgelu', 'EVA02-B-16', 'EVA02-L-14-336'):
        torch.testing.assert_close(
            open_clip.get_tokenizer(name)(['a red star']), ref(['a red star']))
    cfg = dict(text_cfg=dict(context_length=12))
    short = TokenizeCaption(model_cfg=cfg)(dict(caption='a red star'))
    assert short['text_tokens'].shape == (12, )
    with pytest.raises(ValueError, match='empty caption'):
        step(dict(caption=' ', img_path='x.jpg'))
    with pytest.raises(KeyError, match="'caption' or 'captions'"):
        step(dict(img_path='x.jpg'))
    with pytest.raises(ValueError, match='does not know'):
        TokenizeCaption(model_name='nope-1')


def _tsv(tmp_path, data, name='c.tsv'):
    path = tmp_path / name
    path.write_bytes(data if isinstance(data, bytes) else data.encode())
    return str(path)


def test_tsv_quoted_caption_keeps_its_tabs(tmp_path, captions):
    img = osp.join(captions['data_root'], 'train2017/000000.jpg')
    path = _tsv(
        tmp_path, '\ufefffilepath\ttitle\n'
        f'{img}\t"a red\tstar ""on"" a\nchequerboard"\n'
        f'{img}\ta sign saying "stop"\n')
    # a caption with a line break: the opt-in
    data = TsvCaptionDataset(
        ann_file=path, header=True, multiline_captions=True)
    assert [d['caption'] for d in data
            ] == ['a red\tstar "on" a\nchequerboard', 'a sign saying "stop"']
    # quoting='none': quotes are text, every tab a column
    path = _tsv(tmp_path, f'{img}\t"stop" sign\n')
    data = TsvCaptionDataset(ann_file=path, quoting='none')
    assert data[0]['caption'] == '"stop" sign'
    with pytest.raises(ValueError, match='quoting must be one of'):
        TsvCaptionDataset(ann_file=path, quoting='pandas')


def test_tsv_rows_that_would_be_cut_are_refused(tmp_path, captions):
    img = osp.join(captions['data_root'], 'train2017/000000.jpg')
    path = _tsv(tmp_path, f'{img}\ta red star\n{img}\ta red\tstar\n')
    with pytest.raises(
            ValueError,
            match=r'c.tsv:2: expected 2 tab-separated columns, '
            r'found 3 \(a tab inside a caption\? put the caption '
            r'in double quotes\)'):
        TsvCaptionDataset(ann_file=path)
    path = _tsv(tmp_path, f'{img}\t"a red\tstar"\n')
    with pytest.raises(
            ValueError,
            match=r"c.tsv:1: .*found 3 \(a tab inside "
            r"a caption\? with quoting='none'"):
        TsvCaptionDataset(ann_file=path, quoting='none')
    path = _tsv(tmp_path, f'{img}\tfine\n{img}\t"stop" sign\n')
    with pytest.raises(
            ValueError,
            match=r'''c.tsv:2: '\\t' expected after '"' '''
            r"\(quoting='csv'.*set quoting='none' if quotes are "
            r'plain text\)'):
        TsvCaptionDataset(ann_file=path)
    path = _tsv(
        tmp_path, f'filepath\ttitle\turl\n{img}\tred\thttp://x\n'
        f'{img}\tmissing url\n')
    with pytest.raises(
            ValueError,
            match=r'c.tsv:3: expected 3 tab-separated columns, '
            r'found 2 \(a missing column\)'):
        TsvCaptionDataset(ann_file=path, header=True)


def test_tsv_open_quote_never_merges_rows(tmp_path, captions):
    img = osp.join(captions['data_root'], 'train2017/000000.jpg')
    # row 2 opens a quote that row 4 closes: 5 rows would load as 3
    path = _tsv(
        tmp_path, f'{img}\ta red star\n{img}\t"stop sign\n'
        f'{img}\ta blue ring\n{img}\ta ring" on grey\n{img}\tthe end\n'.
        replace('ring" on grey', 'ring"'))
    with pytest.raises(
            ValueError,
            match=r'c.tsv:2: a quoted field runs over lines 2-4, so 3 lines '
            r'would load as one row .*multiline_captions=True'):
        TsvCaptionDataset(ann_file=path)
    # the opt-in reads it as pandas / open_clip do
    data = TsvCaptionDataset(ann_file=path, multiline_captions=True)
    assert len(data) == 3
    assert data[1]['caption'] == (f'stop sign\n{img}\ta blue ring\n{img}\t'
                                  'a ring')


def test_all_images_missing_advises_the_paths_not_skip(tmp_path, captions):
    ann = osp.join(captions['data_root'], captions['train_ann_file'])
    for policy in ('error', 'skip'):
        with pytest.raises(FileNotFoundError) as err:
            CocoCaptionDataset(
                ann_file=ann,
                data_prefix=dict(img_path=str(tmp_path / 'nowhere')),
                missing_images=policy)
        assert '6 of 6 images not found' in str(err.value)
        assert 'none was found: check data_root and data_prefix' in str(
            err.value)
        assert "missing_images='skip'" not in str(err.value)


def test_non_utf8_bytes_are_named_by_file_and_line(tmp_path, captions):
    img = osp.join(captions['data_root'], 'train2017/000000.jpg')
    raw = f'{img}\ta red star\n{img}\ta caf\xe9 sign\n'.encode('latin-1')
    path = _tsv(tmp_path, raw)
    with pytest.raises(
            ValueError,
            match=r"c.tsv:2: bytes b'\\xe9' are not valid utf-8 "
            r"\(invalid continuation byte\).*encoding='latin-1'"):
        TsvCaptionDataset(ann_file=path)
    data = TsvCaptionDataset(ann_file=path, encoding='latin-1')
    assert data[1]['caption'] == 'a caf\xe9 sign'
    coco = tmp_path / 'coco.json'
    coco.write_bytes(
        json.dumps(
            dict(
                images=[dict(id=1, file_name=img)],
                annotations=[dict(id=7, image_id=1, caption='@')]),
            indent=1).replace('@', 'caf\xe9').encode('latin-1'))
    with pytest.raises(
            ValueError,
            match=r"coco.json:\d+: bytes b'\\xe9' are not valid "
            'utf-8'):
        CocoCaptionDataset(ann_file=str(coco))


def _bpe_length(text):
    """Tokens open_clip's BPE tokenizer gives ``text`` before truncation:
    start + BPE tokens + end (open_clip.tokenizer.SimpleTokenizer)."""
    return len(open_clip.tokenizer.SimpleTokenizer().encode(text)) + 2


def test_long_captions_are_truncated_as_open_clip_and_counted():
    from mmlocat.datasets.caption_transforms import over_length
    step = TokenizeCaption(model_name='ViT-B-16')
    ref = open_clip.get_tokenizer('ViT-B-16')
    texts = ['a red star ' * n for n in (1, 25, 26, 40)] + ['x ' * 75]
    lengths = [_bpe_length(t) for t in texts]
    assert lengths == [5, 77, 80, 122, 77]
    assert over_length(step.tokenizer, texts) == [n > 77 for n in lengths]
    with logged_warnings() as warned:
        for _ in range(6):
            out = step(dict(captions=texts, img_path='x.jpg'))['text_tokens']
    torch.testing.assert_close(out, ref(texts))  # open_clip's truncation
    assert out[3, -1] == ref.eot_token_id
    assert step.truncated.count == 12  # 2 long captions x 6 calls
    assert [m.split(' so far')[0] for m in warned] == [
        'captions longer than 77 tokens truncated as open_clip truncates '
        f'them: {n}' for n in (1, 10)
    ]
    assert "e.g. x.jpg: 'a red star a red star" in warned[0]
