"""Every branch of tools/setup_env.sh, on a stubbed toolchain.

The script runs for real (bash, coreutils) with a PATH that holds only the
tools it needs and stubs for the rest: a fake interpreter that serves as
``python3.11``, ``-m venv`` (it copies itself to ``VENV/bin/python``),
``-m pip`` (it records the call and writes the wheel ``pip wheel`` would)
and the torch probe (it reports a torch / GPU set-up read from ``STUB_*``
variables); fake ``gcc`` / ``g++`` / ``nvcc`` record their arguments.
Nothing is downloaded or compiled; each run takes well under a second.
"""
import glob
import json
import os
import os.path as osp
import shutil
import stat
import subprocess
import sys
from typing import List, NamedTuple, Optional

import pytest

pytestmark = pytest.mark.env

REPO = osp.dirname(osp.dirname(osp.dirname(osp.abspath(__file__))))
SCRIPT = osp.join(REPO, 'tools', 'setup_env.sh')
TORCH = '2.14.1'
MMCV_WHEEL = 'mmcv-2.1.0-cp311-cp311-linux_x86_64.whl'
# What the script may call besides the stubs: bash builtins aside, these.
TOOLS = ('bash', 'cat', 'chmod', 'cp', 'cut', 'date', 'dirname', 'basename',
         'env', 'ls', 'mkdir', 'mktemp', 'mv', 'nproc', 'rm', 'sed',
         'sha256sum', 'touch')
BUILD_VARS = ('FORCE_CUDA', 'TORCH_CUDA_ARCH_LIST', 'CUDA_HOME',
              'PYTORCH_NVCC', 'CXX', 'CC', 'MMCV_WITH_OPS',
              'CUDA_VISIBLE_DEVICES', 'PATH')

# The fake interpreter. It logs one JSON line per call to $STUB_LOG.
STUB_PYTHON = r'''#!{python} -S
import json, os, shutil, sys

args = sys.argv[1:]
me = os.path.abspath(sys.argv[0])
venv = os.path.dirname(os.path.dirname(me))
env = os.environ
record = dict(exe=me, args=args, cwd=os.getcwd(),
              env={{k: env[k] for k in {build_vars!r} if k in env}})
with open(env['STUB_LOG'], 'a') as f:
    f.write(json.dumps(record) + '\n')
fail = env.get('STUB_FAIL')
if fail and fail in ' '.join(args):
    sys.exit(env.get('STUB_FAIL_MSG', 'stub: failing as asked'))
if args[:2] == ['-m', 'venv']:
    os.makedirs(os.path.join(args[2], 'bin'))
    shutil.copy(me, os.path.join(args[2], 'bin', 'python'))
elif args[:2] == ['-m', 'pip'] and 'wheel' in args:
    # run the compiler wrappers the way torch's build would
    for var, tool in (('CXX', 'g++'), ('PYTORCH_NVCC', 'nvcc')):
        if env.get(var):
            import subprocess
            subprocess.run([env[var], '-O2', '-std=c++17', '-c', 'op.cpp'],
                           check=True)
    out = args[args.index('-w') + 1]
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, {wheel!r}), 'w') as f:
        json.dump(record['env'], f)
elif args[:2] == ['-m', 'pip'] and any('/mmcv-' in a for a in args):
    with open(os.path.join(venv, 'mmcv-installed'), 'w') as f:
        f.write(args[-1])
elif args[:1] == ['-c'] and 'import mmcv' in args[1]:
    if not os.path.exists(os.path.join(venv, 'mmcv-installed')):
        sys.exit("ModuleNotFoundError: No module named 'mmcv'")
    print('2.1.0')
elif args[:1] == ['-c'] and 'import torch' in args[1]:
    print('cp311', env.get('STUB_TORCH_CUDA', '13.0'),
          env.get('STUB_GPU_ARCHS', 'none'))
elif args[:1] == ['-c']:
    sys.exit('stub python: unexpected -c program')
'''

# A fake compiler: `--version` answers like nvcc, any call is logged.
STUB_COMPILER = '''#!/usr/bin/env bash
echo "$(basename "$0") $*" >> "$STUB_LOG.compilers"
if [[ "$1" == --version ]]; then
    echo "Cuda compilation tools, release ${STUB_NVCC_VERSION}, V0"
fi
'''


