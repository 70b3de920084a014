"""mmlocat.text.class_names: class-name files, a model argument's class
list, a config's dataset classes."""
import json

import pytest
from mmengine.config import Config

from mmlocat import text as te

names_from_annotations = te.names_from_annotations
resolve_class_names = te.resolve_class_names


def test_names_from_annotations_and_resolve(tmp_path):
    cats = [
        dict(id=3, name='c', frequency='r'),
        dict(id=1, name='a', frequency='f'),
        dict(id=2, name='b', frequency='c')
    ]
    assert names_from_annotations(dict(categories=cats)) == (['a', 'b',
                                                              'c'], ['a', 'b'])
    coco = [
        dict(id=1, name='a', split='base'),
        dict(id=2, name='n', split='novel')
    ]
    assert names_from_annotations(dict(categories=coco)) == (['a', 'n'], ['a'])
    lvis = resolve_class_names('LVISV1Dataset')
    assert len(lvis) == 1203 and lvis[0] == 'aerosol_can'
    txt = tmp_path / 'names.txt'
    txt.write_text('x\ny\n')
    assert resolve_class_names(str(txt)) == ['x', 'y']
    # An annotation file gives its categories in id order.
    ann = tmp_path / 'ann.json'
    ann.write_text(json.dumps(dict(categories=cats)))
    assert resolve_class_names(str(ann)) == ['a', 'b', 'c']
    with pytest.raises(ValueError, match='neither'):
        resolve_class_names('NoSuchDataset')
    # ImageNet's two lists by name (ZeroShotAccuracy's class_names)
    names = resolve_class_names('imagenet_open_clip')
    assert len(names) == 1000 and names[0] == 'tench'
    assert resolve_class_names('imagenet_wordnet')[0].startswith('tench, ')
    with pytest.raises(ValueError, match="'imagenet_x' is neither"):
        resolve_class_names('imagenet_x')


def _names_file(tmp_path, text, name='names.txt'):
    path = tmp_path / name
    path.write_bytes(text.encode('utf-8'))
    return str(path)


def test_class_name_files_read_as_sclips_get_cls_idx(tmp_path):
    """Line k = class k, names split at exactly ', ' (SCLIP's
    ``get_cls_idx``); a missing last newline and CRLF are read the same.
    SCLIP kept ``a,b`` as one name; since issue 34 it is refused (it was
    ``['a,b', 'c ']`` here: test_ambiguous_synonym_lines_name_file_and_line).
    """
    lines = [['person', 'person in shirt'], ['ship'], ['a b', 'c ']]
    for text in ('person, person in shirt\nship\na b, c ',
                 'person, person in shirt\nship\na b, c \n',
                 'person, person in shirt\r\nship\r\na b, c \r\n'):
        assert te.read_class_name_file(_names_file(tmp_path, text)) == lines
    for text, match in (('a\n\nb\n', ':2: empty class name'),
                        ('a, , b\n', ':1: empty class name'),
                        ('a, a\n', ':1: a name is listed twice'),
                        ('', 'is empty'), ('\n', 'is empty')):
        with pytest.raises(ValueError, match=match):
            te.read_class_name_file(_names_file(tmp_path, text))
    with pytest.raises(FileNotFoundError, match='nope.txt'):
        te.read_class_name_file(str(tmp_path / 'nope.txt'))


def test_class_name_lines_against_the_dataset():
    classes = ['aeroplane', 'boat', 'traffic light', 'background']
    # another class's name is fine where that class's line has it too
    ok = [['aeroplane'], ['ship'], ['trafficlight'], ['sky', 'aeroplane']]
    te.check_class_name_lines(ok, classes, 'f.txt')
    # where it has not, it reads as a misplaced line
    with pytest.raises(ValueError, match="f.txt:4 lists 'boat'"):
        te.check_class_name_lines(ok[:3] + [['sky', 'boat']], classes, 'f.txt')
    with pytest.raises(ValueError, match='f.txt has 3 lines .* 4 classes'):
        te.check_class_name_lines(ok[:3], classes, 'f.txt')
    swapped = [['aeroplane'], ['trafficlight'], ['ship'], ['sky']]
    with pytest.raises(
            ValueError,
            match="f.txt:2 lists 'trafficlight', the "
            "name of dataset class 2 \\('traffic light'\\)"):
        te.check_class_name_lines(swapped, classes, 'f.txt')


