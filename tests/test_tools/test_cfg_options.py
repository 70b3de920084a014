"""Config overrides are checked at start by every tool (issue 35).

``--cfg-options test_dataloder.dataset.data_root=...`` (a typo in a
top-level key) evaluated the config's own data, ``randomnes.seed=123``
trained with the config's seed, and ``default_hooks.checkpoint.intervl=1``
failed at the first checkpoint save. tools/train.py, tools/test.py and
tools/misc/check_dataset.py now stop before building anything, naming the
key and the closest existing one (tools/infer.py: tests/test_tools/
test_infer.py); ``--cfg-new-keys`` adds a key on purpose.
"""
import os.path as osp

from helpers.harness import run_tool

SEG = 'configs/locat/upernet_locat-b_ade20k.py'


def _exit_line(tool, *args):
    """Run ``tool``; it must exit 2 with one error line, returned."""
    proc = run_tool(tool, *args)
    assert proc.returncode == 2, proc.stderr[-3000:]
    return proc.stderr.strip().splitlines()[-1]


def test_train_refuses_a_misspelt_top_level_key(repo_root, tmp_path):
    config = osp.join(repo_root, SEG)
    work = tmp_path / 'work'
    line = _exit_line('tools/train.py', config, '--work-dir', work,
                      '--cfg-options', 'randomnes.seed=123')
    assert line == (
        f"train.py: error: --cfg-options randomnes.seed: {config} has no "
        "top-level key 'randomnes' (the override would be ignored); did "
        "you mean 'randomness'? to add the key on purpose, pass "
        '--cfg-new-keys randomnes')
    assert not work.exists()


def test_train_refuses_a_misspelt_hook_keyword_before_training(
        repo_root, tmp_path):
    work = tmp_path / 'work'
    line = _exit_line('tools/train.py', osp.join(repo_root,
                                                 SEG), '--work-dir', work,
                      '--cfg-options', 'default_hooks.checkpoint.intervl=1')
    assert line.startswith(
        'train.py: error: default_hooks.checkpoint.intervl: '
        "CheckpointHook takes no argument 'intervl'; did you mean "
        "'interval'?"), line
    assert not work.exists()  # before the work dir lock, the Runner


def test_test_refuses_a_misspelt_top_level_key(repo_root, tmp_path):
    config = osp.join(repo_root, SEG)
    ckpt = tmp_path / 'model.pth'
    ckpt.write_bytes(b'not read: the options are checked first')
    line = _exit_line('tools/test.py', config, ckpt, '--cfg-options',
                      'test_dataloder.dataset.data_root=/data/ade')
    assert line.startswith(
        'test.py: error: --cfg-options test_dataloder.dataset.data_root: '
        f"{config} has no top-level key 'test_dataloder'"), line
    assert "did you mean 'test_dataloader'?" in line


def test_check_dataset_refuses_a_misspelt_key_and_takes_new_keys(repo_root):
    tool = 'tools/misc/check_dataset.py'
    config = osp.join(repo_root, SEG)
    line = _exit_line(tool, config, '--cfg-options',
                      'train_dataloder.dataset.data_root=/no/such/root')
    assert line.startswith('check_dataset.py: error: --cfg-options '
                           'train_dataloder.dataset.data_root'), line
    assert "did you mean 'train_dataloader'?" in line
    # the escape lets the new key through: the checker then reads the
    # config's own (missing) data and says so, not the option
    line = _exit_line(tool, config, '--cfg-options', 'my_note=1',
                      'train_dataloader.dataset.data_root=/no/such/root',
                      '--cfg-new-keys', 'my_note')
    assert '--cfg-options' not in line and '/no/such/root' in line, line