class Result(NamedTuple):
    returncode: int
    stdout: str
    stderr: str
    calls: List[dict]
    compilers: List[str]


def _write_exe(path: str, text: str) -> str:
    os.makedirs(osp.dirname(path), exist_ok=True)
    with open(path, 'w') as f:
        f.write(text)
    os.chmod(path, os.stat(path).st_mode | stat.S_IEXEC)
    return path


class Toolchain:
    """A PATH of stubs + the few real tools the script needs, a cache and
    a log; ``run`` executes the real script with it."""

    def __init__(self, tmp_path):
        self.tmp = tmp_path
        self.bin = str(tmp_path / 'bin')
        self.log = str(tmp_path / 'calls.jsonl')
        self.cache = str(tmp_path / 'cache')
        tools = str(tmp_path / 'tools')
        os.makedirs(tools)
        for tool in TOOLS:
            os.symlink(shutil.which(tool), osp.join(tools, tool))
        stub = STUB_PYTHON.format(
            python=sys.executable, build_vars=BUILD_VARS, wheel=MMCV_WHEEL)
        self.python = _write_exe(osp.join(self.bin, 'python3.11'), stub)
        for compiler in ('gcc', 'g++'):
            self.add_compiler(compiler)
        self.env = dict(
            PATH=f'{self.bin}{os.pathsep}{tools}',
            HOME=str(tmp_path / 'home'),
            MMLOCAT_CACHE=self.cache,
            STUB_LOG=self.log,
            STUB_NVCC_VERSION='13.0')

    def add_compiler(self, name: str, folder: Optional[str] = None) -> str:
        return _write_exe(osp.join(folder or self.bin, name), STUB_COMPILER)

    def remove(self, name: str) -> None:
        os.remove(osp.join(self.bin, name))

    def cached_wheels(self) -> List[str]:
        return sorted(
            osp.relpath(p, self.cache)
            for p in glob.glob(osp.join(self.cache, 'wheels', '*', '*')))

    def run(self, venv: str, cwd: Optional[str] = None, **env) -> Result:
        for name in ('calls.jsonl', 'calls.jsonl.compilers'):
            if osp.exists(self.tmp / name):
                os.remove(self.tmp / name)
        cwd = cwd or str(self.tmp)
        os.makedirs(cwd, exist_ok=True)
        proc = subprocess.run(['bash', SCRIPT, venv],
                              cwd=cwd,
                              env={
                                  **self.env,
                                  **env
                              },
                              capture_output=True,
                              text=True,
                              timeout=60)
        calls, compilers = [], []
        if osp.exists(self.log):
            with open(self.log) as f:
                calls = [json.loads(line) for line in f]
        if osp.exists(self.log + '.compilers'):
            with open(self.log + '.compilers') as f:
                compilers = f.read().splitlines()
        return Result(proc.returncode, proc.stdout, proc.stderr, calls,
                      compilers)


@pytest.fixture
def chain(tmp_path):
    return Toolchain(tmp_path)


def pip_calls(result: Result, sub: str) -> List[dict]:
    return [
        c for c in result.calls
        if c['args'][:2] == ['-m', 'pip'] and sub in c['args']
    ]


def wheel_builds(result: Result) -> List[dict]:
    return pip_calls(result, 'wheel')


def stamps(venv: str) -> List[str]:
    return glob.glob(osp.join(venv, '.mmlocat-stack-*'))


def assert_ok(result: Result) -> None:
    assert result.returncode == 0, result.stdout + result.stderr


def assert_failed_at(result: Result, step: str, *words: str) -> None:
    """Failed, the failing step named on stderr, each word of the reason /
    fix on stderr."""
    assert result.returncode != 0, result.stdout
    assert f'FAILED at step: {step}' in result.stderr, result.stderr
    assert 'fix: ' in result.stderr, result.stderr
    for word in words:
        assert word in result.stderr, (word, result.stderr)