def _cfg(dataset, model=None, scope='mmseg'):
    return Config(
        dict(
            default_scope=scope,
            test_dataloader=dict(dataset=dataset),
            model=model or {}))


def test_dataset_classes_scope_rule():
    """The config's metainfo over its type's METAINFO, the type resolved in
    the registry of the config's default scope (or the one given)."""
    from mmseg.datasets import PascalVOCDataset
    voc = list(PascalVOCDataset.METAINFO['classes'])
    assert te.dataset_classes(_cfg(dict(type='PascalVOCDataset'))) == voc
    meta = te.dataset_metainfo(
        _cfg(dict(type='PascalVOCDataset', metainfo=dict(classes=['a']))))
    assert meta == dict(classes=['a'])  # the type is not looked up
    # without classes the type's metainfo fills what the config leaves out
    meta = te.dataset_metainfo(
        _cfg(dict(type='PascalVOCDataset', metainfo=dict(palette=[[1]]))))
    assert meta == dict(
        classes=PascalVOCDataset.METAINFO['classes'], palette=[[1]])
    # an mmlocat type by its scoped name, from mmseg's registry
    coco_object = te.dataset_classes(
        _cfg(dict(type='mmlocat.COCOObjectDataset')))
    assert len(coco_object) == 81 and coco_object[0] == 'background'
    # mmdet's LVIS type from mmdet's registry (the scope given wins)
    lvis = _cfg(dict(type='LVISV1Dataset'), scope='mmseg')
    assert len(te.dataset_classes(lvis, scope='mmdet')) == 1203
    with pytest.raises(
            ValueError,
            match="test dataset 'NoSuchType' of the config has "
            'no classes'):
        te.dataset_classes(_cfg(dict(type='NoSuchType')))
    assert te.dataset_metainfo(Config(dict(model={}))) == {}


def test_zero_shot_classes_drop_a_constant_background(tmp_path):
    dataset = dict(
        type='PascalVOCDataset', metainfo=dict(classes=['background', 'x']))
    assert te.zero_shot_classes(_cfg(dataset)) == ['background', 'x']
    assert te.zero_shot_classes(_cfg(dataset, dict(bg_thresh=0.5))) == ['x']
    sky = _cfg(
        dict(type='X', metainfo=dict(classes=['sky', 'x'])),
        dict(bg_thresh=0.5, background_class='sky'))
    assert te.zero_shot_classes(sky) == ['x']
    assert te.zero_shot_class_name_lines(sky) == [['x']]
    names = tmp_path / 'names.txt'
    names.write_text('y, x\n')
    sky.model['class_name_file'] = str(names)
    assert te.zero_shot_class_name_lines(sky) == [['y', 'x']]


# -- issue 35: messages that name the file, the line and the fix ----------


def test_latin1_class_name_file_names_file_line_and_fix(tmp_path):
    """A Latin-1 file ended in a bare UnicodeDecodeError (no file)."""
    path = tmp_path / 'names.txt'
    path.write_bytes('cat\ncaf\u00e9 chair\n'.encode('latin-1'))
    for read in (te.read_class_names, te.read_class_name_file):
        with pytest.raises(ValueError) as info:
            read(str(path))
        message = str(info.value)
        assert message.startswith(f'{path}:2: bytes '), message
        assert 'not valid utf-8' in message and 'save it as UTF-8' in message


@pytest.mark.parametrize('name,text,where', [
    ('names.txt', 'cat\ndog\ncat\n', 'lines 1 and 3'),
    ('names.json', '["cat", "dog", "cat"]', 'items 1 and 3'),
])
def test_duplicate_class_names_are_named_with_both_places(
        tmp_path, name, text, where):
    path = _names_file(tmp_path, text, name)
    assert te.read_class_names(path) == ['cat', 'dog', 'cat']  # sidecars
    with pytest.raises(ValueError) as info:
        te.read_class_names(path, unique=True)
    last = where.split()[-1]
    assert str(info.value) == (
        f"{path}:{last}: class name 'cat' is listed twice ({where}); a "
        f'class is one {where.split()[0][:-1]}: remove one of them')


def test_truncated_class_name_json_names_line_and_column(tmp_path):
    path = _names_file(tmp_path, '[\n"cat",\n"do', 'names.json')
    with pytest.raises(ValueError) as info:
        te.read_class_names(path)
    assert str(info.value).startswith(f'{path}:3:1: not valid JSON')


