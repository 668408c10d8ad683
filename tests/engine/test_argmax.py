"""row_argmax against torch's argmax: the same column on every row, ties, NaN and tails."""

from __future__ import annotations

import pytest
import torch

from engine.runtime.argmax import BLOCK, MIN_ELEMENTS, row_argmax

pytestmark = pytest.mark.unit


@pytest.mark.parametrize("width", [BLOCK * 64, BLOCK * 64 + 37, 151936, 3 * BLOCK - 1, 100])
@pytest.mark.parametrize("rows", [1, 2, 64])
def test_matches_argmax_on_random_rows(rows: int, width: int) -> None:
    g = torch.Generator().manual_seed(rows * width)
    x = torch.randn(rows, width, generator=g)
    assert torch.equal(row_argmax(x), x.argmax(dim=-1))


def wide(rows: int, blocks: int, tail: int) -> int:
    """A width of ``blocks`` whole blocks and ``tail`` columns more, widened by whole
    blocks until ``rows`` rows of it take the blockwise path."""
    while rows * (blocks * BLOCK + tail) < MIN_ELEMENTS:
        blocks *= 2
    return blocks * BLOCK + tail


def test_ties_take_the_first_column_in_a_block_across_blocks_and_in_the_tail() -> None:
    width = wide(6, 8, 50)
    last = (width // BLOCK) * BLOCK  # the tail's first column
    x = torch.zeros(6, width)
    x[0, [5, 9]] = 1.0  # two in one block
    x[1, [BLOCK + 3, 5 * BLOCK + 1]] = 1.0  # in two blocks
    x[2, [2 * BLOCK, last + 10]] = 1.0  # in a block and in the tail
    x[3, [last + 4, last + 40]] = 1.0  # only in the tail
    x[4] = float("-inf")  # every column alike: the first
    x[5, 7 * BLOCK - 1] = 2.0  # the last column of a block
    got = row_argmax(x)
    assert got.tolist() == [5, BLOCK + 3, 2 * BLOCK, last + 4, 0, 7 * BLOCK - 1]
    assert torch.equal(got, x.argmax(dim=-1))


def test_nan_is_the_largest_value_as_in_argmax() -> None:
    width = wide(4, 4, 20)
    last = (width // BLOCK) * BLOCK
    x = torch.randn(4, width, generator=torch.Generator().manual_seed(1))
    x[0, 3 * BLOCK + 2] = float("nan")
    x[1, [BLOCK + 1, 2 * BLOCK]] = float("nan")
    x[2, last + 5] = float("nan")  # only in the tail
    x[2, 0] = 100.0
    got = row_argmax(x)
    assert got.tolist()[:3] == [3 * BLOCK + 2, BLOCK + 1, last + 5]
    assert torch.equal(got, x.argmax(dim=-1))


def test_a_strided_view_of_rows_is_handled() -> None:
    x = torch.randn(8, wide(4, 10, 3), generator=torch.Generator().manual_seed(2))
    rows = x[::2]
    assert torch.equal(row_argmax(rows), rows.argmax(dim=-1))


def test_the_widths_above_take_the_blockwise_path() -> None:
    # Guards the tests above: each of them must exercise the blocks, not the fallback.
    for rows, width in [(6, wide(6, 8, 50)), (4, wide(4, 4, 20)), (4, wide(4, 10, 3))]:
        assert rows * width >= MIN_ELEMENTS and width // BLOCK >= 2 and width % BLOCK