@pytest.mark.parametrize('relative', [True, False])
def test_cold_cache_compiles_cpu_ops_from_another_directory(chain, relative):
    """The issue's bug: a relative venv and the build's ``cd`` elsewhere."""
    cwd = str(chain.tmp / 'elsewhere')
    venv = 'envs/v' if relative else str(chain.tmp / 'envs' / 'v')
    result = chain.run(venv, cwd=cwd)
    assert_ok(result)
    venv_abs = osp.join(cwd, venv) if relative else venv
    py = osp.join(venv_abs, 'bin', 'python')
    assert os.access(py, os.X_OK)
    first = result.calls[0]
    assert first['exe'] == chain.python  # python3.11 found on PATH
    assert first['args'] == ['-m', 'venv', venv_abs]
    # every later call runs the venv's interpreter by its absolute path
    assert {c['exe'] for c in result.calls[1:]} == {py}
    build, = wheel_builds(result)
    assert build['cwd'] != cwd and build['cwd'] != REPO  # it cd'ed away
    assert build['args'][-1] == 'mmcv==2.1.0'
    assert build['env']['FORCE_CUDA'] == '0'
    assert build['env']['CUDA_VISIBLE_DEVICES'] == ''
    assert build['env']['MMCV_WITH_OPS'] == '1'
    assert build['env']['PATH'].startswith(osp.join(venv_abs, 'bin') + ':')
    assert 'PYTORCH_NVCC' not in build['env']
    # the C++ wrapper turned mmcv's -std=c++17 into C++20 for real g++
    assert 'g++ -O2 -std=c++20 -c op.cpp' in result.compilers
    assert not osp.exists(build['cwd'])  # temporary build folder removed
    wheel = f'wheels/torch-{TORCH}-cp311-cpu/{MMCV_WHEEL}'
    assert chain.cached_wheels() == [wheel]
    install, = [
        c for c in pip_calls(result, 'install')
        if '--no-deps' in c['args'] and c['args'][-1].endswith('.whl')
    ]
    assert install['args'][-1] == osp.join(chain.cache, wheel)
    editable, = [c for c in pip_calls(result, 'install') if '-e' in c['args']]
    assert editable['args'][-1] == REPO
    check, = [
        c for c in result.calls if c['args'][0].endswith('check_stack.py')
    ]
    assert check['args'] == [osp.join(REPO, 'tools/misc/check_stack.py')]
    assert result.calls[-1] == check  # the proof comes last, then the stamp
    assert len(stamps(venv_abs)) == 1


def test_cached_wheel_skips_compile_and_needs_no_compiler(chain):
    wheel_dir = osp.join(chain.cache, 'wheels', f'torch-{TORCH}-cp311-cpu')
    os.makedirs(wheel_dir)
    open(osp.join(wheel_dir, MMCV_WHEEL), 'w').close()
    chain.remove('g++')
    venv = str(chain.tmp / 'v')
    result = chain.run(venv)
    assert_ok(result)
    assert wheel_builds(result) == []
    assert 'using cached' in result.stdout
    assert any(c['args'][-1] == osp.join(wheel_dir, MMCV_WHEEL)
               for c in pip_calls(result, 'install'))
    assert len(stamps(venv)) == 1


def test_legacy_cpu_cache_is_moved_not_recompiled(chain):
    legacy = osp.join(chain.cache, 'wheels', f'torch-{TORCH}-cp311')
    os.makedirs(legacy)
    open(osp.join(legacy, MMCV_WHEEL), 'w').close()
    result = chain.run(str(chain.tmp / 'v'))
    assert_ok(result)
    assert wheel_builds(result) == []
    assert chain.cached_wheels() == [
        f'wheels/torch-{TORCH}-cp311-cpu/{MMCV_WHEEL}'
    ]


def test_stamp_hit_runs_nothing(chain):
    venv = str(chain.tmp / 'v')
    assert_ok(chain.run(venv))
    again = chain.run(venv)
    assert_ok(again)
    assert again.calls == [] and again.compilers == []
    assert 'is up to date' in again.stdout
    # another mmcv choice is another stamp: the set-up runs again
    other = chain.run(venv, MMLOCAT_MMCV='cpu')
    assert_ok(other)
    assert other.calls and len(stamps(venv)) == 1


def test_python3_fallback_and_python_override(chain):
    os.rename(chain.python, osp.join(chain.bin, 'python3'))
    result = chain.run(str(chain.tmp / 'a'))
    assert_ok(result)
    assert result.calls[0]['exe'] == osp.join(chain.bin, 'python3')
    custom = _write_exe(
        str(chain.tmp / 'py' / 'mypython'),
        open(osp.join(chain.bin, 'python3')).read())
    result = chain.run(str(chain.tmp / 'b'), PYTHON=custom)
    assert_ok(result)
    assert result.calls[0]['exe'] == custom


