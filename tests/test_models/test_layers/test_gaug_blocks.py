"""Block planning and bias filling of the chunked GAug kernel."""
import pytest
import torch

from mmlocat.models.layers.gaug._blocks import (DEFAULT_BLOCK_ELEMENTS,
                                                BlockPlan, fill_bias, new_bias,
                                                plan_blocks, query_blocks)


def test_small_problems_are_one_call():
    # ViT-T at 224, batch 8: the whole bias is 0.9M elements.
    plan = plan_blocks(8, 3, 196, 197)
    assert plan == BlockPlan(batch=8, heads=3, queries=196)


def test_large_grids_split_queries_in_kernel_tiles():
    # ViT-T at 1024: one head, 768 queries (3 tiles of 256) per call.
    plan = plan_blocks(1, 3, 4096, 4097)
    assert plan == BlockPlan(batch=1, heads=1, queries=768)
    assert plan.queries * 4097 <= DEFAULT_BLOCK_ELEMENTS
    # ViT-B at 512: all queries, 3 of the 12 heads per call.
    plan = plan_blocks(2, 12, 1024, 1025)
    assert plan == BlockPlan(batch=1, heads=3, queries=1024)
    assert plan.heads * plan.queries * 1025 <= DEFAULT_BLOCK_ELEMENTS


def test_forced_block_size_and_budget():
    assert plan_blocks(2, 3, 35, 36, block_size=4) == BlockPlan(2, 3, 4)
    assert plan_blocks(2, 3, 35, 36, 1, block_size=4) == BlockPlan(1, 1, 4)
    assert plan_blocks(2, 3, 35, 36, 4 * 36 * 3, 4) == BlockPlan(1, 3, 4)
    assert plan_blocks(2, 3, 35, 36, block_size=99).queries == 35
    # A budget below one kernel tile still makes progress.
    assert plan_blocks(1, 1, 4096, 4097, 10).queries == 256


def test_query_blocks_cover_all_tokens_once():
    ranges = list(query_blocks(12, 2, 4))
    assert ranges == [(0, 2), (2, 6), (6, 10), (10, 12)]
    assert list(query_blocks(5, 0, 5)) == [(0, 5)]


@pytest.mark.parametrize('num_prefix', [0, 3])
def test_bias_is_the_outer_product(num_prefix):
    rows = torch.rand(2, 3, 4, 5)  # 4 query patches on a 5 x 6 grid
    cols = torch.rand(2, 3, 4, 6)
    bias = new_bias(rows, cols, num_prefix, num_prefix + 30, torch.float32)
    assert bias.shape == (2, 3, 4, num_prefix + 30)
    assert torch.count_nonzero(bias[..., :num_prefix]) == 0
    ref = rows[..., :, None] * cols[..., None, :]
    torch.testing.assert_close(bias[..., num_prefix:], ref.flatten(-2))
    # Writing into a reused (dirty) buffer gives the same.
    buffer = torch.full_like(bias, float('nan'))
    torch.testing.assert_close(fill_bias(buffer, rows, cols, num_prefix), bias)
    # A low-precision buffer holds the rounded float32 product.
    low = new_bias(rows, cols, num_prefix, num_prefix + 30, torch.bfloat16)
    torch.testing.assert_close(low, bias.bfloat16())