@pytest.mark.parametrize('line, bad', [('cat,kitten', 'cat,kitten'),
                                       ('cat; kitten', 'cat; kitten'),
                                       ('dog, cat,kitten', 'cat,kitten')])
def test_ambiguous_synonym_lines_name_file_and_line(tmp_path, line, bad):
    """Issue 34: ``a,b`` and ``a; b`` silently became one query name."""
    from mmlocat.text import read_class_name_file
    path = tmp_path / 'names.txt'
    path.write_text(f'person, man\n{line}\n', encoding='utf-8')
    with pytest.raises(ValueError) as info:
        read_class_name_file(str(path))
    assert f'{path}:2: {bad!r}' in str(info.value)
    assert "exactly ', '" in str(info.value)


def test_a_synonym_file_is_not_a_name_list(tmp_path, repo_root):
    """Issue 34: the shipped SCLIP class-name file given to ``--classes`` /
    ``--names`` became single names with commas."""
    from mmlocat.text import read_class_names
    with pytest.raises(
            ValueError,
            match=r'coco-object.txt:1: .* holds a '
            'separator.*a .json list'):
        read_class_names(f'{repo_root}/configs/last/class_names/'
                         'coco-object.txt')
    # the documented escape: a .json list keeps a comma in a name
    path = tmp_path / 'names.json'
    path.write_text('["tench, Tinca tinca", "goldfish"]', encoding='utf-8')
    assert read_class_names(str(path)) == ['tench, Tinca tinca', 'goldfish']


def test_one_class_list_grammar(tmp_path):
    """Issue 34: one reader for every class-list argument (file, comma
    string, list, named list, dataset type, one typed name)."""
    assert resolve_class_names(' cat, remote control ,') == [
        'cat', 'remote control'
    ]
    # one typed name is one class; a named list wins over a class of its
    # name, a dataset type too
    assert resolve_class_names('cat') == ['cat']
    assert len(resolve_class_names('imagenet_open_clip')) == 1000
    assert len(resolve_class_names('CocoDataset')) == 80
    for bad, message in (('cat; dog', '";" does not separate'),
                         ('imagenet_openclip', 'is neither'),
                         ('CocDataset', 'is neither'), (' , ', 'empty')):
        with pytest.raises(ValueError, match=message):
            resolve_class_names(bad)
    with pytest.raises(ValueError, match=r"'cat' is listed twice \(items 1 "):
        resolve_class_names('cat, dog, cat', unique=True)
    # a named list is taken as shipped (open_clip names missile twice)
    assert len(resolve_class_names('imagenet_open_clip', unique=True)) == 1000


def test_empty_line_in_a_name_list_names_file_and_line(tmp_path):
    """Issue 34: an empty line in the middle of a list was skipped."""
    path = _names_file(tmp_path, 'cat\n\ndog\n\n')
    with pytest.raises(ValueError, match=f'{path}:2: empty line'):
        te.read_class_names(path)
    path = _names_file(tmp_path, 'cat\ndog\n\n', 'end.txt')  # at the end
    assert te.read_class_names(path) == ['cat', 'dog']


def test_a_name_on_two_class_lines_names_both_lines(repo_root):
    """Issue 34: a name on two class lines was accepted silently; the
    background line is the one documented escape (SCLIP's coco-object.txt
    lists 'bed' on its background line 1 and as class 60, line 61)."""
    classes = ['cat', 'dog', 'background']
    with pytest.raises(ValueError) as info:
        te.check_class_name_lines(
            [['cat', 'kitty'], ['dog', 'kitty'], ['sky']], classes, 'f.txt')
    assert str(info.value).startswith(
        "f.txt:2: 'kitty' is also on line 1 (lines 1 and 2)")
    te.check_class_name_lines([['cat'], ['dog'], ['sky', 'dog']], classes,
                              'f.txt')
    from mmlocat.datasets import COCOObjectDataset
    path = f'{repo_root}/configs/last/class_names/coco-object.txt'
    lines = te.read_class_name_file(path)
    assert 'bed' in lines[0] and 'bed' in lines[60]
    te.check_class_name_lines(lines, COCOObjectDataset.METAINFO['classes'],
                              path)