NO_NETWORK = ('ERROR: Could not find a version that satisfies the '
              'requirement torch==2.14.1 (from versions: none)')


@pytest.mark.parametrize(
    'fail_on, step, words',
    [('stack.txt', 'install torch 2.14.1', ('PIP_INDEX_URL', 'network')),
     ('mmcv==2.1.0', 'compile mmcv 2.1.0 with CPU ops', ('compiler', )),
     ('--force-reinstall', 'install the compiled mmcv wheel',
      ('PIP_INDEX_URL', )),
     ('tests.txt', 'install test and lint tools', ('PIP_INDEX_URL', )),
     ('check_stack.py', 'prove the stack', ('check', ))])
def test_failing_step_names_itself_and_leaves_no_stamp(chain, fail_on, step,
                                                       words):
    venv = str(chain.tmp / 'v')
    os.makedirs(venv)
    open(osp.join(venv, '.mmlocat-stack-0123456789abcdef'), 'w').close()
    result = chain.run(venv, STUB_FAIL=fail_on, STUB_FAIL_MSG=NO_NETWORK)
    assert_failed_at(result, step, *words)
    assert NO_NETWORK in result.stderr  # pip's own reason is shown
    assert stamps(venv) == []  # neither a new nor the stale stamp
    if fail_on == 'mmcv==2.1.0':
        assert chain.cached_wheels() == []  # no half-built wheel cached


@pytest.mark.parametrize('missing', ['g++', 'gcc'])
def test_missing_compiler_fails_before_building(chain, missing):
    chain.remove(missing)
    venv = str(chain.tmp / 'v')
    result = chain.run(venv)
    assert_failed_at(result, 'compile mmcv 2.1.0 with CPU ops',
                     f"'{missing}' is not on PATH", 'apt-get install g++')
    assert wheel_builds(result) == [] and stamps(venv) == []


def cuda_build(result: Result) -> dict:
    build, = wheel_builds(result)
    assert build['env']['FORCE_CUDA'] == '1', build
    return build


def test_gpu_and_nvcc_on_path_compile_cuda_ops(chain):
    nvcc = chain.add_compiler('nvcc', str(chain.tmp / 'cuda' / 'bin'))
    chain.env['PATH'] = f'{osp.dirname(nvcc)}:{chain.env["PATH"]}'
    venv = str(chain.tmp / 'v')
    result = chain.run(venv, STUB_GPU_ARCHS='8.0;9.0')
    assert_ok(result)
    env = cuda_build(result)['env']
    assert env['TORCH_CUDA_ARCH_LIST'] == '8.0;9.0'
    assert env['CUDA_HOME'] == str(chain.tmp / 'cuda')
    assert 'CUDA_VISIBLE_DEVICES' not in env
    # the nvcc wrapper rewrites mmcv's -std=c++17 and runs the real nvcc
    assert 'nvcc -O2 -std=c++20 -c op.cpp' in result.compilers
    assert chain.cached_wheels() == [
        f'wheels/torch-{TORCH}-cp311-cu13.0-arch8.0_9.0/{MMCV_WHEEL}'
    ]
    check, = [
        c for c in result.calls if c['args'][0].endswith('check_stack.py')
    ]
    assert check['args'][1:] == ['--expect-cuda']
    assert len(stamps(venv)) == 1


def test_cuda_home_and_explicit_arch_list_without_gpu(chain):
    """A login node: no GPU, the architectures named by the user."""
    chain.add_compiler('nvcc', str(chain.tmp / 'cuda-13' / 'bin'))
    result = chain.run(
        str(chain.tmp / 'v'),
        CUDA_HOME=str(chain.tmp / 'cuda-13'),
        TORCH_CUDA_ARCH_LIST='9.0+PTX')
    assert_ok(result)
    env = cuda_build(result)['env']
    assert env['TORCH_CUDA_ARCH_LIST'] == '9.0+PTX'
    assert env['CUDA_HOME'] == str(chain.tmp / 'cuda-13')
    assert chain.cached_wheels() == [
        f'wheels/torch-{TORCH}-cp311-cu13.0-arch9.0+PTX/{MMCV_WHEEL}'
    ]


