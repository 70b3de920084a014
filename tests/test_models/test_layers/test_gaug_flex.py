"""FlexAttention GAug kernel: the statically compiled kernel over a sequence
of input shapes, its compile budget and fallback, limits on CPU and clear
errors (the eager kernel's exactness against the dense bias is in
test_gaug_kernels.py, the dispatcher)."""
import logging

import mmengine.logging
import pytest
import torch
from _gaug_inputs import random_gaug
from _gaug_inputs import random_qkv as _random_qkv
from torch._dynamo.eval_frame import _debug_get_cache_entry_list

import mmlocat.models.layers.gaug.flex as gaug_flex
from mmlocat.models.layers import (GaussianAugment, flex_gaug_attention,
                                   gaug_attention)
from mmlocat.models.layers.gaug.flex import flex_available

TOL = dict(atol=1e-5, rtol=1e-5)

# (training grid, actual grid, prefix tokens, clamp). With one batch item,
# two heads and 8 channels the compile key is the token count N, so the
# design says: 2 compilations (N = 13 and 12) for these 11 inputs. They
# change the grid (also beyond the training grid: variance rescale and
# clamp active), are non-square, have 0, 1, 2 or 5 prefix tokens (CLS,
# registers) and switch the clamp on and off -- none of it recompiles.
SEQUENCE = [
    ((3, 4), (3, 4), 1, True),  # N = 13: compile 1
    ((3, 4), (4, 3), 1, True),
    ((3, 4), (2, 4), 5, True),  # CLS + 4 registers
    ((2, 2), (3, 4), 1, True),  # beyond the training grid, clamp active
    ((2, 2), (4, 3), 1, False),  # clamp off
    ((4, 3), (3, 4), 0, True),  # no prefix (GAP), N = 12: compile 2
    ((4, 3), (4, 3), 0, False),
    ((3, 3), (2, 5), 2, True),
    ((2, 2), (6, 2), 0, True),
    ((2, 2), (1, 12), 0, True),
    ((3, 4), (3, 4), 1, True),  # the first shape again: cached
]
EXPECTED_COMPILES = 2


def random_qkv(gaug, hw, batch=1, heads=2, seed=1):
    return _random_qkv(gaug, hw, batch=batch, heads=heads, seed=seed)


@pytest.fixture
def fresh_compile_cache():
    """No compiled kernel or bookkeeping leaks into or out of a test."""
    torch._dynamo.reset()
    gaug_flex.reset_flex_compile_cache()
    budget = gaug_flex.flex_compile_budget()
    yield
    gaug_flex.set_flex_compile_budget(budget)
    gaug_flex.reset_flex_compile_cache()
    torch._dynamo.reset()


@pytest.fixture
def warnings_log(monkeypatch):
    """Every message the kernel logs, with its level."""
    logged = []
    monkeypatch.setattr(
        mmengine.logging,
        'print_log',
        lambda msg, logger=None, level=logging.INFO: logged.append(
            (level, msg)))
    return logged


def compiled_entries():
    """dynamo's compiled variants of the kernel's one code object."""
    return len(_debug_get_cache_entry_list(gaug_flex._flex_core.__code__))


def failing_backend(gm, example_inputs):
    raise RuntimeError('forced compile failure (test)')