@pytest.mark.parametrize(
    'torch_cuda, gpus, with_nvcc, mode, message',
    [
        # this machine: PyPI's CUDA torch, no GPU, no nvcc
        ('13.0', 'none', False, 'auto', 'no GPU visible'),
        ('13.0', 'none', True, 'auto', 'no GPU visible'),
        ('13.0', '9.0', False, 'auto',
         'NOTE: torch has CUDA 13.0 but no nvcc'),
        ('none', '9.0', True, 'auto', 'torch is a CPU build'),
        ('13.0', '9.0', True, 'cpu', ''),
    ])
def test_cpu_ops_chosen(chain, torch_cuda, gpus, with_nvcc, mode, message):
    if with_nvcc:
        chain.add_compiler('nvcc')
    result = chain.run(
        str(chain.tmp / 'v'),
        STUB_TORCH_CUDA=torch_cuda,
        STUB_GPU_ARCHS=gpus,
        MMLOCAT_MMCV=mode)
    assert_ok(result)
    build, = wheel_builds(result)
    assert build['env']['FORCE_CUDA'] == '0'
    assert message in result.stdout
    assert chain.cached_wheels()[0].startswith(f'wheels/torch-{TORCH}-cp311-'
                                               'cpu/')


@pytest.mark.parametrize('torch_cuda, gpus, nvcc_version, words', [
    ('13.0', '9.0', None,
     ('no CUDA compiler', 'CUDA toolkit 13.0', 'CUDA_HOME')),
    ('none', '9.0', '13.0', ('CPU-only build', 'MMLOCAT_MMCV=cpu')),
    ('13.0', 'none', '13.0', ('TORCH_CUDA_ARCH_LIST', "'8.0;9.0'")),
    ('13.0', '9.0', '12.4',
     ('CUDA 12.4', 'built with CUDA 13.0', 'CUDA toolkit 13.0')),
    ('13.0', '9.0', '', ('cannot read the CUDA version', 'CUDA toolkit')),
])
def test_mmcv_cuda_refuses_what_cannot_work(chain, torch_cuda, gpus,
                                            nvcc_version, words):
    if nvcc_version is not None:
        chain.add_compiler('nvcc')
    venv = str(chain.tmp / 'v')
    result = chain.run(
        venv,
        MMLOCAT_MMCV='cuda',
        STUB_TORCH_CUDA=torch_cuda,
        STUB_GPU_ARCHS=gpus,
        STUB_NVCC_VERSION=nvcc_version or '')
    assert_failed_at(result, 'choose the mmcv 2.1.0 build', *words)
    assert wheel_builds(result) == [] and stamps(venv) == []


def test_auto_with_mismatched_nvcc_fails_instead_of_guessing(chain):
    chain.add_compiler('nvcc')
    result = chain.run(
        str(chain.tmp / 'v'), STUB_GPU_ARCHS='9.0', STUB_NVCC_VERSION='12.8')
    assert_failed_at(result, 'choose the mmcv 2.1.0 build', 'CUDA 12.8',
                     'CUDA toolkit 13.0')
    assert wheel_builds(result) == []


def test_skip_keeps_an_installed_mmcv(chain):
    venv = str(chain.tmp / 'v')
    assert_ok(chain.run(venv, MMLOCAT_MMCV='cpu'))  # installs mmcv
    result = chain.run(venv, MMLOCAT_MMCV='skip')
    assert_ok(result)
    assert 'keeping mmcv 2.1.0' in result.stdout
    assert wheel_builds(result) == []
    assert not any(
        any('mmcv' in a for a in c['args'])
        for c in pip_calls(result, 'install'))
    assert len(stamps(venv)) == 1


def test_skip_without_mmcv_and_unknown_mode_fail(chain):
    venv = str(chain.tmp / 'v')
    result = chain.run(venv, MMLOCAT_MMCV='skip')
    assert_failed_at(result, 'keep the installed mmcv', 'no importable mmcv',
                     'MMLOCAT_MMCV=auto')
    assert stamps(venv) == []
    result = chain.run(venv, MMLOCAT_MMCV='gpu')
    assert_failed_at(result, 'read MMLOCAT_MMCV', "'gpu'", 'auto, cpu')
    assert result.calls == []