def test_compiled_flex_over_a_shape_sequence(fresh_compile_cache, warnings_log,
                                             monkeypatch):
    # The kernel's own budget governs, not dynamo's global recompile limit
    # (whose default, 8, would silently run eager flex beyond it).
    # (config.patch, not monkeypatch: its undo would delete the option)
    with torch._dynamo.config.patch(recompile_limit=1):
        for train_grid, hw, num_prefix, clamp in SEQUENCE:
            gaug = random_gaug(train_grid, num_prefix, clamp)
            q, k, v = random_qkv(gaug, hw)
            with torch.no_grad():
                ref = gaug_attention(q, k, v, gaug, hw, impl='dense')
                out = gaug_attention(q, k, v, gaug, hw, impl='flex')
            torch.testing.assert_close(
                out, ref, **TOL, msg=f'{train_grid} {hw} {num_prefix}')
    assert compiled_entries() == EXPECTED_COMPILES
    assert gaug_flex.flex_compile_stats() == dict(
        compiled=EXPECTED_COMPILES, failed=0, budget=16)
    assert warnings_log == []

    # A compile failure (a new key: two batch items) logs one warning and
    # runs the chunked kernel, also on the next call; compiled keys stay.
    monkeypatch.setitem(
        gaug_flex._STATE, 'compiled',
        torch.compile(
            gaug_flex._flex_core,
            backend=failing_backend,
            dynamic=False,
            fullgraph=True))
    gaug = random_gaug((3, 4), 1, True)
    q, k, v = random_qkv(gaug, (3, 4), batch=2)
    for _ in range(2):
        with torch.no_grad():
            ref = gaug_attention(q, k, v, gaug, (3, 4), impl='dense')
            out = gaug_attention(q, k, v, gaug, (3, 4), impl='flex')
        torch.testing.assert_close(out, ref, **TOL)
    assert len(warnings_log) == 1
    level, msg = warnings_log[0]
    assert level == logging.WARNING
    assert 'forced compile failure' in msg and 'chunked kernel' in msg
    assert '(2, 2, 13, 8)' in msg
    assert gaug_flex.flex_compile_stats()['failed'] == 1
    assert compiled_entries() == EXPECTED_COMPILES


def test_compile_budget_falls_back_with_one_warning(fresh_compile_cache,
                                                    warnings_log):
    gaug_flex.set_flex_compile_budget(0)
    for hw in ((3, 4), (5, 4), (3, 4)):
        gaug = random_gaug((3, 4), 1, True)
        q, k, v = random_qkv(gaug, hw)
        with torch.no_grad():
            ref = gaug_attention(q, k, v, gaug, hw, impl='dense')
            out = gaug_attention(q, k, v, gaug, hw, impl='flex')
        torch.testing.assert_close(out, ref, **TOL)
    assert len(warnings_log) == 1
    assert 'compile budget of 0' in warnings_log[0][1]
    assert compiled_entries() == 0
    # Called directly, the kernel says why it cannot run.
    with torch.no_grad(), pytest.raises(gaug_flex.FlexFallback):
        var, alpha = gaug(q, hw, return_factors=True)
        flex_gaug_attention(q, k, v, var, alpha, hw, gaug.eps, None, 1)


@pytest.mark.parametrize('budget', [-1, 1.5, True, '4'])
def test_bad_budget_raises(budget):
    with pytest.raises(ValueError, match='budget must be an int >= 0'):
        gaug_flex.set_flex_compile_budget(budget)


def test_compile_key():
    q = torch.zeros(1, 2, 13, 8)
    key = gaug_flex.flex_compile_key(q, q, q, False)
    assert key == gaug_flex.flex_compile_key(q.clone(), q, q, False)
    assert key != gaug_flex.flex_compile_key(q, q, q, True)
    assert key != gaug_flex.flex_compile_key(q.half(), q, q, False)
    # Strides matter: dynamo guards on them.
    t = torch.zeros(1, 13, 2, 8).transpose(1, 2)
    assert key != gaug_flex.flex_compile_key(t, q, q, False)


def setup(requires_grad=False):
    torch.manual_seed(0)
    gaug = GaussianAugment(8, (3, 4), 1)
    q, k, v = torch.randn(3, 1, 2, 13, 8).unbind(0)
    q.requires_grad_(requires_grad)
    var, alpha = gaug(q, (3, 4), return_factors=True)
    return gaug, q, k, v, var, alpha


def test_no_backward_on_cpu():
    gaug, q, k, v, var, alpha = setup(requires_grad=True)
    with pytest.raises(
            NotImplementedError, match=r"gaug_cfg=dict\(impl='chunked'\)"):
        flex_gaug_attention(
            q,
            k,
            v,
            var,
            alpha, (3, 4),
            gaug.eps,
            gaug.clamp_value(),
            1,
            compiled=False)


def test_shape_mismatch_raises():
    gaug, q, k, v, var, alpha = setup()
    with torch.no_grad(), pytest.raises(ValueError, match='does not fit'):
        flex_gaug_attention(
            q, k, v, var, alpha, (4, 4), gaug.eps, None, 1, compiled=False)


def test_available_on_cpu():
    assert flex_available(torch.device('cpu'))
